"""Pooled database handles: where executors come from.

A database handle (``Database`` on the threaded client, ``AsyncDatabase`` on the
async ones) lends out connections wrapped in an executor and takes them back.
Sources:

- Postgres URL (``postgres://`` / ``postgresql://``): a small pool of
  autocommit psycopg connections owned by the handle;
- a caller's ``psycopg_pool.ConnectionPool`` (not closed by us);
- a SQLAlchemy ``Engine`` (psycopg 3 or a SQLite module providing >= 3.45);
  connections come from ``engine.raw_connection()`` and go back to its pool;
- a SQLite path or ``sqlite://`` URL.

SQLite allows a single writer per database file. Several writer connections in
one process would just take turns through SQLITE_BUSY retries (or fail once
``busy_timeout`` runs out), so writes are serialized in-process instead: one
shared writer connection behind a lock. Read-only work may use separate reader
connections, which WAL lets run alongside the writer.

Executors run in autocommit mode with explicit transactions; a connection is
always handed back outside any transaction (a leftover one is rolled back) and
a broken connection is discarded rather than reused. A database that cannot be
reached raises ``DatabaseUnavailableError`` (``river_db.unavailable``). How a
borrower waits is the pools' (``river_anyio.pools``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from river_anyio.executor import AsyncExecutor
from river_anyio.pools import (
    AsyncBackend,
    _PgOwnPool,
    _PsycopgPoolBackend,
    _SQLAlchemyBackend,
    _SQLiteBackend,
)
from river_db.connect import (
    DEFAULT_ACQUIRE_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_SQLITE_READERS,
    check_pool_size,
    dialect_for,
    sqlalchemy_kind,
    with_utc_session,
)
from river_db.unavailable import unavailable_as_typed
from river_db.urls import parse_database_url
from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import RiverError
from river_protocol.intents import Intent

if True:  # ASYNC
    import anyio

    from river_anyio.pools import Lease, run_blocking

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool
    import sqlalchemy

# ---------------------------------------------------------------- public handle


class AsyncDatabase:
    """Source of executors. Build with one of the ``from_*`` constructors; close with ``aclose()``
    or use it as a context manager. The threaded client's is thread-safe; an async client's
    serves one event loop run."""

    def __init__(self, backend: AsyncBackend, dialect: Dialect) -> None:
        self._backend = backend
        self._dialect = dialect
        self._closed = False

    # --- constructors

    @classmethod
    async def from_url(
        cls,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        timeout: float = DEFAULT_ACQUIRE_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        configure: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> AsyncDatabase:
        """Open a pool for a ``postgres(ql)[+psycopg]://`` URL or a ``sqlite://`` URL.

        ``pool_size`` is the maximum number of Postgres connections, or of SQLite
        reader connections (SQLite always has exactly one writer). ``configure`` runs
        on each new Postgres connection (e.g. to set session parameters; in a worker
        thread on the async clients).
        """
        parsed = parse_database_url(url)
        if parsed.dialect == "postgres":
            check_pool_size(pool_size)
            backend = _PgOwnPool(parsed.conninfo, size=pool_size, timeout=timeout,
                                 connect_timeout=connect_timeout, configure=with_utc_session(configure))
            with unavailable_as_typed():
                await backend.prime()
            return cls(backend, PostgresDialect(schema))
        return await cls.from_sqlite_path(parsed.path, schema=schema, readers=pool_size,
                                          timeout=timeout)

    @classmethod
    def from_pool(
        cls,
        pool: psycopg_pool.ConnectionPool[Any],
        *,
        schema: str | None = None,
        timeout: float | None = None,
    ) -> AsyncDatabase:
        """Use a caller's (blocking) psycopg pool, left open by ``aclose()``. Its connections
        may be in either autocommit mode; each is switched to autocommit while borrowed."""
        return cls(_PsycopgPoolBackend(pool, timeout=timeout), PostgresDialect(schema))

    @classmethod
    def from_sqlalchemy_engine(
        cls, engine: sqlalchemy.Engine, *, schema: str | None = None, timeout: float | None = None
    ) -> AsyncDatabase:
        """Borrow raw DB-API connections from a (blocking) ``engine``, left undisposed by ``aclose()``;
        ``timeout`` bounds the wait for one when the engine's pool has none free (None: no bound)."""
        kind = sqlalchemy_kind(engine)
        return cls(_SQLAlchemyBackend(engine, kind, timeout=timeout), dialect_for(kind, schema))

    @classmethod
    async def from_sqlite_path(
        cls,
        path: str,
        *,
        schema: str | None = None,
        readers: int = DEFAULT_SQLITE_READERS,
        busy_timeout_ms: int = 5000,
        timeout: float | None = DEFAULT_ACQUIRE_TIMEOUT,
    ) -> AsyncDatabase:
        """Open a SQLite file (created if missing) in WAL mode. ``schema`` names an
        attached database that the caller attaches; usually leave it ``None``."""
        backend = _SQLiteBackend(path, readers=readers, busy_timeout_ms=busy_timeout_ms, timeout=timeout)
        await backend.open()
        return cls(backend, SQLiteDialect(schema))

    # --- use

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    if True:  # ASYNC
        @property
        def limiter(self) -> anyio.CapacityLimiter:
            """Tokens for connections out on loan (one per lease); sized to the pool."""
            return self._backend.limiter

    @property
    def closed(self) -> bool:
        return self._closed

    @asynccontextmanager
    async def executor(self, *, readonly: bool = False) -> AsyncIterator[AsyncExecutor]:
        """An executor on a borrowed connection, returned when the block ends.

        ``readonly=True`` promises that only reads happen, which lets SQLite use a
        reader connection instead of waiting for the single writer.
        """
        if self._closed:
            raise RiverError("the database handle is closed")
        if True:  # ASYNC
            with unavailable_as_typed():
                async with self._backend.acquire(readonly) as lease:
                    ex = AsyncExecutor(lease.conn, self._dialect)
                    try:
                        yield ex
                    finally:
                        lease.discard = lease.discard or ex.broken
        else:
            with unavailable_as_typed(), self._backend.acquire(readonly) as lease:
                yield AsyncExecutor(lease.conn, self._dialect)

    async def run(self, intent: Intent, *, readonly: bool = False) -> Any:
        """Run one intent on a borrowed connection (in a transaction when it needs one)."""
        async with self.executor(readonly=readonly) as ex:
            return await ex.run(intent)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncExecutor]:
        """An executor inside BEGIN..COMMIT (BEGIN IMMEDIATE on SQLite); an exception
        (cancellation included, on the async clients) rolls back."""
        async with self.executor() as ex, ex.transaction():
            yield ex

    async def connect_dedicated(self) -> Any:
        """A new autocommit psycopg connection outside the pool, owned by the caller
        (the notifier's LISTEN connection). Postgres only."""
        return await self._backend.connect_dedicated()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._backend.aclose()

    async def __aenter__(self) -> AsyncDatabase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = [
    "DEFAULT_ACQUIRE_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_SQLITE_READERS",
    "AsyncBackend",
    "AsyncDatabase",
]
if True:  # ASYNC
    __all__ += ["Lease", "run_blocking"]
