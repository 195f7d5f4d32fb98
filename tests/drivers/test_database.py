"""Database handles and caller-transaction adapters against real Postgres and SQLite.

The intents used here are test-local (a counter table), registered into both
dialects' planner tables, so these tests exercise the I/O layer without
depending on River's own statements.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
import sqlean  # type: ignore[import-untyped]
from psycopg_pool import ConnectionPool
from sqlalchemy import orm

from river_db.caller_tx import executor_for_caller_tx
from river_db.connect import _array_literal, connect_dedicated, open_connection, pg_idle_usable
from river_db.executor import Executor
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.base import Dialect, Plan
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import DatabaseUnavailableError, RiverError, ValidationError
from river_protocol.intents import Intent, Statement
from river_sync.database import Database
from tests.drivers.tcp_proxy import TcpProxy

# ---------------------------------------------------------------- test intents


@dataclass(frozen=True)
class AddMark(Intent):
    """Insert a mark, then count marks: two statements that must share one transaction."""

    value: str
    transactional = True


@dataclass(frozen=True)
class CountMarks(Intent):
    value: str | None = None


def _ph(dialect: Dialect) -> str:
    return "%s" if dialect.paramstyle == "format" else "?"


def plan_add_mark(dialect: Any, intent: AddMark) -> Plan[int]:
    yield Statement(f"INSERT INTO {dialect.prefix}marks (v) VALUES ({_ph(dialect)})", (intent.value,),
                    fetch=False)
    rows = yield Statement(f"SELECT count(*) FROM {dialect.prefix}marks")
    return int(rows[0][0])


def plan_count_marks(dialect: Any, intent: CountMarks) -> Plan[int]:
    if intent.value is None:
        rows = yield Statement(f"SELECT count(*) FROM {dialect.prefix}marks")
    else:
        rows = yield Statement(f"SELECT count(*) FROM {dialect.prefix}marks WHERE v = {_ph(dialect)}",
                               (intent.value,))
    return int(rows[0][0])


for _cls in (PostgresDialect, SQLiteDialect):
    _cls.planners()[AddMark] = plan_add_mark
    _cls.planners()[CountMarks] = plan_count_marks


CALLER_TABLE = "CREATE TABLE IF NOT EXISTS caller_rows (id integer PRIMARY KEY, note text NOT NULL)"
MARKS_TABLE = "CREATE TABLE IF NOT EXISTS marks (v text NOT NULL)"


def _pg_setup(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(MARKS_TABLE)
        conn.execute(CALLER_TABLE.replace("integer PRIMARY KEY", "serial PRIMARY KEY"))
        conn.execute("TRUNCATE marks, caller_rows")


def _pg_count(url: str, table: str, where: str = "") -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table} {where}").fetchone()
        assert row is not None
        return int(row[0])


def _sqlite_setup(path: str) -> None:
    conn = connect_sqlite(path)
    conn.execute(MARKS_TABLE)
    conn.execute(CALLER_TABLE)
    conn.close()


def _sqlite_count(path: str, table: str) -> int:
    conn = connect_sqlite(path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def pg_url(module_pg_url: str) -> str:
    _pg_setup(module_pg_url)
    return module_pg_url


@pytest.fixture
def sqlite_db(sqlite_path: str) -> str:
    _sqlite_setup(sqlite_path)
    return sqlite_path


def _sa_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


# ---------------------------------------------------------------- common behaviour


def _exercise(db: Database) -> None:
    """Runs the behaviour every source kind must have: run, executor, commit, rollback."""
    assert db.run(AddMark("a")) == 1
    with db.executor() as ex:
        assert isinstance(ex, Executor)
        assert ex.run(CountMarks()) == 1
    with db.transaction() as ex:
        ex.run(AddMark("b"))
    assert db.run(CountMarks("b")) == 1
    with pytest.raises(RuntimeError, match="boom"), db.transaction() as ex:
        ex.run(AddMark("c"))
        assert ex.run(CountMarks("c")) == 1
        raise RuntimeError("boom")
    assert db.run(CountMarks("c")) == 0
    # Many sequential borrowers: connections must come back to the pool.
    for i in range(12):
        with db.executor() as ex:
            ex.run(AddMark(f"n{i}"))
    assert db.run(CountMarks()) == 14


def test_from_url_postgres(pg_url: str) -> None:
    with Database.from_url(pg_url, pool_size=2, timeout=5) as db:
        assert isinstance(db.dialect, PostgresDialect)
        assert db.dialect.schema is None
        _exercise(db)
    assert db.closed
    with pytest.raises(RiverError, match="closed"), db.executor():
        pass


def test_own_postgres_sessions_read_times_in_utc_and_configure_runs_after(pg_url: str) -> None:
    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET application_name = 'river-utc-test'")

    with Database.from_url(pg_url, pool_size=1, configure=configure) as db, db.executor() as ex:
        assert ex.conn.execute("SHOW TimeZone").fetchone() == ("UTC",)
        assert ex.conn.execute("SHOW application_name").fetchone() == ("river-utc-test",)
        [(at,)] = ex.conn.execute("SELECT '2024-05-06 07:08:09.123456+02'::timestamptz").fetchall()
        assert at.tzinfo is UTC and at == datetime(2024, 5, 6, 5, 8, 9, 123456, tzinfo=UTC)

    def own_zone(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET TimeZone TO 'Europe/Paris'")

    with Database.from_url(pg_url, pool_size=1, configure=own_zone) as db, db.executor() as ex:
        assert ex.conn.execute("SHOW TimeZone").fetchone() == ("Europe/Paris",)  # the caller's wins
    conn, _ = open_connection(pg_url)
    with conn:
        assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)


LISTS: list[tuple[str, list[Any]]] = [
    ("bigint", [1, -2, None, 2**62]),
    ("text", ["plain", 'a "quoted" back\\slash', "", "NULL", None, "{}", "é, x", '{"a": [1]}']),
    ("timestamptz", [datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC), None,
                     datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-3)))]),
    ("boolean", [True, False, None]),
    ("text", [None, None]),
    # One type throughout, without NULLs: the joined-in-C path.
    ("bigint", [1, -2, 2**62, 0]),
    ("text", ["plain", "", "NULL", "{}", "é, x", "a b", "completed"]),
    ("text", ['a "quoted"', "back\\slash", "plain"]),
    ("timestamptz", [datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
                     datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-3)))]),
    ("int", []),
]


def test_array_literals_cover_flat_plain_lists_only() -> None:
    assert _array_literal([1, None, "a\\b\"c", True]) == '{1,NULL,"a\\\\b\\"c",t}'
    assert _array_literal([[1], [2]]) is None  # nested: psycopg's own dumper
    assert _array_literal([datetime(2024, 1, 1)]) is None  # naive
    assert _array_literal([1.5]) is None


@pytest.mark.parametrize(("sql_type", "values"), LISTS)
def test_own_sessions_send_lists_the_server_reads_as_psycopg_would_send_them(
    pg_url: str, sql_type: str, values: list[Any]
) -> None:
    sql = f"SELECT %s::{sql_type}[], (%s::{sql_type}[])::text"
    with psycopg.connect(pg_url, autocommit=True) as plain:
        plain.execute("SET TimeZone TO 'UTC'")
        expected = plain.execute(sql, (values, values)).fetchone()
    with Database.from_url(pg_url, pool_size=1) as db, db.executor() as ex:
        assert ex.conn.execute(sql, (values, values)).fetchone() == expected


def test_from_url_postgres_with_schema_and_driver_suffix(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS other")
        conn.execute("CREATE TABLE IF NOT EXISTS other.marks (v text NOT NULL)")
    with Database.from_url(_sa_url(pg_url), schema="other", pool_size=1) as db:
        assert db.dialect.schema == "other"
        assert db.run(AddMark("s")) >= 1
    assert _pg_count(pg_url, "other.marks", "WHERE v = 's'") >= 1
    assert _pg_count(pg_url, "marks") == 0


def test_executor_error_rolls_back_left_open_transaction(pg_url: str) -> None:
    with Database.from_url(pg_url, pool_size=1) as db:
        with pytest.raises(KeyError), db.executor() as ex:
            ex.execute(Statement("BEGIN", fetch=False))
            ex.execute(Statement("INSERT INTO marks (v) VALUES ('lost')", fetch=False))
            raise KeyError("x")
        # The single pooled connection came back idle and without the row.
        with db.executor() as ex:
            assert ex.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert ex.run(CountMarks("lost")) == 0


def test_dead_idle_connections_are_replaced_and_an_outage_is_typed(pg_url: str) -> None:
    proxy, url = TcpProxy.in_front_of(pg_url)
    try:
        with Database.from_url(url, pool_size=2, timeout=10) as db:
            with db.executor() as a, db.executor() as b:
                old = {a.execute(Statement("SELECT pg_backend_pid()"))[0][0],
                       b.execute(Statement("SELECT pg_backend_pid()"))[0][0]}
                pooled = a.conn
                assert pg_idle_usable(pooled)
            proxy.cut()  # both pooled connections now idle and dead; new ones refused
            assert not pg_idle_usable(pooled)
            with pytest.raises(DatabaseUnavailableError, match="unavailable") as caught, db.executor():
                pass
            assert isinstance(caught.value.__cause__, psycopg.OperationalError)
            proxy.restore()
            with db.executor() as ex:  # not a dead one from before: the first use works
                assert ex.execute(Statement("SELECT pg_backend_pid()"))[0][0] not in old
    finally:
        proxy.close()


def test_broken_connection_is_discarded(pg_url: str) -> None:
    with Database.from_url(pg_url, pool_size=1, timeout=10) as db:
        with pytest.raises(DatabaseUnavailableError) as caught, db.executor() as ex:
            pid = ex.execute(Statement("SELECT pg_backend_pid()"))[0][0]
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            ex.execute(Statement("SELECT 1"))
        assert isinstance(caught.value.__cause__, psycopg.errors.AdminShutdown)
        with db.executor() as ex:
            assert ex.execute(Statement("SELECT pg_backend_pid()"))[0][0] != pid
            assert ex.run(CountMarks()) == 0


def test_from_pool_restores_caller_mode_and_leaves_pool_open(pg_url: str) -> None:
    with ConnectionPool(pg_url, min_size=1, max_size=1, open=True) as pool:
        with Database.from_pool(pool) as db:
            _exercise(db)
        assert not pool.closed
        with pool.connection() as conn:
            assert conn.autocommit is False
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        dedicated = Database.from_pool(pool).connect_dedicated()
        try:
            assert dedicated.autocommit is True
        finally:
            dedicated.close()


def test_from_sqlalchemy_engine_postgres(pg_url: str) -> None:
    engine = sa.create_engine(_sa_url(pg_url), pool_size=1, max_overflow=0)
    try:
        with Database.from_sqlalchemy_engine(engine) as db:
            assert isinstance(db.dialect, PostgresDialect)
            _exercise(db)
            assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
            conn = db.connect_dedicated()
            try:
                assert conn.autocommit is True
                assert conn.execute("SELECT 1").fetchone() == (1,)
            finally:
                conn.close()
        # The engine is still the caller's, and its connection is back in non-autocommit mode.
        with engine.connect() as c:
            assert c.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
            assert c.execute(sa.text("SELECT count(*) FROM marks")).scalar() == 14
    finally:
        engine.dispose()


def test_from_sqlalchemy_engine_timeout_bounds_the_wait_for_a_connection(pg_url: str) -> None:
    # Mirrors river_trio's AsyncDatabase.from_sqlalchemy_engine(timeout=): at most the pool's
    # size are lent at once, and a borrower past that waits `timeout` seconds, then fails.
    engine = sa.create_engine(_sa_url(pg_url), pool_size=1, max_overflow=0)
    try:
        db = Database.from_sqlalchemy_engine(engine, timeout=0.2)
        with db.executor(), pytest.raises(TimeoutError, match="a connection from the SQLAlchemy engine"), \
                db.executor():
            pass
        with db.executor() as ex:  # the slot came back with the connection
            assert ex.conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        engine.dispose()


def test_from_sqlalchemy_engine_rejects_other_drivers() -> None:
    # Stand-ins for engines of drivers not installed here; only name/driver are read.
    def engine(name: str, driver: str) -> Any:
        return SimpleNamespace(dialect=SimpleNamespace(name=name, driver=driver))

    with pytest.raises(ValidationError, match=r"postgresql\+psycopg://"):
        Database.from_sqlalchemy_engine(engine("postgresql", "psycopg2"))
    with pytest.raises(ValidationError, match="pysqlite"):
        Database.from_sqlalchemy_engine(engine("sqlite", "aiosqlite"))
    with pytest.raises(ValidationError, match="unsupported SQLAlchemy dialect 'mysql'"):
        Database.from_sqlalchemy_engine(engine("mysql", "mysqldb"))


def test_from_sqlalchemy_engine_sqlite_needs_new_sqlite(sqlite_db: str) -> None:
    if sqlite3.sqlite_version_info >= (3, 45):
        pytest.skip("the stdlib sqlite3 is new enough here")
    old = sa.create_engine(f"sqlite:///{sqlite_db}")
    with pytest.raises(ValidationError, match=r"module=sqlean"):
        Database.from_sqlalchemy_engine(old)
    engine = sa.create_engine(f"sqlite:///{sqlite_db}", module=sqlean)
    try:
        with Database.from_sqlalchemy_engine(engine) as db:
            assert isinstance(db.dialect, SQLiteDialect)
            _exercise(db)
        with engine.connect() as c:
            assert c.connection.driver_connection.isolation_level == ""  # type: ignore[union-attr]
    finally:
        engine.dispose()


def test_sqlite_from_path_and_url(sqlite_db: str) -> None:
    with Database.from_sqlite_path(sqlite_db) as db:
        assert isinstance(db.dialect, SQLiteDialect)
        _exercise(db)
    with Database.from_url("sqlite://" + sqlite_db) as db:
        assert db.run(CountMarks()) == 14
        with pytest.raises(ValidationError, match="SQLite has no LISTEN"):
            db.connect_dedicated()


def test_sqlite_memory_database() -> None:
    with Database.from_url("sqlite://") as db:
        with db.executor() as ex:
            ex.execute(Statement(MARKS_TABLE, fetch=False))
        assert db.run(AddMark("m")) == 1
        # No reader connections on a private in-memory database: readonly uses the writer.
        assert db.run(CountMarks(), readonly=True) == 1


def test_sqlite_readers_see_commits_and_cannot_write(sqlite_db: str) -> None:
    with Database.from_sqlite_path(sqlite_db, readers=2) as db:
        db.run(AddMark("r"))
        with db.executor(readonly=True) as reader:
            assert reader.run(CountMarks("r")) == 1
            # A reader works while this thread also holds the writer.
            with db.transaction() as writer:
                writer.run(AddMark("r"))
            assert reader.run(CountMarks("r")) == 2
            with pytest.raises(sqlean.OperationalError, match="readonly"):
                reader.run(AddMark("nope"))


def test_sqlite_nested_writer_in_one_thread_is_refused(sqlite_db: str) -> None:
    with Database.from_sqlite_path(sqlite_db) as db, db.executor(), pytest.raises(
        RiverError, match="single writer"
    ), db.executor():
        pass


def test_sqlite_writes_from_many_threads_are_serialized(sqlite_db: str) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                with db.transaction() as ex:
                    ex.run(AddMark(f"{n}-{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with Database.from_sqlite_path(sqlite_db, busy_timeout_ms=0) as db:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert db.run(CountMarks()) == 60


def test_sqlite_left_open_transaction_is_rolled_back(sqlite_db: str) -> None:
    with Database.from_sqlite_path(sqlite_db) as db:
        with db.executor() as ex:
            ex.execute(Statement("BEGIN IMMEDIATE", fetch=False))
            ex.execute(Statement("INSERT INTO marks (v) VALUES ('left')", fetch=False))
        with db.executor() as ex:
            assert not ex.conn.in_transaction
            assert ex.run(CountMarks("left")) == 0


def test_url_parsing() -> None:
    with pytest.raises(ValidationError, match="query parameters"):
        Database.from_url("sqlite://x.db?mode=ro")
    with pytest.raises(ValidationError, match="not a database URL"):
        Database.from_url("garbage")
    with pytest.raises(ValidationError, match="unsupported database URL"):
        Database.from_url("mysql://localhost/db")
    with pytest.raises(ValidationError, match="pool_size"):
        Database.from_url("postgresql://localhost/db", pool_size=0)
    with pytest.raises(ValidationError, match="invalid schema"):
        Database.from_sqlite_path(":memory:", schema="bad-schema")


# ---------------------------------------------------------------- caller transactions


def _pg_caller_counts(url: str, note: str) -> tuple[int, int]:
    return (
        _pg_count(url, "caller_rows", f"WHERE note = '{note}'"),
        _pg_count(url, "marks", f"WHERE v = '{note}'"),
    )


def test_caller_tx_psycopg_non_autocommit(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        for outcome in ("rollback", "commit"):
            note = f"pg-{outcome}"
            conn.execute("INSERT INTO caller_rows (note) VALUES (%s)", (note,))
            ex = executor_for_caller_tx(conn)
            assert isinstance(ex.dialect, PostgresDialect)
            ex.run(AddMark(note))
            getattr(conn, outcome)()
            expected = 0 if outcome == "rollback" else 1
            assert _pg_caller_counts(pg_url, note) == (expected, expected)
        # An idle non-autocommit connection is fine: our statement opens the caller's transaction.
        executor_for_caller_tx(conn).run(AddMark("pg-idle"))
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
    assert _pg_caller_counts(pg_url, "pg-idle") == (0, 0)


def test_caller_tx_psycopg_autocommit_transaction_block(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(ValidationError, match="autocommit"):
            executor_for_caller_tx(conn)
        with pytest.raises(RuntimeError), conn.transaction():
            conn.execute("INSERT INTO caller_rows (note) VALUES ('pga-rb')")
            executor_for_caller_tx(conn).run(AddMark("pga-rb"))
            raise RuntimeError
        with conn.transaction():
            conn.execute("INSERT INTO caller_rows (note) VALUES ('pga-ok')")
            executor_for_caller_tx(conn, schema="public").run(AddMark("pga-ok"))
    assert _pg_caller_counts(pg_url, "pga-rb") == (0, 0)
    assert _pg_caller_counts(pg_url, "pga-ok") == (1, 1)


def test_caller_tx_psycopg_aborted_transaction_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM no_such_table")
        with pytest.raises(ValidationError, match="aborted"):
            executor_for_caller_tx(conn)
        conn.rollback()


def test_caller_tx_sqlalchemy_connection_postgres(pg_url: str) -> None:
    engine = sa.create_engine(_sa_url(pg_url))
    try:
        with engine.connect() as c:
            for outcome in ("rollback", "commit"):
                note = f"sac-{outcome}"
                c.execute(sa.text("INSERT INTO caller_rows (note) VALUES (:n)"), {"n": note})
                executor_for_caller_tx(c).run(AddMark(note))
                getattr(c, outcome)()
                expected = 0 if outcome == "rollback" else 1
                assert _pg_caller_counts(pg_url, note) == (expected, expected)
    finally:
        engine.dispose()


class _Base(orm.DeclarativeBase):
    pass


class CallerRow(_Base):
    __tablename__ = "caller_rows"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    note: orm.Mapped[str]


def _orm_round(engine: sa.Engine, note: str, outcome: str, *, flush_first: bool) -> None:
    with orm.Session(engine) as session:
        session.add(CallerRow(note=note))
        if flush_first:
            session.flush()
        executor_for_caller_tx(session).run(AddMark(note))
        getattr(session, outcome)()


def test_caller_tx_sqlalchemy_session_postgres(pg_url: str) -> None:
    engine = sa.create_engine(_sa_url(pg_url))
    try:
        for flush_first in (True, False):
            for outcome in ("rollback", "commit"):
                note = f"orm-{outcome}-{flush_first}"
                _orm_round(engine, note, outcome, flush_first=flush_first)
                expected = 0 if outcome == "rollback" else 1
                assert _pg_caller_counts(pg_url, note) == (expected, expected)
    finally:
        engine.dispose()


def _sqlite_notes(path: str, note: str) -> tuple[int, int]:
    conn = connect_sqlite(path)
    try:
        a = conn.execute("SELECT count(*) FROM caller_rows WHERE note = ?", (note,)).fetchone()[0]
        b = conn.execute("SELECT count(*) FROM marks WHERE v = ?", (note,)).fetchone()[0]
        return int(a), int(b)
    finally:
        conn.close()


def test_caller_tx_sqlite_connection(sqlite_db: str) -> None:
    conn = connect_sqlite(sqlite_db)
    try:
        with pytest.raises(ValidationError, match="BEGIN first"):
            executor_for_caller_tx(conn)
        for outcome in ("rollback", "commit"):
            note = f"lite-{outcome}"
            conn.execute("BEGIN")
            conn.execute("INSERT INTO caller_rows (note) VALUES (?)", (note,))
            ex = executor_for_caller_tx(conn)
            assert isinstance(ex.dialect, SQLiteDialect)
            ex.run(AddMark(note))
            getattr(conn, outcome)()
            expected = 0 if outcome == "rollback" else 1
            assert _sqlite_notes(sqlite_db, note) == (expected, expected)
    finally:
        conn.close()
    # Legacy implicit-transaction mode: the adapter opens the transaction the caller then ends.
    legacy = sqlean.connect(sqlite_db)
    try:
        executor_for_caller_tx(legacy).run(AddMark("legacy"))
        assert legacy.in_transaction
        legacy.rollback()
    finally:
        legacy.close()
    assert _sqlite_notes(sqlite_db, "legacy") == (0, 0)


def test_caller_tx_old_stdlib_sqlite_is_refused(sqlite_db: str) -> None:
    if sqlite3.sqlite_version_info >= (3, 45):
        pytest.skip("the stdlib sqlite3 is new enough here")
    conn = sqlite3.connect(sqlite_db)
    try:
        with pytest.raises(ValidationError, match=r"too old.*sqlean"):
            executor_for_caller_tx(conn)
    finally:
        conn.close()


def test_caller_tx_sqlalchemy_sqlite_session_and_connection(sqlite_db: str) -> None:
    engine = sa.create_engine(f"sqlite:///{sqlite_db}", module=sqlean)
    try:
        for flush_first in (True, False):
            for outcome in ("rollback", "commit"):
                note = f"saorm-{outcome}-{flush_first}"
                _orm_round(engine, note, outcome, flush_first=flush_first)
                expected = 0 if outcome == "rollback" else 1
                assert _sqlite_notes(sqlite_db, note) == (expected, expected)
        with engine.connect() as c:
            c.execute(sa.text("INSERT INTO caller_rows (note) VALUES ('sa-lite')"))
            executor_for_caller_tx(c).run(AddMark("sa-lite"))
            c.rollback()
        assert _sqlite_notes(sqlite_db, "sa-lite") == (0, 0)
    finally:
        engine.dispose()


def test_caller_tx_rejects_unknown_objects() -> None:
    with pytest.raises(ValidationError, match="cannot run inside a transaction"):
        executor_for_caller_tx(object())


def test_connect_dedicated_defaults_yield_to_caller_settings(pg_url: str) -> None:
    conn = connect_dedicated(_sa_url(pg_url) + "?keepalives_idle=7", {"application_name": "river_x"})
    try:
        params = conn.info.get_parameters()
        assert conn.autocommit is True
        assert params["keepalives_idle"] == "7"  # from the URL, not our default of 30
        assert params["keepalives"] == "1" and params["keepalives_count"] == "3"
        assert params["application_name"] == "river_x"
    finally:
        conn.close()
    with Database.from_url(pg_url, pool_size=1) as db:
        dedicated = db.connect_dedicated()
        try:
            assert dedicated.autocommit is True
            assert dedicated.info.get_parameters()["keepalives"] == "1"
        finally:
            dedicated.close()


def test_from_url_reports_the_connection_error() -> None:
    with pytest.raises(DatabaseUnavailableError, match=r"unavailable.*127\.0\.0\.1") as caught:
        Database.from_url("postgresql://postgres@127.0.0.1:1/nope", connect_timeout=2)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


def test_postgres_handle_is_thread_safe(pg_url: str) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(5):
                with db.transaction() as ex:
                    ex.run(AddMark(f"t{n}-{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with Database.from_url(pg_url, pool_size=3) as db:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert db.run(CountMarks()) == 40
