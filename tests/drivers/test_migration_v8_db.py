"""River's migration 8 (job ids never reused on SQLite; a no-op on Postgres) against real databases:
the catalogs at 8 and after going back to 7, rows kept across 8 -> 7 -> 8, ids, and the refusal
while River Pro's schema is installed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conformance.river_v8 import postgres_catalog_at_8, sqlite_catalog_at_8
from conformance.schema_dump import (
    differences,
    dump_postgres,
    dump_sqlite,
    postgres_keyed,
    sqlite_keyed,
)
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.errors import MigrationError, RiverProSchemaError
from river_protocol.migrations import render, split_statements

FIXTURES = Path(__file__).resolve().parents[2] / "conformance" / "fixtures"

# Explicit columns: SQLite's river_job has max_attempts in another place at 7 than at 8.
_SQLITE_ROW = ("SELECT id, json(args), attempt, attempted_at, json(attempted_by), created_at, json(errors), "
               "finalized_at, kind, max_attempts, json(metadata), priority, queue, state, scheduled_at, "
               "json(tags), unique_key, unique_states FROM river_job ORDER BY id")
_POSTGRES_ROW = ("SELECT id, args, attempt, attempted_at, attempted_by, created_at, errors, finalized_at, "
                 "kind, max_attempts, metadata, priority, queue, state, scheduled_at, tags, unique_key, "
                 "unique_states FROM river_job ORDER BY id")


def _fixture(name: str) -> dict[str, Any]:
    catalog: dict[str, Any] = json.loads((FIXTURES / name).read_text())["catalog"]
    return catalog


def _sqlite_diff(m: Migrator, expected: dict[str, Any]) -> list[str]:
    return differences(sqlite_keyed(expected), sqlite_keyed(dump_sqlite(m.conn)), readable=True)


def _postgres_diff(m: Migrator, expected: dict[str, Any]) -> list[str]:
    return differences(postgres_keyed(expected), postgres_keyed(dump_postgres(m.conn)), readable=True)


def _insert_sqlite_jobs(m: Migrator, count: int) -> None:
    for n in range(count):
        m.conn.execute(
            "INSERT INTO river_job (args, kind, max_attempts, metadata, tags, errors, state, finalized_at, "
            "unique_key, unique_states) VALUES (jsonb(?), ?, ?, jsonb('{\"m\":1}'), jsonb('[\"t\"]'), "
            "jsonb('[{\"error\":\"e\"}]'), 'completed', '2026-01-02 03:04:05.000', ?, 3)",
            (json.dumps({"n": n}), f"kind_{n}", 3 + n, bytes([n])),
        )


def _ids(m: Migrator) -> list[int]:
    return [int(r[0]) for r in m.conn.execute("SELECT id FROM river_job ORDER BY id").fetchall()]


# ---------------------------------------------------------------- SQLite


def test_sqlite_catalog_at_8_is_rivers_and_down_to_7_is_river_v043s(sqlite_path: str) -> None:
    at_7 = _fixture("schema_sqlite.json")
    with Migrator(sqlite_path) as m:
        m.migrate_up(target_version=7)
        assert _sqlite_diff(m, at_7) == []
        result = m.migrate_up()
        assert [(v.version, v.name) for v in result.versions] == [(8, "job id autoincrement")]
        assert _sqlite_diff(m, sqlite_catalog_at_8(at_7)) == []
        assert [v.version for v in m.migrate_down(target_version=7).versions] == [8]
        assert m.get_versions() == [1, 2, 3, 4, 5, 6, 7]
        assert _sqlite_diff(m, at_7) == []


def test_sqlite_8_to_7_to_8_keeps_every_row_and_never_reuses_an_id_at_8(sqlite_path: str) -> None:
    with Migrator(sqlite_path) as m:
        m.migrate_up()
        _insert_sqlite_jobs(m, 3)
        m.conn.execute("DELETE FROM river_job WHERE id = 3")
        _insert_sqlite_jobs(m, 1)
        assert _ids(m) == [1, 2, 4]  # 3, the newest job's id, is not handed out again
        rows = m.conn.execute(_SQLITE_ROW).fetchall()

        m.migrate_down()
        assert m.conn.execute(_SQLITE_ROW).fetchall() == rows
        assert m.conn.execute("SELECT name FROM sqlite_sequence").fetchall() == []
        # At 7 (River v0.43's schema) SQLite's default applies: the next id is max(id) + 1.
        m.conn.execute("DELETE FROM river_job WHERE id = 4")
        _insert_sqlite_jobs(m, 1)
        assert _ids(m) == [1, 2, 3]
        rows = m.conn.execute(_SQLITE_ROW).fetchall()

        m.migrate_up()
        assert m.conn.execute(_SQLITE_ROW).fetchall() == rows
        assert m.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'river_job'").fetchall() == [(3,)]
        m.conn.execute("DELETE FROM river_job WHERE id = 3")
        _insert_sqlite_jobs(m, 1)
        assert _ids(m) == [1, 2, 4]
        # The indexes came back with the table: the unique index still refuses a duplicate.
        unique = "INSERT INTO river_job (kind, unique_key, unique_states) VALUES ('u', x'01', 1)"
        m.conn.execute(unique)
        with pytest.raises(Exception, match="UNIQUE"):
            m.conn.execute(unique)


def test_sqlite_8_in_an_attached_schema(tmp_path: Path) -> None:
    conn = connect_sqlite(str(tmp_path / "main.db"))
    try:
        conn.execute("ATTACH DATABASE ? AS other", (str(tmp_path / "other.db"),))
        with Migrator(conn, schema="other") as m:
            m.migrate_up()
            assert m.get_versions()[-1] == 8
            sql = conn.execute("SELECT sql FROM other.sqlite_master WHERE name = 'river_job'").fetchone()[0]
            assert "id integer PRIMARY KEY AUTOINCREMENT" in sql
            m.migrate_down(target_version=7)
            assert conn.execute("SELECT count(*) FROM main.sqlite_master").fetchone() == (0,)
    finally:
        conn.close()


@pytest.mark.parametrize("direction", ["up", "down"])
def test_sqlite_8_is_refused_while_river_pro_is_installed(sqlite_path: str, direction: str) -> None:
    # Stand-ins for River Pro's schema (this project never creates these names otherwise): an
    # index on river_job, which the rebuild would silently drop, and a table of its own.
    with Migrator(sqlite_path) as m:
        m.migrate_up(target_version=7 if direction == "up" else 8)
        m.conn.execute("CREATE INDEX river_job_workflow_scheduling ON river_job (state, kind)")
        m.conn.execute("CREATE TABLE river_workflow (id integer PRIMARY KEY)")
        _insert_sqlite_jobs(m, 2)
        before = dump_sqlite(m.conn)
        with pytest.raises(RiverProSchemaError) as caught:
            m.migrate(direction, target_version=8 if direction == "up" else 7)
        assert isinstance(caught.value, MigrationError)
        assert caught.value.objects == ("river_job_workflow_scheduling", "river_workflow")
        assert f"migration 008 [{direction}] refused: River Pro's schema is installed" in str(caught.value)
        assert dump_sqlite(m.conn) == before and _ids(m) == [1, 2]
        # Without River Pro's objects the same migration runs.
        m.conn.execute("DROP INDEX river_job_workflow_scheduling")
        m.conn.execute("DROP TABLE river_workflow")
        m.migrate(direction, target_version=8 if direction == "up" else 7)
        assert m.get_versions()[-1] == (8 if direction == "up" else 7)


@pytest.mark.parametrize("direction", ["up", "down"])
def test_sqlite_8_dry_run_reports_the_refusal_the_run_raises(sqlite_path: str, direction: str) -> None:
    # The same stand-ins as above.
    with Migrator(sqlite_path) as m:
        m.migrate_up(target_version=7 if direction == "up" else 8)
        m.conn.execute("CREATE INDEX river_job_workflow_scheduling ON river_job (state, kind)")
        m.conn.execute("CREATE TABLE river_workflow (id integer PRIMARY KEY)")
        before = dump_sqlite(m.conn)
        with pytest.raises(RiverProSchemaError) as dry:
            m.migrate(direction, target_version=8 if direction == "up" else 6, dry_run=True)
        assert dump_sqlite(m.conn) == before
        with pytest.raises(RiverProSchemaError) as real:
            m.migrate(direction, target_version=8 if direction == "up" else 6)
        assert str(dry.value) == str(real.value)
        assert dry.value.objects == real.value.objects == ("river_job_workflow_scheduling", "river_workflow")
        # Neither run changed the database.
        assert m.get_versions()[-1] == (7 if direction == "up" else 8)
        # Without them the dry run lists 8 and changes nothing.
        m.conn.execute("DROP INDEX river_job_workflow_scheduling")
        m.conn.execute("DROP TABLE river_workflow")
        planned = m.migrate(direction, target_version=8 if direction == "up" else 6, dry_run=True)
        assert [v.version for v in planned.versions] == ([8] if direction == "up" else [8, 7])
        assert m.get_versions()[-1] == (7 if direction == "up" else 8)


def test_sqlite_8_script_run_by_hand_refuses_by_itself(sqlite_path: str) -> None:
    # What `river migrate-get --version 8 --up` prints, run outside the migrator.
    with Migrator(sqlite_path) as m:
        m.migrate_up(target_version=7)
        m.conn.execute("CREATE TABLE river_job_sequence (id integer PRIMARY KEY)")
        before = dump_sqlite(m.conn)
        m.conn.execute("BEGIN")
        with pytest.raises(Exception, match="River SQLite migration 008 rebuilds river_job and refuses"):
            for statement in split_statements(render(m.get_sql(8, "up"), "")):
                m.conn.execute(statement)
        m.conn.execute("ROLLBACK")
        assert dump_sqlite(m.conn) == before
        m.conn.execute("DROP TABLE river_job_sequence")
        m.conn.execute("BEGIN")
        for statement in split_statements(m.get_sql(8, "up")):
            m.conn.execute(statement)
        m.conn.execute("COMMIT")
        assert "AUTOINCREMENT" in m.conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'river_job'").fetchone()[0]
        assert m.conn.execute("SELECT count(*) FROM temp.sqlite_master").fetchone() == (0,)


# ---------------------------------------------------------------- Postgres


@pytest.mark.postgres
def test_postgres_8_changes_nothing_but_its_record_and_goes_back(scratch_pg_url: str) -> None:
    at_7 = _fixture("schema_postgres.json")
    with Migrator(scratch_pg_url) as m:
        m.migrate_up(target_version=7)
        assert _postgres_diff(m, at_7) == []
        m.conn.execute("INSERT INTO river_job (args, kind, max_attempts) VALUES ('{\"a\": 1}', 'k', 3), "
                       "('{}', 'k2', 4)")
        rows = m.conn.execute(_POSTGRES_ROW).fetchall()
        assert [v.version for v in m.migrate_up().versions] == [8]
        assert _postgres_diff(m, postgres_catalog_at_8(at_7)) == []
        m.migrate_down(target_version=7)
        assert _postgres_diff(m, at_7) == [] and m.conn.execute(_POSTGRES_ROW).fetchall() == rows
        m.migrate_up()
        assert m.conn.execute(_POSTGRES_ROW).fetchall() == rows
        # A sequence never hands an id out twice, which is why 8 has nothing to do here.
        m.conn.execute("DELETE FROM river_job WHERE id = 2")
        m.conn.execute("INSERT INTO river_job (args, kind, max_attempts) VALUES ('{}', 'k3', 1)")
        assert [r[0] for r in m.conn.execute("SELECT id FROM river_job ORDER BY id").fetchall()] == [1, 3]


@pytest.mark.postgres
def test_postgres_8_runs_beside_river_pro(scratch_pg_url: str) -> None:
    # River checks for River Pro only where 8 rebuilds river_job, which is SQLite alone.
    with Migrator(scratch_pg_url) as m:
        m.migrate_up(target_version=7)
        with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE river_workflow (id bigint PRIMARY KEY)")
        assert [v.version for v in m.migrate_up(dry_run=True).versions] == [8]
        m.migrate_up()
        assert [v.version for v in m.migrate_down(dry_run=True).versions] == [8]
        m.migrate_down()
        assert m.get_versions() == [1, 2, 3, 4, 5, 6, 7]
