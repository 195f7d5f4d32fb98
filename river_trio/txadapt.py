"""Async executors inside a caller's open transaction (insert-in-transaction and friends).

``await executor_for_caller_tx(tx)`` accepts what ``river_db.caller_tx`` does:
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

from river_db.caller_tx import checked_sqlite, resolve_caller_tx, unwrap_django
from river_protocol.errors import ValidationError
from river_trio.database import run_blocking
from river_trio.executor import AsyncExecutor

_THREAD_HINT = (
    "the trio driver runs statements in worker threads: open the SQLite connection with "
    "check_same_thread=False (river_db.sqlite.connect_sqlite does)"
)


async def executor_for_caller_tx(
    tx: Any, *, schema: str | None = None, expect: str | None = None
) -> AsyncExecutor:
    """An async executor whose statements run in ``tx``'s open transaction; ``expect`` is the
    client's dialect name, which ``tx`` must share."""
    _refuse_asyncio(tx)
    tx = unwrap_django(tx)  # Django's connection is per thread: this one's, not the worker thread's
    # SQLAlchemy may check a connection out of its pool and begin: a worker thread's job.
    conn, dialect = await run_blocking(
        lambda: resolve_caller_tx(tx, schema, check_sqlite=_sqlite, expect=expect)
    )
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


def _sqlite(conn: Any, *, sqlalchemy_owned: bool) -> Any:
    try:
        return checked_sqlite(conn, sqlalchemy_owned=sqlalchemy_owned)
    except Exception as exc:
        # sqlite3's own thread check, seen from our worker thread.
        if type(exc).__name__ == "ProgrammingError" and "thread" in str(exc):
            raise ValidationError(_THREAD_HINT) from exc
        raise
