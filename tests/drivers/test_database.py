"""Database handles (river_sync.database, the blocking layer's sources) against real Postgres and
SQLite. The intents are test-local ones on a marks table (tests/drivers/marks_support.py); the
caller-transaction adapters are tested in tests/drivers/test_caller_tx_sync.py.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
import sqlean  # type: ignore[import-untyped]
from psycopg_pool import ConnectionPool

from river_db.connect import _array_literal, connect_dedicated, open_connection, pg_idle_usable
from river_db.executor import Executor
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import DatabaseUnavailableError, RiverError, ValidationError
from river_protocol.intents import Statement
from river_sync.database import Database
from tests.drivers.marks_support import (
    MARKS_TABLE,
    AddMark,
    CountMarks,
    pg_count,
    pg_setup,
    sa_url,
    sqlite_setup,
)
from tests.drivers.tcp_proxy import TcpProxy


@pytest.fixture
def pg_url(module_pg_url: str) -> str:
    pg_setup(module_pg_url)
    return module_pg_url


@pytest.fixture
def sqlite_db(sqlite_path: str) -> str:
    sqlite_setup(sqlite_path)
    return sqlite_path


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
    with Database.from_url(sa_url(pg_url), schema="other", pool_size=1) as db:
        assert db.dialect.schema == "other"
        assert db.run(AddMark("s")) >= 1
    assert pg_count(pg_url, "other.marks", "WHERE v = 's'") >= 1
    assert pg_count(pg_url, "marks") == 0


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
    engine = sa.create_engine(sa_url(pg_url), pool_size=1, max_overflow=0)
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
    engine = sa.create_engine(sa_url(pg_url), pool_size=1, max_overflow=0)
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


def test_sqlite_readers_never_outnumber_the_readers_setting(sqlite_db: str) -> None:
    # readers=1: one reader connection at most; a second reader waits for it (here until the
    # handle's timeout), and the writer is never kept waiting by readers.
    with Database.from_sqlite_path(sqlite_db, readers=1, timeout=0.2) as db, \
            db.executor(readonly=True) as reader:
        with pytest.raises(TimeoutError, match="reader"), db.executor(readonly=True):
            pass
        assert db.run(AddMark("w")) == 1
        assert reader.run(CountMarks("w")) == 1


def test_sqlite_nested_writer_in_one_thread_is_refused(sqlite_db: str) -> None:
    with Database.from_sqlite_path(sqlite_db) as db, db.executor(), pytest.raises(
        RiverError, match="single writer"
    ), db.executor():
        pass


def test_sqlalchemy_sqlite_nested_writer_in_one_thread_is_refused(sqlite_db: str) -> None:
    # As from a path: refused at once, not waited for until the timeout (this thread would wait
    # for itself); the outer writer goes on, and writers work again once it is given back.
    engine = sa.create_engine(f"sqlite:///{sqlite_db}", module=sqlean,
                              connect_args={"check_same_thread": False})
    try:
        with Database.from_sqlalchemy_engine(engine, timeout=30) as db:
            with db.executor() as outer:
                with pytest.raises(RiverError, match="single writer"), db.executor():
                    pass
                assert outer.run(AddMark("n")) == 1
            assert db.run(AddMark("n")) == 2
    finally:
        engine.dispose()


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


def test_connect_dedicated_defaults_yield_to_caller_settings(pg_url: str) -> None:
    conn = connect_dedicated(sa_url(pg_url) + "?keepalives_idle=7", {"application_name": "river_x"})
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
