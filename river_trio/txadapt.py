"""Async executors inside a caller's open transaction (insert-in-transaction and friends).

``await executor_for_caller_tx(tx)`` accepts what ``river_sync.txadapt`` does:
a psycopg 3 ``Connection`` (non-autocommit, or autocommit inside
``with conn.transaction():``), a SQLAlchemy ``Connection`` or ORM ``Session``
(statements go to the DB-API connection of that transaction), or a
sqlite3-style connection (opened with ``check_same_thread=False``: statements
run in worker threads). psycopg's ``AsyncConnection`` is asyncio-only and is
refused.

Statements run in worker threads directly in the caller's transaction, without
savepoints: when one fails, or is cancelled (which on Postgres aborts the
transaction), the caller must roll back. Nothing here commits or rolls back.
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError
from river_sync.database import sqlalchemy_kind
from river_sync.txadapt import _checked_psycopg, _checked_sqlite, _is_sqlite, _sqlalchemy_connection
from river_trio.database import run_blocking
from river_trio.executor import AsyncExecutor

_THREAD_HINT = (
    "the trio driver runs statements in worker threads: open the SQLite connection with "
    "check_same_thread=False (river_sync.sqlite_compat.connect_sqlite does)"
)


async def executor_for_caller_tx(tx: Any, *, schema: str | None = None) -> AsyncExecutor:
    """An async executor whose statements run in ``tx``'s open transaction."""
    _refuse_asyncio(tx)
    conn, dialect = await run_blocking(lambda: _resolve(tx, schema))
    return AsyncExecutor(conn, dialect, in_caller_tx=True)


def _refuse_asyncio(tx: Any) -> None:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return
    if isinstance(tx, psycopg.AsyncConnection):
        raise ValidationError(
            "psycopg's AsyncConnection runs on asyncio only: under trio pass a (sync) psycopg Connection"
        )
    module = type(tx).__module__
    if module.startswith("sqlalchemy.ext.asyncio"):
        raise ValidationError(
            "SQLAlchemy's asyncio objects run on asyncio only: under trio pass a sync Connection or Session"
        )


def _resolve(tx: Any, schema: str | None) -> tuple[Any, Dialect]:
    """The DB-API connection and dialect for ``tx``, validated (runs in a worker thread:
    SQLAlchemy may check a connection out of its pool and begin)."""
    sa_conn = _sqlalchemy_connection(tx)
    if sa_conn is not None:
        kind = sqlalchemy_kind(sa_conn.engine)
        if not sa_conn.in_transaction():
            # Same as SQLAlchemy 2.0's autobegin on first execute: the caller commits it.
            sa_conn.begin()
        driver_conn = sa_conn.connection.driver_connection
        if kind == "postgres":
            return _checked_psycopg(driver_conn), PostgresDialect(schema)
        return _sqlite(driver_conn, sqlalchemy_owned=True), SQLiteDialect(schema)
    if _is_psycopg(tx):
        return _checked_psycopg(tx), PostgresDialect(schema)
    if _is_sqlite(tx):
        return _sqlite(tx, sqlalchemy_owned=False), SQLiteDialect(schema)
    raise ValidationError(
        f"cannot run inside a transaction of type {type(tx).__module__}.{type(tx).__qualname__}: pass a "
        "psycopg Connection, a SQLAlchemy Connection or Session, or a sqlite3/sqlean connection"
    )


def _is_psycopg(obj: Any) -> bool:
    import psycopg

    return isinstance(obj, psycopg.Connection)


def _sqlite(conn: Any, *, sqlalchemy_owned: bool) -> Any:
    try:
        return _checked_sqlite(conn, sqlalchemy_owned=sqlalchemy_owned)
    except Exception as exc:
        # sqlite3's own thread check, seen from our worker thread.
        if type(exc).__name__ == "ProgrammingError" and "thread" in str(exc):
            raise ValidationError(_THREAD_HINT) from exc
        raise
