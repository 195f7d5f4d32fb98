"""Pooled database handles for the threaded client: where executors come from.

A ``Database`` lends out connections wrapped in an ``Executor`` and takes them
back. Sources:

- Postgres URL (``postgres://`` / ``postgresql://``): a small pool of
  autocommit psycopg connections owned by the handle (river_trio's, with
  threads' waiting).
- A caller's ``psycopg_pool.ConnectionPool`` (not closed by us).
- A SQLAlchemy ``Engine`` (psycopg 3 or a SQLite module providing >= 3.45);
  connections come from ``engine.raw_connection()`` and go back to its pool.
- A SQLite path or ``sqlite://`` URL.

SQLite allows a single writer per database file. Several writer connections in
one process would just take turns through SQLITE_BUSY retries (or fail once
``busy_timeout`` runs out), so writes are serialized in-process instead: one
shared writer connection behind a lock. Read-only work may use separate reader
connections, which WAL lets run alongside the writer.

Executors run in autocommit mode with explicit transactions; a connection is
always handed back outside any transaction (a leftover one is rolled back) and
a broken connection is discarded rather than reused. A database that cannot be
reached raises ``DatabaseUnavailableError`` (``river_db.unavailable``).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from river_db.connect import (
    DEFAULT_ACQUIRE_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_SQLITE_READERS,
    NO_LISTEN_ON_SQLITE,
    borrow_engine_connection,
    check_pool_size,
    close_quietly,
    connect_dedicated,
    dialect_for,
    engine_connect_args,
    engine_pool_size,
    open_pg,
    pg_idle_usable,
    pg_is_broken,
    pg_restore,
    pg_to_autocommit,
    pool_connect_args,
    return_engine_connection,
    sqlalchemy_kind,
    wait_timed_out,
    with_utc_session,
)
from river_db.executor import Executor
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

class _Backend(Protocol):
    def acquire(self, readonly: bool) -> AbstractContextManager[Any]: ...

    def connect_dedicated(self) -> Any: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------- postgres


class _PgOwnPool:
    """Autocommit connections opened on demand up to ``size``; idle ones checked, reused LIFO.

    The same pool as river_trio's: a dead idle connection (server restarted, link dropped)
    is discarded before it is handed out, so the first statement after an outage gets a
    fresh connection, and an outage shows at once as a failed connect rather than as a
    wait for a pool that keeps retrying in the background.
    """

    def __init__(self, conninfo: str, *, size: int, timeout: float | None, connect_timeout: float,
                 configure: Callable[[psycopg.Connection[Any]], None] | None) -> None:
        self.conninfo = conninfo
        self.kwargs: dict[str, Any] = {"connect_timeout": max(1, int(connect_timeout))}
        self.configure = configure
        self.timeout = timeout
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> Any:
        return open_pg(self.conninfo, self.kwargs, self.configure)

    def prime(self) -> None:
        """Open one connection now, surfacing bad URLs and credentials at construction."""
        conn = self._open()
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

    @contextmanager
    def acquire(self, readonly: bool) -> Iterator[Any]:
        if not self._slots.acquire(timeout=self.timeout):
            raise TimeoutError(f"timed out after {self.timeout}s waiting for a Postgres connection")
        try:
            if self._closed:
                raise RiverError("the database handle is closed")
            conn = self._take_idle() or self._open()
            try:
                yield conn
            finally:
                self._release(conn)
        finally:
            self._slots.release()

    def _release(self, conn: Any) -> None:
        try:
            pg_restore(conn, True)
        except Exception:
            log.warning("discarding a connection that could not be reset", exc_info=True)
            close_quietly(conn)
            return
        if self._closed or pg_is_broken(conn):
            close_quietly(conn)
            return
        with self._lock:
            self._idle.append(conn)

    def connect_dedicated(self) -> Any:
        return connect_dedicated(self.conninfo, dict(self.kwargs))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            close_quietly(conn)


class _PgPoolBackend:
    def __init__(self, pool: psycopg_pool.ConnectionPool[Any], *, owned: bool, timeout: float | None) -> None:
        self.pool = pool
        self.owned = owned
        self.timeout = timeout

    @contextmanager
    def acquire(self, readonly: bool) -> Iterator[Any]:
        # The pool itself rolls back a returned transaction and replaces broken
        # connections; we only need to undo our autocommit switch first.
        with self.pool.connection(timeout=self.timeout) as conn:
            previous = pg_to_autocommit(conn)
            try:
                yield conn
            finally:
                try:
                    pg_restore(conn, previous)
                except Exception:
                    log.warning("discarding a connection that could not be reset", exc_info=True)
                    conn.close()

    def connect_dedicated(self) -> Any:
        return connect_dedicated(*pool_connect_args(self.pool))

    def close(self) -> None:
        if self.owned:
            self.pool.close()


# ---------------------------------------------------------------- sqlite


class _SQLiteBackend:
    """One writer connection behind a lock, plus lazily opened read-only connections."""

    def __init__(self, path: str, *, readers: int, busy_timeout_ms: int, timeout: float | None) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.timeout = timeout
        self.max_readers = sqlite_reader_count(path, readers)
        self._writer: Any | None = self._open(readonly=False)
        self._writer_lock = threading.Lock()
        self._writer_owner: int | None = None
        self._idle_readers: queue.LifoQueue[Any] = queue.LifoQueue()
        self._readers_lock = threading.Lock()
        self._open_readers = 0
        self._all_readers: set[Any] = set()
        self._closed = False

    def _open(self, *, readonly: bool) -> Any:
        return open_sqlite(self.path, busy_timeout_ms=self.busy_timeout_ms, readonly=readonly)

    @contextmanager
    def acquire(self, readonly: bool) -> Iterator[Any]:
        if readonly and self.max_readers > 0:
            with self._reader() as conn:
                yield conn
        else:
            with self._writer_conn() as conn:
                yield conn

    @contextmanager
    def _writer_conn(self) -> Iterator[Any]:
        me = threading.get_ident()
        if self._writer_owner == me:
            # Waiting for ourselves would deadlock; a second connection would hit SQLITE_BUSY.
            raise RiverError(
                "this thread already holds the SQLite writer connection; nested writer executors "
                "would deadlock (SQLite has a single writer): reuse the outer executor"
            )
        if not self._writer_lock.acquire(timeout=-1 if self.timeout is None else self.timeout):
            raise TimeoutError(f"timed out after {self.timeout}s waiting for the SQLite writer connection")
        try:
            self._writer_owner = me
            if self._closed:
                raise RiverError("the database handle is closed")
            if self._writer is None:
                self._writer = self._open(readonly=False)
            conn = self._writer
            try:
                yield conn
            finally:
                if not sqlite_reset(conn):
                    self._writer = None
        finally:
            self._writer_owner = None
            self._writer_lock.release()

    @contextmanager
    def _reader(self) -> Iterator[Any]:
        conn = self._take_reader()
        try:
            yield conn
        finally:
            healthy = sqlite_reset(conn)
            with self._readers_lock:
                if healthy and not self._closed:
                    self._idle_readers.put(conn)
                else:
                    self._open_readers -= 1
                    self._all_readers.discard(conn)
                    if healthy:
                        conn.close()

    def _take_reader(self) -> Any:
        with self._readers_lock:
            if self._closed:
                raise RiverError("the database handle is closed")
            try:
                return self._idle_readers.get_nowait()
            except queue.Empty:
                pass
            if self._open_readers < self.max_readers:
                self._open_readers += 1
                opening = True
            else:
                opening = False
        if opening:
            try:
                conn = self._open(readonly=True)
            except BaseException:
                with self._readers_lock:
                    self._open_readers -= 1
                raise
            with self._readers_lock:
                self._all_readers.add(conn)
            return conn
        try:
            return self._idle_readers.get(timeout=self.timeout)
        except queue.Empty:
            raise TimeoutError(
                f"timed out after {self.timeout}s waiting for a SQLite reader connection"
            ) from None

    def connect_dedicated(self) -> Any:
        raise ValidationError(NO_LISTEN_ON_SQLITE)

    def close(self) -> None:
        with self._readers_lock:
            self._closed = True
            readers = list(self._all_readers)
            self._all_readers.clear()
        for conn in readers:
            conn.close()
        with self._writer_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None


# ---------------------------------------------------------------- sqlalchemy


class _SQLAlchemyBackend:
    """Borrows DB-API connections from an Engine's pool (the engine stays the caller's).

    At most the pool's size are out at once: a borrower waits up to ``timeout``
    seconds for one (as with ``river_trio``'s limiter) instead of the engine's own
    pool timeout, so both drivers fail the same way when the engine runs dry.
    """

    def __init__(self, engine: sqlalchemy.Engine, kind: str, *, timeout: float | None) -> None:
        self.engine = engine
        self.kind = kind
        self.timeout = timeout
        self._slots = threading.BoundedSemaphore(engine_pool_size(engine))
        # Same single-writer reasoning as for SQLite paths, across the engine's connections.
        self._sqlite_writer = threading.Lock() if kind == "sqlite" else None

    @contextmanager
    def acquire(self, readonly: bool) -> Iterator[Any]:
        if self._sqlite_writer is not None and not readonly:
            if not self._sqlite_writer.acquire(timeout=-1 if self.timeout is None else self.timeout):
                raise wait_timed_out(self.timeout, "the SQLite writer connection")
            try:
                with self._borrow() as conn:
                    yield conn
            finally:
                self._sqlite_writer.release()
        else:
            with self._borrow() as conn:
                yield conn

    @contextmanager
    def _borrow(self) -> Iterator[Any]:
        if not self._slots.acquire(timeout=self.timeout):
            raise wait_timed_out(self.timeout, "a connection from the SQLAlchemy engine")
        try:
            proxy, conn, previous = borrow_engine_connection(self.engine, self.kind)
            try:
                yield conn
            finally:
                return_engine_connection(proxy, conn, self.kind, previous)
        finally:
            self._slots.release()

    def connect_dedicated(self) -> Any:
        return connect_dedicated(*engine_connect_args(self.engine, self.kind))

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- public handle


class Database:
    """Thread-safe source of executors. Build with one of the ``from_*`` constructors."""

    def __init__(self, backend: _Backend, dialect: Dialect) -> None:
        self._backend = backend
        self._dialect = dialect
        self._closed = False

    # --- constructors

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        schema: str | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        timeout: float = DEFAULT_ACQUIRE_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        configure: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> Database:
        """Open a pool for a ``postgres(ql)[+psycopg]://`` URL or a ``sqlite://`` URL.

        ``pool_size`` is the maximum number of Postgres connections, or of SQLite
        reader connections (SQLite always has exactly one writer). ``configure`` runs
        on each new Postgres connection (e.g. to set session parameters).
        """
        parsed = parse_database_url(url)
        if parsed.dialect == "postgres":
            check_pool_size(pool_size)
            backend = _PgOwnPool(parsed.conninfo, size=pool_size, timeout=timeout,
                                 connect_timeout=connect_timeout, configure=with_utc_session(configure))
            with unavailable_as_typed():
                backend.prime()
            return cls(backend, PostgresDialect(schema))
        return cls.from_sqlite_path(parsed.path, schema=schema, readers=pool_size,
                                    timeout=timeout)

    @classmethod
    def from_pool(
        cls,
        pool: psycopg_pool.ConnectionPool[Any],
        *,
        schema: str | None = None,
        timeout: float | None = None,
    ) -> Database:
        """Use a caller's psycopg pool (left open by ``close()``). Its connections may
        be in either autocommit mode; each is switched to autocommit while borrowed."""
        return cls(_PgPoolBackend(pool, owned=False, timeout=timeout), PostgresDialect(schema))

    @classmethod
    def from_sqlalchemy_engine(
        cls, engine: sqlalchemy.Engine, *, schema: str | None = None, timeout: float | None = None
    ) -> Database:
        """Borrow raw DB-API connections from ``engine`` (left undisposed by ``close()``); ``timeout``
        bounds the wait for one when the engine's pool has none free (None: no bound)."""
        kind = sqlalchemy_kind(engine)
        return cls(_SQLAlchemyBackend(engine, kind, timeout=timeout), dialect_for(kind, schema))

    @classmethod
    def from_sqlite_path(
        cls,
        path: str,
        *,
        schema: str | None = None,
        readers: int = DEFAULT_SQLITE_READERS,
        busy_timeout_ms: int = 5000,
        timeout: float | None = DEFAULT_ACQUIRE_TIMEOUT,
    ) -> Database:
        """Open a SQLite file (created if missing) in WAL mode. ``schema`` names an
        attached database that the caller attaches; usually leave it ``None``."""
        backend = _SQLiteBackend(path, readers=readers, busy_timeout_ms=busy_timeout_ms, timeout=timeout)
        return cls(backend, SQLiteDialect(schema))

    # --- use

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def executor(self, *, readonly: bool = False) -> Iterator[Executor]:
        """An executor on a borrowed connection, returned when the block ends.

        ``readonly=True`` promises that only reads happen, which lets SQLite use a
        reader connection instead of waiting for the single writer.
        """
        if self._closed:
            raise RiverError("the database handle is closed")
        with unavailable_as_typed(), self._backend.acquire(readonly) as conn:
            yield Executor(conn, self._dialect)

    def run(self, intent: Intent, *, readonly: bool = False) -> Any:
        """Run one intent on a borrowed connection (in a transaction when it needs one)."""
        with self.executor(readonly=readonly) as ex:
            return ex.run(intent)

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        """An executor inside BEGIN..COMMIT (BEGIN IMMEDIATE on SQLite); an exception rolls back."""
        with self.executor() as ex, ex.transaction():
            yield ex

    def connect_dedicated(self) -> Any:
        """A new autocommit psycopg connection outside the pool, owned by the caller
        (the notifier's LISTEN connection). Postgres only."""
        return self._backend.connect_dedicated()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._backend.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
