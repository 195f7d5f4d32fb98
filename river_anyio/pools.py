"""Where a client's connections come from: one backend per kind of source.

One source for both clients: tools/async_to_sync.py generates the threaded client's pools from
the async client's; what differs is ``_backend``'s pools section. ``AsyncDatabase``
(``river_anyio.database``) lends these out. A backend's ``limiter`` is sized to the pool and
a borrowed connection holds one of its slots for as long as it is out (an
``anyio.CapacityLimiter`` on a loop, so the worker threads working for the handle never
outnumber its connections; a semaphore in river_sync, whose database is used from any thread).
On a loop every blocking call (connect, rollbacks, pool hand-offs) runs in a worker thread and a
connection is returned under a shielded scope; in river_sync they run in the calling thread.
A connection goes back idle (a leftover transaction is rolled back) and one that is broken, or
that the borrower marked ``discard`` (an interrupted cancel may still reach it), is closed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from river_anyio import _backend
from river_db.connect import (
    NO_LISTEN_ON_SQLITE,
    borrow_engine_connection,
    close_quietly,
    connect_dedicated,
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
    wait_timed_out,
)
from river_db.sqlite import open_sqlite, sqlite_reader_count, sqlite_reset
from river_protocol.errors import RiverError, ValidationError

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool
    import sqlalchemy

log = logging.getLogger(__name__)

run_blocking = _backend.run_blocking  # exported from here (the database module, river_trio)


class Lease:
    """A borrowed connection; ``discard`` tells the backend not to reuse it."""

    __slots__ = ("conn", "discard")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.discard = False


class AsyncBackend(Protocol):
    """Where connections come from; one per kind of source."""

    limiter: _backend.Slots  # one slot per connection out on loan
    kind: str  # 'postgres' | 'sqlite'

    def acquire(self, readonly: bool) -> AbstractAsyncContextManager[Lease]: ...

    async def connect_dedicated(self) -> Any: ...

    async def aclose(self) -> None: ...


def _close_all(conns: list[Any]) -> None:
    for conn in conns:
        close_quietly(conn)


# ---------------------------------------------------------------- postgres


class _PgOwnPool:
    """Autocommit connections opened on demand up to ``size``; idle ones checked, reused LIFO.

    A dead idle connection (server restarted, link dropped) is discarded before it is handed
    out, so the first statement after an outage gets a fresh connection, and an outage shows
    at once as a failed connect rather than as a wait for a pool that keeps retrying in the
    background.
    """

    kind = "postgres"

    def __init__(self, conninfo: str, *, size: int, timeout: float | None, connect_timeout: float,
                 configure: Callable[[psycopg.Connection[Any]], None] | None) -> None:
        self.conninfo = conninfo
        self.kwargs: dict[str, Any] = {"connect_timeout": max(1, int(connect_timeout))}
        self.configure = configure
        self.timeout = timeout
        self.limiter = _backend.Slots(size)
        self._idle: list[Any] = []
        self._lock = threading.Lock()  # river_sync's borrowers are threads; never contended on a loop
        self._closed = False

    def _open(self) -> Any:
        return open_pg(self.conninfo, self.kwargs, self.configure)

    async def prime(self) -> None:
        """Open one connection now, surfacing bad URLs and credentials at construction."""
        conn = await run_blocking(self._open)
        with self._lock:
            self._idle.append(conn)

    def _take_idle(self) -> Any | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if pg_idle_usable(conn):
                return conn
            close_quietly(conn)

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        async with _backend.slot(self.limiter, self.timeout, "a Postgres connection"):
            if self._closed:
                raise RiverError("the database handle is closed")
            conn = self._take_idle()
            if conn is None:
                conn = await run_blocking(self._open)
            lease = Lease(conn)
            try:
                yield lease
            finally:
                with _backend.shielded():
                    await self._release(lease)

    async def _release(self, lease: Lease) -> None:
        conn = lease.conn
        if not lease.discard and not pg_is_broken(conn) and (pg_in_transaction(conn) or not conn.autocommit):
            try:
                await run_blocking(lambda: pg_restore(conn, True))  # rolls back what was left open
            except Exception:
                log.warning("discarding a connection that could not be reset", exc_info=True)
                lease.discard = True
        if lease.discard or self._closed or pg_is_broken(conn):
            await run_blocking(lambda: close_quietly(conn))
            return
        with self._lock:
            self._idle.append(conn)

    async def connect_dedicated(self) -> Any:
        return await run_blocking(lambda: connect_dedicated(self.conninfo, dict(self.kwargs)))

    async def aclose(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        if idle:
            await run_blocking(lambda: _close_all(idle))


class _PsycopgPoolBackend:
    """A caller's ``psycopg_pool.ConnectionPool`` (left open by ``aclose``)."""

    kind = "postgres"

    def __init__(self, pool: psycopg_pool.ConnectionPool[Any], *, timeout: float | None) -> None:
        self.pool = pool
        self.timeout = timeout
        self.limiter = _backend.Slots(max(1, int(pool.max_size)))

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
            close_quietly(conn)
        # The pool replaces closed connections and rolls back anything left open.
        self.pool.putconn(conn)

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        async with _backend.slot(self.limiter, self.timeout, "a connection from the psycopg pool"):
            conn, previous = await run_blocking(self._get)
            lease = Lease(conn)
            try:
                yield lease
            finally:
                with _backend.shielded():
                    await run_blocking(lambda: self._put(lease, previous))

    async def connect_dedicated(self) -> Any:
        conninfo, kwargs = pool_connect_args(self.pool)
        return await run_blocking(lambda: connect_dedicated(conninfo, kwargs))

    async def aclose(self) -> None:
        pass


# ---------------------------------------------------------------- sqlite


class _SingleWriter:
    """SQLite's one writer, for a path's connection and for an engine's alike: a lock, and who
    holds it, so that a second writer lease in the same task (or thread) is refused at once:
    it would wait for itself, and a second connection would hit SQLITE_BUSY."""

    def __init__(self) -> None:
        self.lock = _backend.Lock()
        self._owner: object | None = None

    @asynccontextmanager
    async def hold(self, timeout: float | None) -> AsyncIterator[None]:
        me = _backend.current_owner()
        if self._owner == me:
            raise RiverError(
                "this task (or thread) already holds the SQLite writer connection; nested writer executors "
                "would deadlock (SQLite has a single writer): reuse the outer executor"
            )
        if not await _backend.acquire_lock(self.lock, timeout):
            raise wait_timed_out(timeout, "the SQLite writer connection")
        try:
            self._owner = me
            yield
        finally:
            self._owner = None
            self.lock.release()


class _SQLiteBackend:
    """One writer connection behind a lock, plus lazily opened read-only connections."""

    kind = "sqlite"

    def __init__(self, path: str, *, readers: int, busy_timeout_ms: int, timeout: float | None) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.timeout = timeout
        self.max_readers = sqlite_reader_count(path, readers)
        self.limiter = _backend.Slots(self.max_readers + 1)
        # Readers alone take at most max_readers: the limiter's last token is the writer's, so a
        # burst of reads neither opens a reader too many nor keeps the writer waiting.
        self._reader_slots = _backend.Slots(max(1, self.max_readers))
        self._writer: Any | None = None
        self._single_writer = _SingleWriter()
        self._idle_readers: list[Any] = []
        self._all_readers: set[Any] = set()
        self._readers_lock = threading.Lock()  # river_sync's readers are threads; never contended on a loop
        self._closed = False

    def _open(self, *, readonly: bool) -> Any:
        return open_sqlite(self.path, busy_timeout_ms=self.busy_timeout_ms, readonly=readonly)

    async def open(self) -> None:
        """Open the writer connection now, surfacing a bad path at construction."""
        self._writer = await run_blocking(lambda: self._open(readonly=False))

    async def _give_back(self, conn: Any, lease: Lease) -> bool:
        """Reset ``conn`` for reuse; False when it was closed instead."""
        if lease.discard:
            await run_blocking(lambda: close_quietly(conn))
            return False
        if conn.in_transaction:
            return await run_blocking(lambda: sqlite_reset(conn))
        return True

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        if readonly and self.max_readers > 0:
            async with _backend.slot(self._reader_slots, self.timeout, "a SQLite reader connection"), \
                    _backend.slot(self.limiter, self.timeout, "a SQLite reader connection"), \
                    self._reader() as lease:
                yield lease
        else:
            async with self._writer_conn() as lease:
                yield lease

    @asynccontextmanager
    async def _writer_conn(self) -> AsyncIterator[Lease]:
        async with self._single_writer.hold(self.timeout), _backend.worker_slot(self.limiter):
            if self._closed:
                raise RiverError("the database handle is closed")
            if self._writer is None:
                await self.open()
            conn = self._writer
            lease = Lease(conn)
            try:
                yield lease
            finally:
                with _backend.shielded():
                    if not await self._give_back(conn, lease):
                        self._writer = None

    @asynccontextmanager
    async def _reader(self) -> AsyncIterator[Lease]:
        # The reader slot bounds readers: one is idle or may be opened.
        with self._readers_lock:
            if self._closed:
                raise RiverError("the database handle is closed")
            conn = self._idle_readers.pop() if self._idle_readers else None
        if conn is None:
            conn = await run_blocking(lambda: self._open(readonly=True))
            with self._readers_lock:
                self._all_readers.add(conn)
        lease = Lease(conn)
        try:
            yield lease
        finally:
            with _backend.shielded():
                healthy = await self._give_back(conn, lease)
                with self._readers_lock:
                    keep = healthy and not self._closed
                    if keep:
                        self._idle_readers.append(conn)
                    else:
                        self._all_readers.discard(conn)
                if healthy and not keep:
                    await run_blocking(lambda: close_quietly(conn))

    async def connect_dedicated(self) -> Any:
        raise ValidationError(NO_LISTEN_ON_SQLITE)

    async def aclose(self) -> None:
        with self._readers_lock:
            self._closed = True
            readers = list(self._all_readers)
            self._all_readers.clear()
            self._idle_readers.clear()
        async with self._single_writer.lock:
            writer, self._writer = self._writer, None
        await run_blocking(lambda: _close_all([c for c in [*readers, writer] if c is not None]))


# ---------------------------------------------------------------- sqlalchemy


class _SQLAlchemyBackend:
    """Borrows DB-API connections from an Engine's pool (the engine stays the caller's).

    At most the pool's size are out at once: a borrower waits up to ``timeout`` seconds for
    one instead of the engine's own pool timeout, so both clients fail the same way when the
    engine runs dry.
    """

    def __init__(self, engine: sqlalchemy.Engine, kind: str, *, timeout: float | None) -> None:
        self.engine = engine
        self.kind = kind
        self.timeout = timeout
        self.limiter = _backend.Slots(engine_pool_size(engine))
        # Same single writer as for SQLite paths, across the engine's connections.
        self._sqlite_writer = _SingleWriter() if kind == "sqlite" else None

    @asynccontextmanager
    async def acquire(self, readonly: bool) -> AsyncIterator[Lease]:
        writer = self._sqlite_writer
        if writer is None or readonly:
            async with self._borrow() as lease:
                yield lease
            return
        async with writer.hold(self.timeout), self._borrow() as lease:
            yield lease

    @asynccontextmanager
    async def _borrow(self) -> AsyncIterator[Lease]:
        async with _backend.slot(self.limiter, self.timeout, "a connection from the SQLAlchemy engine"):
            engine, kind = self.engine, self.kind
            proxy, conn, previous = await run_blocking(lambda: borrow_engine_connection(engine, kind))
            lease = Lease(conn)
            try:
                yield lease
            finally:
                with _backend.shielded():
                    await run_blocking(lambda: return_engine_connection(
                        proxy, conn, kind, previous, discard=lease.discard))

    async def connect_dedicated(self) -> Any:
        conninfo, params = engine_connect_args(self.engine, self.kind)
        return await run_blocking(lambda: connect_dedicated(conninfo, params))

    async def aclose(self) -> None:
        pass


__all__ = ["AsyncBackend", "Lease", "run_blocking"]
