"""Postgres schema catalog: our migrations must build exactly River's objects, at every version
(1 to 7 from River v0.43's fixture, 8 derived from it: ``conformance.river_v8``).

Runs in a scratch database created from template0 on the server of ``options["database_url"]``
(``--database-url`` or $RIVER_TEST_DATABASE_URL) and dropped afterwards; skipped without a URL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from conformance.river_v8 import postgres_catalog_at_8
from conformance.runner import Skip
from conformance.schema_dump import (
    StepwiseRun,
    check_stepwise,
    describe,
    differences,
    dump_postgres,
    postgres_keyed,
    postgres_summary,
    stepwise_cases,
    stepwise_versions,
)

NAME = "schema_postgres"
FILENAME = "schema_postgres.json"

CUSTOM_SCHEMA = "river_alt"
_runs: dict[str, Any] = {}


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    return [*stepwise_cases(fixture), {"id": "catalog_at_7_in_custom_schema"}]


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    url = options.get("database_url")
    if not url:
        raise Skip("no Postgres URL (--database-url or RIVER_TEST_DATABASE_URL)")
    runs = _runs.get(url)
    if runs is None:
        runs = _runs[url] = _run_all(url, stepwise_versions(fixture))
    if isinstance(runs, str):
        return runs
    stepwise, custom = runs
    if case["id"] == "catalog_at_7_in_custom_schema":
        expected = postgres_keyed(fixture["catalog"])
        return describe(differences(expected, postgres_keyed(custom), readable=True))
    return check_stepwise(case, fixture, stepwise, postgres_keyed, postgres_summary, postgres_catalog_at_8)


def _run_all(url: str, versions: list[int]) -> tuple[StepwiseRun, dict[str, Any]] | str:
    import psycopg

    from river_db.migrator import Migrator

    try:
        with _scratch_database(url) as scratch, psycopg.connect(scratch, autocommit=True) as conn:
            with Migrator(scratch) as migrator:
                stepwise = StepwiseRun(migrator, lambda: _dump(conn, "public"), versions)
            conn.execute(f"CREATE SCHEMA {CUSTOM_SCHEMA}")
            with Migrator(scratch, schema=CUSTOM_SCHEMA) as migrator:
                migrator.migrate_up(target_version=7)
            return stepwise, _as_public(_dump(conn, CUSTOM_SCHEMA))
    except Exception as exc:
        return f"migrating the scratch database failed: {type(exc).__name__}: {exc}"


def _dump(conn: Any, schema: str) -> dict[str, Any]:
    # Types and regclass names print unqualified only for schemas on the search_path.
    conn.execute(f"SET search_path TO {schema}")
    return dump_postgres(conn, schema)


def _as_public(catalog: dict[str, Any]) -> dict[str, Any]:
    """Index and function definitions always name their schema: map ours to the fixture's."""
    for table in catalog["tables"].values():
        for index in table["indexes"]:
            index["definition"] = index["definition"].replace(f" {CUSTOM_SCHEMA}.", " public.")
    for function in catalog["functions"]:
        function["definition"] = function["definition"].replace(f" {CUSTOM_SCHEMA}.", " public.")
    return catalog


@contextmanager
def _scratch_database(url: str) -> Iterator[str]:
    import psycopg

    name = "river_conformance_" + uuid.uuid4().hex[:12]
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    parts = urlsplit(url)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))
    finally:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
