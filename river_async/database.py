"""Pooled database handles for the async client: where async executors come from.

An ``AsyncDatabase`` lends out connections wrapped in an ``AsyncExecutor`` and
takes them back, like ``river_sync.database.Database``. Sources:

- Postgres URL: a small pool of autocommit psycopg connections of our own
  (waiting for a free connection is an ordinary cancellable wait).
- A caller's ``psycopg_pool.ConnectionPool`` (not closed by us).
- A SQLAlchemy ``Engine`` (psycopg 3 or a SQLite module providing >= 3.45).
- A SQLite path or ``sqlite://`` URL: one writer connection behind a lock
  (SQLite has a single writer) and lazily opened read-only connections.

Every blocking call (connect, statements, rollbacks, pool hand-offs) runs in a
worker thread. ``limiter`` is an ``anyio.CapacityLimiter`` sized to the pool: a
borrowed connection holds one token for as long as it is out, so the threads
working for this handle never outnumber its connections.

A connection goes back idle (a leftover transaction is rolled back) and one
that is broken, or that an interrupted cancel may still reach, is discarded. A
database that cannot be reached raises ``DatabaseUnavailableError``
(``river_db.unavailable``), as in river_sync.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import anyio.to_thread

from river_async.executor import AsyncExecutor, ThreadRunner
from river_db.connect import (
    DEFAULT_ACQUIRE_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_SQLITE_READERS,
    NO_LISTEN_ON_SQLITE,
    borrow_engine_connection,
    check_pool_size,
    connect_dedicated,
    dialect_for,
    engine_connect_args,
    engine_pool_size,
    open_pg,
    pg_idle_usable,
    pg_in_transaction,
    pg_is_broken,
    pg_restore,
    pg_to_autocommit,
    pool_connect_args,
    return_engine_connection,
    sqlalchemy_kind,
    wait_timed_out,
    with_utc_session,
)
from river_db.sqlite import open_sqlite, sqlite_reader_count, sqlite_reset
from river_db.unavailable import unavailable_as_typed
from river_db.urls import parse_database_url
from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import RiverError, ValidationError
from river_protocol.intents import Intent

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool
    import sqlalchemy

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = [
    "DEFAULT_ACQUIRE_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_SQLITE_READERS",
    "AsyncBackend",
    "AsyncDatabase",
    "Lease",
    "run_blocking",
]


async def run_blocking(fn: Callable[[], T]) -> T:
    """Run a short blocking call in a worker thread and wait for it even when cancelled
    (a connection half-opened or half-returned must not be abandoned)."""
    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=False)


class Lease:
    """A borrowed connection; ``discard`` tells the backend not to reuse it."""

    __slots__ = ("conn", "discard")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.discard = False


class AsyncBackend(Protocol):
    """Where connections come from; one per kind of source."""

    limiter: anyio.CapacityLimiter
    kind: str  # 'postgres' | 'sqlite'

    def acquire(self, readonly: bool) -> AbstractAsyncContextManager[Lease]: ...

    async def connect_dedicated(self) -> Any: ...

    async def aclose(self) -> None: ...


@asynccontextmanager
async def _slot(limiter: anyio.CapacityLimiter, timeout: float | None, what: str) -> AsyncIterator[None]:
    # A token per lease, not per task: one task may hold several connections.
    borrower = object()
    with anyio.move_on_after(timeout) as scope:
        await limiter.acquire_on_behalf_of(borrower)
    if scope.cancelled_caught:
        raise wait_timed_out(timeout, what)
    try:
        yield
    finally:
        limiter.release_on_behalf_of(borrower)


def _close_quietly(conn: Any) -> None:
    with suppress(Exception):
        conn.close()


def _close_all(conns: list[Any]) -> None:
    for conn in conns:
        _close_quietly(conn)


# ---------------------------------------------------------------- postgres


class _PgOwnPool:
    """Autocommit connections opened on demand up to ``size``; idle ones reused LIFO."""

    kind = "postgres"

    def __init__(self, conninfo: str, *, size: int, timeout: float | None, connect_timeout: float,
                 configure: Callable[[psycopg.Connection[Any]], None] | None) -> None:
        self.conninfo = conninfo
        self.kwargs: dict[str, Any] = {"connect_timeout": max(1, int(connect_timeout))}
        self.configure = configure
        self.timeout = timeout
        self.limiter = anyio.CapacityLimiter(size)
        self._idle: list[Any] = []
        self._closed = False

    def _open(self) -> Any:
        return open_pg(self.conninfo, self.kwargs, self.configure)

    async def prime(self) -> None:
        """Open one connection now, surfacing bad URLs and credentials at construction."""
        conn = await run_blocking(self._open)
        self._idle.append(conn)

    def _take_idle(self) -> Any | None:
        while self._idle:
            conn = self._idle.pop()
            if pg_idle_usable(conn):
                return conn
            _close_quietly(conn)
        return None

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        async with _slot(self.limiter, self.timeout, "a Postgres connection"):
            if self._closed:
                raise RiverError("the database handle is closed")
            conn = self._take_idle()
            if conn is None:
                conn = await run_blocking(self._open)
            lease = Lease(conn)
            try:
                yield lease
            finally:
                with anyio.CancelScope(shield=True):
                    await self._release(lease)

    async def _release(self, lease: Lease) -> None:
        conn = lease.conn
        if not lease.discard and not pg_is_broken(conn) and pg_in_transaction(conn):
            log.warning("rolling back a transaction left open on a returned connection")
            runner = ThreadRunner(conn)
            await runner.rollback()
            lease.discard = runner.broken
        if lease.discard or self._closed or pg_is_broken(conn):
            await run_blocking(lambda: _close_quietly(conn))
        else:
            self._idle.append(conn)

    async def connect_dedicated(self) -> Any:
        return await run_blocking(lambda: connect_dedicated(self.conninfo, dict(self.kwargs)))

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        if idle:
            await run_blocking(lambda: _close_all(idle))


class _PsycopgPoolBackend:
    """A caller's ``psycopg_pool.ConnectionPool``; getconn/putconn run in threads."""

    kind = "postgres"

    def __init__(self, pool: psycopg_pool.ConnectionPool[Any], *, timeout: float | None) -> None:
        self.pool = pool
        self.timeout = timeout
        self.limiter = anyio.CapacityLimiter(max(1, int(pool.max_size)))

    def _get(self) -> tuple[Any, bool]:
        conn = self.pool.getconn(timeout=self.timeout)
        try:
            return conn, pg_to_autocommit(conn)
        except BaseException:
            self.pool.putconn(conn)
            raise

    def _put(self, lease: Lease, previous: bool) -> None:
        conn = lease.conn
        try:
            if lease.discard:
                conn.close()
            else:
                pg_restore(conn, previous)
        except Exception:
            log.warning("discarding a connection that could not be reset", exc_info=True)
            _close_quietly(conn)
        # The pool replaces closed connections and rolls back anything left open.
        self.pool.putconn(conn)

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        async with _slot(self.limiter, self.timeout, "a connection from the psycopg pool"):
            conn, previous = await run_blocking(self._get)
            lease = Lease(conn)
            try:
                yield lease
            finally:
                with anyio.CancelScope(shield=True):
                    await run_blocking(lambda: self._put(lease, previous))

    async def connect_dedicated(self) -> Any:
        conninfo, kwargs = pool_connect_args(self.pool)
        return await run_blocking(lambda: connect_dedicated(conninfo, kwargs))

    async def aclose(self) -> None:
        pass


# ---------------------------------------------------------------- sqlite


class _SQLiteBackend:
    """One writer connection behind a lock, plus lazily opened read-only connections."""

    kind = "sqlite"

    def __init__(self, path: str, *, readers: int, busy_timeout_ms: int, timeout: float | None) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.timeout = timeout
        self.max_readers = sqlite_reader_count(path, readers)
        self.limiter = anyio.CapacityLimiter(self.max_readers + 1)
        self._writer: Any | None = None
        self._writer_lock = anyio.Lock()
        self._idle_readers: list[Any] = []
        self._all_readers: set[Any] = set()
        self._closed = False

    def _open(self, *, readonly: bool) -> Any:
        return open_sqlite(self.path, busy_timeout_ms=self.busy_timeout_ms, readonly=readonly)

    async def open(self) -> None:
        self._writer = await run_blocking(lambda: self._open(readonly=False))

    async def _give_back(self, conn: Any, lease: Lease) -> bool:
        """Reset ``conn`` for reuse; False when it was closed instead."""
        if lease.discard:
            await run_blocking(lambda: _close_quietly(conn))
            return False
        if conn.in_transaction:
            return await run_blocking(lambda: sqlite_reset(conn))
        return True

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        if readonly and self.max_readers > 0:
            async with _slot(self.limiter, self.timeout, "a SQLite reader connection"), \
                    self._reader() as lease:
                yield lease
        else:
            async with self._writer_conn() as lease:
                yield lease

    @asynccontextmanager
    async def _writer_conn(self) -> AsyncIterator[Lease]:
        owner = self._writer_lock.statistics().owner
        if owner is not None and owner == anyio.get_current_task():
            # Waiting for ourselves would deadlock; a second connection would hit SQLITE_BUSY.
            raise RiverError(
                "this task already holds the SQLite writer connection; nested writer executors "
                "would deadlock (SQLite has a single writer): reuse the outer executor"
            )
        with anyio.move_on_after(self.timeout) as scope:
            await self._writer_lock.acquire()
        if scope.cancelled_caught:
            raise TimeoutError(f"timed out after {self.timeout}s waiting for the SQLite writer connection")
        try:
            async with _slot(self.limiter, None, "a thread for the SQLite writer"):
                if self._closed:
                    raise RiverError("the database handle is closed")
                if self._writer is None:
                    await self.open()
                conn = self._writer
                lease = Lease(conn)
                try:
                    yield lease
                finally:
                    with anyio.CancelScope(shield=True):
                        if not await self._give_back(conn, lease):
                            self._writer = None
        finally:
            self._writer_lock.release()

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[Lease]:
        if self._closed:
            raise RiverError("the database handle is closed")
        # The limiter slot bounds readers: one is idle or may be opened.
        conn = self._idle_readers.pop() if self._idle_readers else None
        if conn is None:
            conn = await run_blocking(lambda: self._open(readonly=True))
            self._all_readers.add(conn)
        lease = Lease(conn)
        try:
            yield lease
        finally:
            with anyio.CancelScope(shield=True):
                healthy = await self._give_back(conn, lease)
                if healthy and not self._closed:
                    self._idle_readers.append(conn)
                else:
                    self._all_readers.discard(conn)
                    if healthy:
                        await run_blocking(lambda: _close_quietly(conn))

    async def connect_dedicated(self) -> Any:
        raise ValidationError(NO_LISTEN_ON_SQLITE)

    async def aclose(self) -> None:
        self._closed = True
        readers = list(self._all_readers)
        self._all_readers.clear()
        self._idle_readers.clear()
        async with self._writer_lock:
            writer, self._writer = self._writer, None
        await run_blocking(lambda: _close_all([c for c in [*readers, writer] if c is not None]))


# ---------------------------------------------------------------- sqlalchemy


class _SQLAlchemyBackend:
    """Borrows DB-API connections from an Engine's pool (the engine stays the caller's)."""

    def __init__(self, engine: sqlalchemy.Engine, kind: str, *, timeout: float | None) -> None:
        self.engine = engine
        self.kind = kind
        self.timeout = timeout
        self.limiter = anyio.CapacityLimiter(engine_pool_size(engine))
        # Same single-writer reasoning as for SQLite paths, across the engine's connections.
        self._sqlite_writer = anyio.Lock() if kind == "sqlite" else None

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        if self._sqlite_writer is not None and not readonly:
            async with self._sqlite_writer, self._borrow_async() as lease:
                yield lease
        else:
            async with self._borrow_async() as lease:
                yield lease

    @asynccontextmanager
    async def _borrow_async(self) -> AsyncIterator[Lease]:
        async with _slot(self.limiter, self.timeout, "a connection from the SQLAlchemy engine"):
            engine, kind = self.engine, self.kind
            proxy, conn, previous = await run_blocking(lambda: borrow_engine_connection(engine, kind))
            lease = Lease(conn)
            try:
                yield lease
            finally:
                with anyio.CancelScope(shield=True):
                    await run_blocking(lambda: return_engine_connection(
                        proxy, conn, self.kind, previous, discard=lease.discard))

    async def connect_dedicated(self) -> Any:
        conninfo, params = engine_connect_args(self.engine, self.kind)
        return await run_blocking(lambda: connect_dedicated(conninfo, params))

    async def aclose(self) -> None:
        pass


# ---------------------------------------------------------------- public handle


class AsyncDatabase:
    """Source of async executors for one event loop run. Build with a ``from_*`` constructor;
    close with ``aclose()`` or ``async with``."""

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
        """Open a pool for a ``postgres(ql)[+psycopg]://`` or ``sqlite://`` URL.

        ``pool_size`` is the maximum number of Postgres connections, or of SQLite
        reader connections (SQLite always has exactly one writer). ``configure`` runs
        in a worker thread on each new Postgres connection.
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
        """Use a caller's (sync) psycopg pool, left open by ``aclose()``. Its connections
        may be in either autocommit mode; each is switched to autocommit while borrowed."""
        return cls(_PsycopgPoolBackend(pool, timeout=timeout), PostgresDialect(schema))

    @classmethod
    def from_sqlalchemy_engine(
        cls, engine: sqlalchemy.Engine, *, schema: str | None = None, timeout: float | None = None
    ) -> AsyncDatabase:
        """Borrow raw DB-API connections from a (sync) ``engine``, left undisposed by ``aclose()``."""
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
        """Open a SQLite file (created if missing) in WAL mode."""
        backend = _SQLiteBackend(path, readers=readers, busy_timeout_ms=busy_timeout_ms, timeout=timeout)
        await backend.open()
        return cls(backend, SQLiteDialect(schema))

    # --- use

    @property
    def dialect(self) -> Dialect:
        return self._dialect

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

        ``readonly=True`` promises only reads, which lets SQLite use a reader
        connection instead of waiting for the single writer.
        """
        if self._closed:
            raise RiverError("the database handle is closed")
        with unavailable_as_typed():
            async with self._backend.acquire(readonly) as lease:
                ex = AsyncExecutor(lease.conn, self._dialect)
                try:
                    yield ex
                finally:
                    lease.discard = lease.discard or ex.broken

    async def run(self, intent: Intent, *, readonly: bool = False) -> Any:
        """Run one intent on a borrowed connection (in a transaction when it needs one)."""
        async with self.executor(readonly=readonly) as ex:
            return await ex.run(intent)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncExecutor]:
        """An executor inside BEGIN..COMMIT (BEGIN IMMEDIATE on SQLite); an exception,
        cancellation included, rolls back."""
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
