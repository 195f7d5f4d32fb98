"""Async executors inside a caller's open transaction (insert-in-transaction and friends).

``await executor_for_caller_tx(tx)`` accepts what ``river_db.caller_tx`` does:
a psycopg 3 ``Connection`` (non-autocommit, or autocommit inside
``with conn.transaction():``), a SQLAlchemy ``Connection`` or ORM ``Session``
(statements go to the DB-API connection of that transaction), or a
sqlite3-style connection (opened with ``check_same_thread=False``: statements
run in worker threads).

Asyncio-native transactions (psycopg's ``AsyncConnection``, SQLAlchemy's
asyncio ``AsyncConnection``/``AsyncSession``, asyncpg) are for the asyncio
client only: there ``river_anyio.caller_tx_async.native_runner_for`` (when that
module is installed) gives the runner that drives them; under trio they are
refused with a clear error. ``_native_executor`` is the one place deciding this.

Statements run in the caller's transaction, without savepoints: when one
fails, or is cancelled (which on Postgres aborts the transaction), the caller
must roll back. Nothing here commits or rolls back.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import sniffio

from river_anyio.database import run_blocking
from river_anyio.executor import AsyncExecutor
from river_db.caller_tx import checked_sqlite, resolve_caller_tx, unwrap_django
from river_protocol.errors import ValidationError

_THREAD_HINT = (
    "the async driver runs statements in worker threads: open the SQLite connection with "
    "check_same_thread=False (river_db.sqlite.connect_sqlite does)"
)

# Where the asyncio-native adapters live (imported when first needed, if installed).
NATIVE_MODULE = "river_anyio.caller_tx_async"


async def executor_for_caller_tx(
    tx: Any, *, schema: str | None = None, expect: str | None = None
) -> AsyncExecutor:
    """An async executor whose statements run in ``tx``'s open transaction; ``expect`` is the
    client's dialect name, which ``tx`` must share."""
    native = await _native_executor(tx, schema=schema, expect=expect)
    if native is not None:
        return native
    tx = unwrap_django(tx)  # Django's connection is per thread: this one's, not the worker thread's
    # SQLAlchemy may check a connection out of its pool and begin: a worker thread's job.
    conn, dialect = await run_blocking(
        lambda: resolve_caller_tx(tx, schema, check_sqlite=_sqlite, expect=expect)
    )
    return AsyncExecutor(conn, dialect, in_caller_tx=True)


def asyncio_only_kind(tx: Any) -> str | None:
    """What ``tx`` is when it is an asyncio-only transaction (for the refusal's text), else None."""
    module = type(tx).__module__
    if module.startswith("psycopg"):
        try:
            import psycopg
        except ImportError:  # pragma: no cover - psycopg is a dependency
            return None
        return "psycopg's AsyncConnection" if isinstance(tx, psycopg.AsyncConnection) else None
    if module.startswith("sqlalchemy.ext.asyncio"):
        return f"SQLAlchemy's asyncio {type(tx).__name__}"
    if module.startswith("asyncpg"):
        return f"asyncpg's {type(tx).__name__}"
    return None


async def _native_executor(tx: Any, *, schema: str | None, expect: str | None) -> AsyncExecutor | None:
    """An executor driving an asyncio-native ``tx``; None for the blocking kinds (threads)."""
    running = sniffio.current_async_library()
    if running == "asyncio":
        module = _native_module()
        if module is not None:
            found = module.native_runner_for(tx, schema=schema, expect=expect)
            if inspect.isawaitable(found):
                found = await found
            if found is not None:
                runner, dialect = found
                return AsyncExecutor(tx, dialect, in_caller_tx=True, runner=runner)
    kind = asyncio_only_kind(tx)
    if kind is None:
        return None
    if running == "asyncio":
        raise ValidationError(
            f"{kind} is not supported as tx= here ({NATIVE_MODULE} is not installed): pass a sync "
            "psycopg Connection, SQLAlchemy Connection or Session"
        )
    raise ValidationError(
        f"{kind} runs on asyncio only: under {running} pass a sync psycopg Connection, "
        "SQLAlchemy Connection or Session (or use river_asyncio on asyncio)"
    )


def _native_module() -> Any:
    try:
        return importlib.import_module(NATIVE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != NATIVE_MODULE:
            raise  # the module is there but something it imports is not: say so
        return None


def _sqlite(conn: Any, *, sqlalchemy_owned: bool) -> Any:
    try:
        return checked_sqlite(conn, sqlalchemy_owned=sqlalchemy_owned)
    except Exception as exc:
        # sqlite3's own thread check, seen from our worker thread.
        if type(exc).__name__ == "ProgrammingError" and "thread" in str(exc):
            raise ValidationError(_THREAD_HINT) from exc
        raise
