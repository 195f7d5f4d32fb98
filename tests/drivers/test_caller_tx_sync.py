"""The threaded client's caller transactions (``river_db.caller_tx.executor_for_caller_tx``, what
``tx=`` runs on in river_sync) on real Postgres and SQLite: a psycopg connection in or out of
autocommit, SQLAlchemy connections and ORM sessions, stdlib and sqlean SQLite connections. Our
statements land in the caller's transaction and commit or roll back with the caller's own row.

The async client's counterparts: test_caller_tx_async_threaded.py (the same blocking kinds, run
in worker threads), test_caller_tx_async_routing.py, test_caller_tx_asyncio_runners.py and
test_caller_tx_asyncio_client.py.
"""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
import sqlalchemy as sa
import sqlean  # type: ignore[import-untyped]
from sqlalchemy import orm

from river_db.caller_tx import executor_for_caller_tx
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError
from tests.drivers.marks_support import AddMark, pg_count, pg_setup, sa_url, sqlite_setup


@pytest.fixture
def pg_url(module_pg_url: str) -> str:
    pg_setup(module_pg_url)
    return module_pg_url


@pytest.fixture
def sqlite_db(sqlite_path: str) -> str:
    sqlite_setup(sqlite_path)
    return sqlite_path


def _pg_caller_counts(url: str, note: str) -> tuple[int, int]:
    return (
        pg_count(url, "caller_rows", f"WHERE note = '{note}'"),
        pg_count(url, "marks", f"WHERE v = '{note}'"),
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
    engine = sa.create_engine(sa_url(pg_url))
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
    engine = sa.create_engine(sa_url(pg_url))
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
