"""Blocking DB-API connections, shared by both drivers.

river_anyio drives the very same sync psycopg/SQLite connections as river_sync,
only from worker threads, so everything here that does not wait on a pool or a
lock (opening, checking, resetting, reading pools and engines) lives once, here;
``river_sync.database`` and ``river_anyio.database`` keep only their waiting.
"""

from __future__ import annotations

import functools
import logging
import math
import operator
import select
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime
from typing import TYPE_CHECKING, Any

from river_db.sqlite import MIN_VERSION, MIN_VERSION_TEXT, connect_sqlite, sqlite_reset, sqlite_to_explicit
from river_db.urls import DialectName, default_database_url, parse_database_url
from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

DEFAULT_POOL_SIZE = 10
DEFAULT_SQLITE_READERS = 4
DEFAULT_ACQUIRE_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 10.0

NO_LISTEN_ON_SQLITE = "SQLite has no LISTEN/NOTIFY connection; use the outbox notifier"


def dialect_for(kind: str, schema: str | None) -> Dialect:
    """The dialect for a ``'postgres'``/``'sqlite'`` kind."""
    return PostgresDialect(schema) if kind == "postgres" else SQLiteDialect(schema)


# ---------------------------------------------------------------- postgres


def pg_status(conn: Any) -> Any:
    from psycopg.pq import TransactionStatus

    return TransactionStatus(conn.pgconn.transaction_status)


def pg_is_broken(conn: Any) -> bool:
    """Closed, broken, or in a state (mid-query, lost) no one can reuse."""
    from psycopg.pq import TransactionStatus

    return bool(conn.closed) or bool(getattr(conn, "broken", False)) or (
        pg_status(conn) in (TransactionStatus.UNKNOWN, TransactionStatus.ACTIVE)
    )


def pg_in_transaction(conn: Any) -> bool:
    from psycopg.pq import TransactionStatus

    return bool(pg_status(conn) != TransactionStatus.IDLE)


def pg_to_autocommit(conn: Any) -> bool:
    """Put a borrowed connection in autocommit mode; returns the mode to restore."""
    previous = bool(conn.autocommit)
    if pg_in_transaction(conn):
        conn.rollback()
    if not previous:
        conn.autocommit = True
    return previous


def pg_restore(conn: Any, autocommit: bool) -> None:
    """Leave the connection idle with its original mode; errors mean the owner must discard it."""
    if pg_is_broken(conn):
        return
    if pg_in_transaction(conn):
        log.warning("rolling back a transaction left open on a returned connection")
        conn.rollback()
    if conn.autocommit != autocommit:
        conn.autocommit = autocommit


# Set on the connections River opens for its own pools (``open_pg``): only on them may
# psycopg prepare River's statements, and only once ``behind_pooler`` found no pooler.
# A caller's connection (``tx=``, a caller's pool or engine) is never prepared by us.
OWN_PREPARES = "_river_may_prepare"


def behind_pooler(conn: Any) -> bool:
    """Whether ``conn`` goes through a connection pooler (PgBouncer, or any that does the same).

    The backend process id a server announces at connect (BackendKeyData, which
    ``info.backend_pid`` reads) is the one that answers ``pg_backend_pid()`` on a
    direct connection. A pooler hands out its own key instead, to route cancel
    requests, so the two differ; with transaction pooling the backend can even
    change between statements. One round trip, once per new connection.
    """
    row = conn.execute("SELECT pg_backend_pid()", prepare=False).fetchone()
    return row is None or int(row[0]) != int(conn.info.backend_pid)


def use_unprepared(conn: Any) -> None:
    """Never prepare statements on ``conn`` again (``prepare_threshold=None``).

    Behind a transaction pooler a statement psycopg prepared lives on one server
    connection while the next transaction may run on another ("prepared statement
    _pg3_0 does not exist"), or on one where another client's ``_pg3_0`` means
    some other statement.
    """
    conn.prepare_threshold = None
    if getattr(conn, OWN_PREPARES, False):
        setattr(conn, OWN_PREPARES, False)


def open_pg(conninfo: str, kwargs: dict[str, Any],
            configure: Callable[[psycopg.Connection[Any]], None] | None) -> psycopg.Connection[Any]:
    """A new autocommit connection for a pool we own; ``configure`` must leave it idle.

    Its statements are prepared (psycopg's threshold) on a direct connection, where that
    saves the server planning them again; behind a pooler they never are (``behind_pooler``).
    """
    import psycopg

    conn = psycopg.connect(conninfo, autocommit=True, **kwargs)
    try:
        if behind_pooler(conn):
            use_unprepared(conn)
        elif conn.prepare_threshold is not None:
            setattr(conn, OWN_PREPARES, True)
        if configure is not None:
            configure(conn)
            if pg_is_broken(conn) or not conn.autocommit:
                raise ValidationError("configure() must leave the connection idle in autocommit mode")
    except BaseException:
        conn.close()
        raise
    return conn


def pg_idle_usable(conn: Any) -> bool:
    """Whether an idle pooled connection may be handed out (a cheap check, no round trip).

    An idle autocommit connection has nothing to say: readable input means the server
    closed it (a restart, an admin shutdown, a dropped link) or sent something we would
    have to interpret.
    """
    if pg_is_broken(conn):
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except Exception:
        return False
    return not readable


def close_quietly(conn: Any) -> None:
    with suppress(Exception):
        conn.close()


# A long-lived listener must notice a silently dead peer (its ping would otherwise block
# until the OS gives up on the TCP connection, many minutes later).
_DEDICATED_DEFAULTS = {
    "connect_timeout": int(DEFAULT_CONNECT_TIMEOUT),
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


def _array_literal(items: list[Any]) -> str | None:
    """A Postgres array literal of a flat list of ints, bools, strs or aware datetimes (and
    Nones); None for anything else, which psycopg's own dumper then handles."""
    kinds = set(map(type, items))
    if len(kinds) == 1:
        # One type throughout (a completion batch's ids, states and times): joined in C.
        kind = kinds.pop()
        if kind is int:
            return "{" + ",".join(map(str, items)) + "}"
        if kind is str:
            joined = "".join(items)
            if '"' not in joined and "\\" not in joined:
                return '{"' + '","'.join(items) + '"}'
        elif kind is datetime and None not in set(map(_TZINFO, items)):
            return "{" + ",".join(map(datetime.isoformat, items)) + "}"
    parts: list[str] = []
    append = parts.append
    for item in items:
        kind = type(item)
        if item is None:
            append("NULL")
        elif kind is int:
            append(str(item))
        elif kind is str:
            append('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"')
        elif kind is datetime and item.tzinfo is not None:
            append(item.isoformat())  # no space or comma in it: needs no quotes
        elif kind is bool:
            append("t" if item else "f")
        else:
            return None
    return "{" + ",".join(parts) + "}"


_TZINFO = operator.attrgetter("tzinfo")


@functools.cache
def _fast_list_dumper() -> type:
    from psycopg.types.array import ListDumper

    class FastListDumper(ListDumper):
        """psycopg's text list dumper with a fast path for flat lists of plain values.

        Its generic loop (an element dumper, a quoting regex and a join per element)
        cost 5 us per timestamp and 2 us per JSON text; a completion batch sends eight
        arrays a job long. Same oid (psycopg still picks it from the elements), so the
        values the server parses are the same.
        """

        def dump(self, obj: list[Any]) -> Any:
            literal = _array_literal(obj) if obj and self._tx.encoding == "utf-8" else None
            if literal is None:
                return super().dump(obj)
            return literal.encode()

    return FastListDumper


def with_utc_session(
    configure: Callable[[psycopg.Connection[Any]], None] | None,
) -> Callable[[psycopg.Connection[Any]], None]:
    """The setup for a connection River opens for itself: session TimeZone UTC, then ``configure``.

    It also registers a faster dumper for lists (``_fast_list_dumper``) on the
    connection alone.

    psycopg hands timestamptz values of a session named exactly ``UTC`` the shared
    ``datetime.timezone.utc``, but for any other name (the server default is often
    ``Etc/UTC``) a ZoneInfo that every row then pays to build and to convert back:
    a third of reading a claimed job. Times are instants, so nothing stored,
    compared or returned changes. A caller's ``configure`` runs after and may set
    its own zone; pools and engines the caller owns are left as they are.
    """

    def setup(conn: psycopg.Connection[Any]) -> None:
        conn.adapters.register_dumper(list, _fast_list_dumper())
        conn.execute("SET TimeZone TO 'UTC'")
        if configure is not None:
            configure(conn)

    return setup


def connect_dedicated(conninfo: str, kwargs: dict[str, Any] | None = None) -> psycopg.Connection[Any]:
    """A new autocommit psycopg connection for long-lived use (LISTEN); settings in
    ``conninfo``/``kwargs`` win over our connect-timeout and keepalive defaults."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    if "://" in conninfo:
        conninfo = parse_database_url(conninfo).conninfo
    given = {**conninfo_to_dict(conninfo), **(kwargs or {})}
    params: dict[str, Any] = {k: v for k, v in _DEDICATED_DEFAULTS.items() if k not in given}
    # Its few statements (LISTEN, the ping) gain nothing from preparing, and behind a
    # transaction pooler a prepared ping would fail on the next server connection.
    params.setdefault("prepare_threshold", None)
    return psycopg.connect(conninfo, **{**params, **(kwargs or {}), "autocommit": True})


def pool_connect_args(pool: Any) -> tuple[str, dict[str, Any]]:
    """The conninfo and kwargs a ``psycopg_pool`` pool connects with."""
    # Newer pools accept callables that compute connection parameters per connect.
    conninfo = pool.conninfo() if callable(pool.conninfo) else pool.conninfo
    kwargs = pool.kwargs() if callable(pool.kwargs) else pool.kwargs
    return str(conninfo), dict(kwargs or {})


def outside_tx(obj: Any) -> str | None:
    """"sqlite"/"postgres" for a connection with no open transaction (autocommit), else None.

    Such a connection has nothing uncommitted to show; reading it directly avoids
    starting a transaction its owner never asked for.
    """
    module = type(obj).__module__.split(".", 1)[0]
    if module in ("sqlite3", "sqlean") and not obj.in_transaction:
        return "sqlite"
    if module == "psycopg" and getattr(obj, "autocommit", False) and not pg_in_transaction(obj):
        return "postgres"
    return None


# ---------------------------------------------------------------- sqlalchemy


def sqlalchemy_kind(engine_or_dialect: Any) -> str:
    """'postgres' or 'sqlite' for a SQLAlchemy engine/dialect we can drive, else ValidationError."""
    dialect = getattr(engine_or_dialect, "dialect", engine_or_dialect)
    if dialect.name == "postgresql":
        if dialect.driver != "psycopg":
            raise ValidationError(
                f"SQLAlchemy driver {dialect.driver!r} is not supported for Postgres: use psycopg 3 "
                "(URL scheme postgresql+psycopg://)"
            )
        return "postgres"
    if dialect.name == "sqlite":
        if dialect.driver != "pysqlite":
            raise ValidationError(
                f"SQLAlchemy SQLite driver {dialect.driver!r} is not supported: use pysqlite (sqlite://) "
                "with a module providing SQLite >= 3.45, e.g. create_engine(url, module=sqlean)"
            )
        version = tuple(getattr(dialect.dbapi, "sqlite_version_info", (0,)))
        if version < MIN_VERSION:
            found = ".".join(map(str, version))
            raise ValidationError(
                f"the engine's SQLite module provides SQLite {found}, but River's schema needs "
                f">= {MIN_VERSION_TEXT} (JSONB). Configure the engine with a newer module, e.g. "
                "`import sqlean; create_engine('sqlite:///path.db', module=sqlean)`"
            )
        return "sqlite"
    raise ValidationError(
        f"unsupported SQLAlchemy dialect {dialect.name!r}: use postgresql+psycopg or sqlite"
    )


def engine_connect_args(engine: Any, kind: str) -> tuple[str, dict[str, Any]]:
    """The conninfo and params of a Postgres engine, for a dedicated connection."""
    if kind != "postgres":
        raise ValidationError(NO_LISTEN_ON_SQLITE)
    cargs, cparams = engine.dialect.create_connect_args(engine.url)
    params = {k: v for k, v in cparams.items() if k != "context"}
    return (str(cargs[0]) if cargs else ""), params


def engine_pool_size(engine: Any) -> int:
    """How many connections ``engine``'s pool may lend at once: a QueuePool's size plus its
    overflow (-1, unlimited, adds none); other pools count as ``DEFAULT_POOL_SIZE``."""
    size_of = getattr(engine.pool, "size", None)
    if not callable(size_of):
        return DEFAULT_POOL_SIZE
    return max(1, int(size_of()) + max(0, int(getattr(engine.pool, "_max_overflow", 0))))


def borrow_engine_connection(engine: Any, kind: str) -> tuple[Any, Any, Any]:
    """(proxy, DB-API connection, previous mode) from ``engine``'s pool, switched to the mode
    executors need (Postgres: autocommit; SQLite: explicit transactions)."""
    proxy = engine.raw_connection()
    try:
        conn: Any = proxy.driver_connection
        previous: Any = pg_to_autocommit(conn) if kind == "postgres" else sqlite_to_explicit(conn)
    except BaseException:
        proxy.close()
        raise
    return proxy, conn, previous


def return_engine_connection(
    proxy: Any, conn: Any, kind: str, previous: Any, *, discard: bool = False
) -> None:
    """Give a borrowed connection back in its owner's mode; one that can't be reset (or that
    the borrower marks ``discard``) is invalidated so the engine never lends it again."""
    try:
        broken = discard
        if kind == "postgres":
            if not broken:
                try:
                    pg_restore(conn, previous)
                    broken = pg_is_broken(conn)
                except Exception:
                    log.warning("invalidating a connection that could not be reset", exc_info=True)
                    broken = True
        elif not broken:
            if sqlite_reset(conn):
                conn.isolation_level = previous
            else:
                broken = True
        if broken:
            proxy.invalidate()
    finally:
        proxy.close()


def wait_timed_out(timeout: float | None, what: str) -> TimeoutError:
    """The error both drivers raise when no connection of ``what`` came within ``timeout`` s."""
    return TimeoutError(f"timed out after {timeout}s waiting for {what}")


def check_pool_size(pool_size: int) -> None:
    if pool_size < 1:
        raise ValidationError(f"pool_size must be at least 1, got {pool_size}")


# ---------------------------------------------------------------- by URL


def open_connection(
    url: str | None = None, *, connect_timeout: float | None = None
) -> tuple[Any, DialectName]:
    """Connect to ``url`` (default: ``default_database_url()``); returns (connection, dialect name).

    ``connect_timeout``: seconds a Postgres connection may take (libpq counts whole seconds,
    at least 2); None leaves the URL's own setting, else libpq's default of waiting.
    """
    url = url or default_database_url()
    parsed = parse_database_url(url)
    if parsed.dialect == "postgres":
        import psycopg

        conninfo = parsed.conninfo
        if connect_timeout is not None:
            seconds = max(1, math.ceil(connect_timeout))
            conninfo = psycopg.conninfo.make_conninfo(conninfo, connect_timeout=seconds)
        # A command runs a handful of statements: nothing to gain from preparing them, and
        # never preparing works behind any pooler (``river migrate-up`` through PgBouncer).
        conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)
        with_utc_session(None)(conn)
        return conn, parsed.dialect
    return connect_sqlite(parsed.path), parsed.dialect


def dialect_of_connection(conn: Any) -> DialectName:
    """"postgres" for a psycopg connection, "sqlite" for an sqlite3/sqlean one."""
    module = type(conn).__module__.split(".", 1)[0]
    if module == "psycopg":
        if not conn.autocommit:
            raise ValidationError(
                "the psycopg connection must be in autocommit mode (autocommit=True): "
                "migrations manage their own transactions"
            )
        return "postgres"
    if module in ("sqlite3", "sqlean"):
        if conn.isolation_level is not None:
            raise ValidationError(
                "the SQLite connection must use isolation_level=None (autocommit): "
                "migrations manage their own transactions; see river_db.sqlite.connect_sqlite"
            )
        return "sqlite"
    raise ValidationError(f"unsupported connection type {type(conn).__module__}.{type(conn).__name__}")
