"""SQLite schema catalog: our migrations must build exactly River's objects, at every version
(1 to 7 from River v0.43's fixture, 8 derived from it: ``conformance.river_v8``)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from conformance.river_v8 import sqlite_catalog_at_8
from conformance.schema_dump import (
    StepwiseRun,
    check_stepwise,
    describe,
    differences,
    dump_sqlite,
    sqlite_keyed,
    sqlite_summary,
    stepwise_cases,
    stepwise_versions,
)

NAME = "schema_sqlite"
FILENAME = "schema_sqlite.json"

ATTACHED = "river_alt"
_runs: dict[str, Any] = {}


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    return [*stepwise_cases(fixture), {"id": "catalog_at_7_in_attached_schema"},
            {"id": "catalog_at_8_in_attached_schema"}]


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    if case["id"].endswith("_in_attached_schema"):
        return _check_attached(fixture, int(case["id"].split("_")[2]))
    run = _stepwise(stepwise_versions(fixture))
    if isinstance(run, str):
        return run
    return check_stepwise(case, fixture, run, sqlite_keyed, sqlite_summary, sqlite_catalog_at_8)


def _stepwise(versions: list[int]) -> StepwiseRun | str:
    if "stepwise" not in _runs:
        from river_db.migrator import Migrator

        with tempfile.TemporaryDirectory() as tmp, Migrator(os.path.join(tmp, "river.sqlite3")) as migrator:
            try:
                _runs["stepwise"] = StepwiseRun(migrator, lambda: dump_sqlite(migrator.conn), versions)
            except Exception as exc:
                _runs["stepwise"] = f"migrating step by step failed: {type(exc).__name__}: {exc}"
    result: StepwiseRun | str = _runs["stepwise"]
    return result


def _check_attached(fixture: dict[str, Any], version: int) -> str | None:
    """Migrating into an attached database (``schema``) must build the same objects there."""
    from river_db.migrator import Migrator
    from river_db.sqlite import connect_sqlite

    with tempfile.TemporaryDirectory() as tmp:
        conn = connect_sqlite(os.path.join(tmp, "main.sqlite3"))
        try:
            conn.execute(f"ATTACH DATABASE ? AS {ATTACHED}", (os.path.join(tmp, "alt.sqlite3"),))
            Migrator(conn, schema=ATTACHED).migrate_up(target_version=version)
            ours = sqlite_keyed(dump_sqlite(conn, ATTACHED))
            expected = fixture["catalog"] if version == 7 else sqlite_catalog_at_8(fixture["catalog"])
            problems = differences(sqlite_keyed(expected), ours, readable=True)
            main_tables = conn.execute("SELECT name FROM main.sqlite_master").fetchall()
            if main_tables:
                problems.append(f"main database should stay empty, has {sorted(r[0] for r in main_tables)}")
            return describe(problems)
        finally:
            conn.close()
