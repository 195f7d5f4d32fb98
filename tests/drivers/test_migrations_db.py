"""The migrator against real SQLite files and real (scratch) Postgres databases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from conformance.schema_dump import dump_postgres, dump_sqlite
from river_db.connect import open_connection
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_db.urls import dialect_of_url, sqlite_file_path, sqlite_path
from river_protocol.errors import MigrationError, ValidationError


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, sqlite_path: str) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("scratch_pg_url"))
    return f"sqlite://{sqlite_path}"


@pytest.fixture
def migrator(db_url: str) -> Iterator[Migrator]:
    with Migrator(db_url) as m:
        yield m


def _rows(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def _tables(m: Migrator, schema: str | None = None) -> list[str]:
    if m.dialect_name == "postgres":
        rows = _rows(m.conn, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1",
                     (schema or "public",))
    else:
        db = schema or "main"
        rows = _rows(m.conn, f"SELECT name FROM \"{db}\".sqlite_master WHERE type = 'table' "
                             "AND name NOT LIKE 'sqlite_%' ORDER BY 1")
    return [r[0] for r in rows]


def _dump(m: Migrator) -> dict[str, Any]:
    if m.dialect_name == "postgres":
        return dump_postgres(m.conn)
    return dump_sqlite(m.conn)


RIVER_TABLES = ["river_job", "river_leader", "river_migration", "river_notification", "river_queue"]


# ---------------------------------------------------------------- up / down


def test_migrate_up_applies_all_versions(migrator: Migrator) -> None:
    assert migrator.get_versions() == []
    result = migrator.migrate_up()
    assert result.direction == "up" and not result.dry_run
    assert [v.version for v in result.versions] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert result.versions[1].name == "initial schema"
    assert result.versions[7].name == "job id autoincrement"
    assert all(v.duration > 0 for v in result.versions)
    assert "river_leader" in result.versions[1].sql
    assert migrator.get_versions() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert _tables(migrator) == RIVER_TABLES
    assert migrator.validate().ok
    assert migrator.migrate_up().versions == []


def test_migrate_down_one_step_at_a_time(migrator: Migrator) -> None:
    migrator.migrate_up()
    for remaining in range(7, -1, -1):
        result = migrator.migrate_down()
        assert [v.version for v in result.versions] == [remaining + 1]
        assert migrator.get_versions() == list(range(1, remaining + 1))
    assert _tables(migrator) == []
    assert migrator.migrate_down().versions == []


def test_target_version_and_max_steps(migrator: Migrator) -> None:
    assert [v.version for v in migrator.migrate_up(target_version=3).versions] == [1, 2, 3]
    assert [v.version for v in migrator.migrate_up(max_steps=2).versions] == [4, 5]
    assert migrator.validate().unapplied == [6, 7, 8]
    assert migrator.validate(target_version=5).ok
    migrator.migrate_up()
    assert [v.version for v in migrator.migrate_down(target_version=4).versions] == [8, 7, 6, 5]
    with pytest.raises(MigrationError, match="not applied"):
        migrator.migrate_down(target_version=6)
    with pytest.raises(MigrationError, match="not a valid"):
        migrator.migrate_up(target_version=99)
    assert [v.version for v in migrator.migrate_down(target_version=-1).versions] == [4, 3, 2, 1]


def test_round_trip_restores_the_same_schema(migrator: Migrator) -> None:
    migrator.migrate_up()
    first = _dump(migrator)
    migrator.migrate_down(target_version=-1)
    migrator.migrate_up()
    assert _dump(migrator) == first


def test_migrate_method_and_bad_direction(migrator: Migrator) -> None:
    assert [v.version for v in migrator.migrate("up", max_steps=1).versions] == [1]
    with pytest.raises(ValidationError, match="direction"):
        migrator.migrate("sideways")


def test_dry_run_changes_nothing(migrator: Migrator) -> None:
    result = migrator.migrate_up(dry_run=True)
    assert result.dry_run and [v.version for v in result.versions] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert all(v.duration == 0.0 and v.sql for v in result.versions)
    assert "CREATE TABLE" in result.versions[0].sql
    assert migrator.get_versions() == [] and _tables(migrator) == []
    migrator.migrate_up()
    down = migrator.migrate_down(target_version=-1, dry_run=True)
    assert [v.version for v in down.versions] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert migrator.get_versions() == [1, 2, 3, 4, 5, 6, 7, 8]


def test_failed_version_rolls_back_and_is_reported(migrator: Migrator) -> None:
    migrator.migrate_up(target_version=1)
    # Sabotage version 2: its tables already exist, so its script fails part-way.
    migrator.conn.cursor().execute("CREATE TABLE river_leader (x int)")
    with pytest.raises(MigrationError, match=r"error applying version 002 \[UP\]"):
        migrator.migrate_up()
    assert migrator.get_versions() == [1]
    assert "river_job" not in _tables(migrator)


# ---------------------------------------------------------------- bookkeeping across versions


def test_pre_v5_table_without_line_is_read_as_main(migrator: Migrator) -> None:
    migrator.migrate_up(target_version=4)
    cols = (
        _rows(migrator.conn, "SELECT column_name FROM information_schema.columns "
                             "WHERE table_name = 'river_migration'")
        if migrator.dialect_name == "postgres"
        else _rows(migrator.conn, "SELECT name FROM pragma_table_info('river_migration')")
    )
    assert "line" not in {c[0] for c in cols}
    assert migrator.get_versions() == [1, 2, 3, 4]
    migrator.migrate_up()
    assert _rows(migrator.conn, "SELECT line, version FROM river_migration ORDER BY version") == [
        ("main", v) for v in range(1, 9)
    ]


def test_rows_of_other_lines_are_tolerated_but_block_reverting_v5(migrator: Migrator) -> None:
    migrator.migrate_up()
    ph = "%s" if migrator.dialect_name == "postgres" else "?"
    migrator.conn.cursor().execute(
        f"INSERT INTO river_migration (line, version) VALUES ({ph}, {ph})", ("workflow", 1)
    )
    assert migrator.get_versions() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert migrator.validate().ok
    migrator.migrate_down(target_version=5)
    assert migrator.get_versions() == [1, 2, 3, 4, 5]
    with pytest.raises(MigrationError, match="005"):
        migrator.migrate_down()
    assert migrator.get_versions() == [1, 2, 3, 4, 5]
    assert ("workflow", 1) in _rows(migrator.conn, "SELECT line, version FROM river_migration")


def test_unknown_line_is_refused(db_url: str) -> None:
    with pytest.raises(MigrationError, match="migration line does not exist"):
        Migrator(db_url, line="workflow")


# ---------------------------------------------------------------- connections and SQL


def test_open_connection_passed_in_is_left_open(db_url: str) -> None:
    conn, dialect = open_connection(db_url)
    try:
        with Migrator(conn) as m:
            assert m.dialect_name == dialect == dialect_of_url(db_url)
            m.migrate_up(max_steps=2)
        assert _rows(conn, "SELECT count(*) FROM river_migration") == [(2,)]
    finally:
        conn.close()


def test_non_autocommit_connections_are_refused(sqlite_path: str) -> None:
    import sqlean  # type: ignore[import-untyped]

    conn = sqlean.connect(sqlite_path)
    try:
        with pytest.raises(ValidationError, match="isolation_level=None"):
            Migrator(conn)
    finally:
        conn.close()


def test_urls_and_paths(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sqlite_path("sqlite://river.sqlite3") == "river.sqlite3"
    assert sqlite_path("sqlite:///abs/river.db") == "/abs/river.db"
    assert sqlite_path("some/file.db") == "some/file.db"
    assert dialect_of_url("postgresql://x/y") == dialect_of_url("postgres://x") == "postgres"
    assert dialect_of_url("file.db") == "sqlite"
    for bad in ("mysql://x", "sqlite://", "sqlite://x.db?mode=ro"):
        with pytest.raises(ValidationError):
            sqlite_file_path(bad) if bad.startswith("sqlite") else dialect_of_url(bad)
    assert sqlite_path("sqlite://") == ":memory:"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RIVER_DATABASE_URL", raising=False)
    conn, dialect = open_connection(None)
    conn.close()
    assert dialect == "sqlite" and (tmp_path / "river.sqlite3").exists()


def test_get_sql_and_all_versions(db_url: str) -> None:
    with Migrator(db_url) as m:
        assert [v.version for v in m.all_versions()] == [1, 2, 3, 4, 5, 6, 7, 8]
        assert "TEMPLATE" not in m.get_sql(5, "up")
        assert "DROP TABLE river_migration" in m.get_sql(1, "down")
        with pytest.raises(MigrationError, match="not found"):
            m.get_sql(9, "up")


# ---------------------------------------------------------------- dialect specifics


@pytest.mark.postgres
def test_postgres_custom_schema(scratch_pg_url: str) -> None:
    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA river_custom")
    with Migrator(scratch_pg_url, schema="river_custom") as m:
        assert 'to_regclass(\'"river_custom".river_migration\')' in m.get_sql(5, "up")
        m.migrate_up(target_version=2)
        assert _tables(m, "river_custom") == ["river_job", "river_leader", "river_migration"]
        assert _tables(m) == []
        # Version 2's insert trigger notifies on the unqualified channel, whatever the schema.
        m.conn.execute("LISTEN river_insert")
        m.conn.execute(
            "INSERT INTO river_custom.river_job (args, kind, max_attempts) VALUES ('{}', 'k', 1)"
        )
        notes = list(m.conn.notifies(timeout=0, stop_after=1))
        assert [(n.channel, json.loads(n.payload)) for n in notes] == [("river_insert", {"queue": "default"})]
        m.migrate_up()
        assert m.get_versions() == [1, 2, 3, 4, 5, 6, 7, 8]
        assert _tables(m, "river_custom") == RIVER_TABLES
        indexes = dict(_rows(m.conn, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s",
                             ("river_custom",)))
        predicate = "river_custom.river_job_state_in_bitmask(unique_states, state)"
        assert predicate in indexes["river_job_unique_idx"]
        m.migrate_down(target_version=-1)
        assert _tables(m, "river_custom") == []
        assert _rows(m.conn, "SELECT count(*) FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                             "WHERE n.nspname = 'river_custom' AND t.typname = 'river_job_state'") == [(0,)]


def test_sqlite_attached_schema(tmp_path: Any) -> None:
    conn = connect_sqlite(str(tmp_path / "main.db"))
    try:
        conn.execute("ATTACH DATABASE ? AS other", (str(tmp_path / "other.db"),))
        with Migrator(conn, schema="other") as m:
            m.migrate_up()
            assert m.get_versions() == [1, 2, 3, 4, 5, 6, 7, 8]
            assert _tables(m, "other") == RIVER_TABLES
            assert _tables(m) == []
            m.migrate_down(target_version=-1)
            assert _tables(m, "other") == []
    finally:
        conn.close()


def test_sqlite_v7_converts_json_text_to_jsonb_and_back(sqlite_path: str) -> None:
    with Migrator(sqlite_path) as m:
        m.migrate_up(target_version=6)
        m.conn.execute(
            "INSERT INTO river_job (args, kind, max_attempts, tags, errors, metadata) "
            "VALUES ('{\"a\": 1}', 'k', 7, '[\"t\"]', NULL, '{\"m\": true}')"
        )
        m.migrate_up(target_version=7)
        row = m.conn.execute(
            "SELECT json(args), json(tags), errors, json(metadata), max_attempts, typeof(args) FROM river_job"
        ).fetchone()
        assert row == ('{"a":1}', '["t"]', None, '{"m":true}', 7, "blob")
        # A new row takes the JSONB defaults and max_attempts 25.
        m.conn.execute("INSERT INTO river_job (kind) VALUES ('k2')")
        assert m.conn.execute(
            "SELECT json(args), json(tags), max_attempts FROM river_job WHERE kind = 'k2'"
        ).fetchone() == ("{}", "[]", 25)
        m.conn.execute("DELETE FROM river_job WHERE kind = 'k2'")
        m.migrate_down()
        assert m.conn.execute("SELECT args, typeof(args), max_attempts FROM river_job").fetchone() == (
            '{"a":1}', "text", 7,
        )
