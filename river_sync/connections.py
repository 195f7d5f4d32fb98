"""Sync DB-API connection utilities shared by both drivers.

river_trio drives the very same sync psycopg/SQLite connections as river_sync,
only from worker threads, so everything here that does not wait on a pool or a
lock (checking, resetting, opening, reading URLs and engines) lives once, here;
``river_sync.database`` and ``river_trio.database`` keep only their waiting.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError
from river_sync.sqlite_compat import MIN_VERSION, connect_sqlite

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

DEFAULT_POOL_SIZE = 10
DEFAULT_SQLITE_READERS = 4
DEFAULT_ACQUIRE_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 10.0

_MIN_VERSION_TEXT = ".".join(map(str, MIN_VERSION))

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


# A long-lived listener must notice a silently dead peer (its ping would otherwise block
# until the OS gives up on the TCP connection, many minutes later).
_DEDICATED_DEFAULTS = {
    "connect_timeout": int(DEFAULT_CONNECT_TIMEOUT),
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


def connect_dedicated(conninfo: str, kwargs: dict[str, Any] | None = None) -> psycopg.Connection[Any]:
    """A new autocommit psycopg connection for long-lived use (LISTEN); settings in
    ``conninfo``/``kwargs`` win over our connect-timeout and keepalive defaults."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    conninfo = strip_driver(conninfo)
    given = {**conninfo_to_dict(conninfo), **(kwargs or {})}
    params = {k: v for k, v in _DEDICATED_DEFAULTS.items() if k not in given}
    return psycopg.connect(conninfo, **{**params, **(kwargs or {}), "autocommit": True})


def pool_connect_args(pool: Any) -> tuple[str, dict[str, Any]]:
    """The conninfo and kwargs a ``psycopg_pool`` pool connects with."""
    # Newer pools accept callables that compute connection parameters per connect.
    conninfo = pool.conninfo() if callable(pool.conninfo) else pool.conninfo
    kwargs = pool.kwargs() if callable(pool.kwargs) else pool.kwargs
    return str(conninfo), dict(kwargs or {})


# ---------------------------------------------------------------- sqlite


def _sqlite_version(conn: Any) -> tuple[int, ...]:
    cur = conn.cursor()
    try:
        cur.execute("SELECT sqlite_version()")
        text = cur.fetchone()[0]
    finally:
        cur.close()
    return tuple(int(part) for part in str(text).split("."))


def check_sqlite_version(conn: Any, *, hint: str) -> None:
    """Refuse a SQLite connection too old for River's schema (JSONB needs >= 3.45)."""
    version = _sqlite_version(conn)
    if version < MIN_VERSION:
        found = ".".join(map(str, version))
        raise ValidationError(
            f"SQLite {found} is too old: River's schema needs SQLite >= {_MIN_VERSION_TEXT} (JSONB). {hint}"
        )


def sqlite_reader_count(path: str, readers: int) -> int:
    """How many reader connections a SQLite path may have besides its writer."""
    memory = path in ("", ":memory:") or path.startswith("file::memory:")
    # A private in-memory database exists only on its one connection.
    return 0 if memory else max(0, readers)


def open_sqlite(path: str, *, busy_timeout_ms: int, readonly: bool) -> Any:
    """A checked connection for a pool: the writer, or a ``query_only`` reader."""
    conn = connect_sqlite(path, busy_timeout_ms=busy_timeout_ms)
    try:
        check_sqlite_version(conn, hint="Install sqlean-py.")
        if readonly:
            conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def sqlite_reset(conn: Any) -> bool:
    """Roll back a leftover transaction; False (and closed) when the connection is unusable."""
    try:
        if conn.in_transaction:
            log.warning("rolling back a transaction left open on a returned SQLite connection")
            conn.rollback()
        return True
    except Exception:
        log.warning("discarding a SQLite connection that could not be reset", exc_info=True)
        with suppress(Exception):
            conn.close()
        return False


def sqlite_to_explicit(conn: Any) -> Any:
    """Switch a borrowed connection to explicit transactions; returns the isolation level to restore."""
    # The DB-API's implicit BEGIN before DML would leave "autocommit" statements
    # inside a transaction nobody commits; explicit transactions only.
    previous = conn.isolation_level
    if conn.in_transaction:
        conn.rollback()
    conn.isolation_level = None
    return previous


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
                f">= {_MIN_VERSION_TEXT} (JSONB). Configure the engine with a newer module, e.g. "
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


# ---------------------------------------------------------------- urls


def url_kind(url: str) -> str:
    """'postgres' or 'sqlite' for a database URL, else ValidationError."""
    scheme = url.partition("://")[0].split("+", 1)[0].lower() if "://" in url else url.split(":")[0]
    if scheme in ("postgres", "postgresql"):
        return "postgres"
    if scheme == "sqlite":
        return "sqlite"
    raise ValidationError(
        f"unsupported database URL {url.split('://')[0]!r}://...: use postgres://, postgresql:// or sqlite://"
    )


def check_pool_size(pool_size: int) -> None:
    if pool_size < 1:
        raise ValidationError(f"pool_size must be at least 1, got {pool_size}")


def sqlite_path_from_url(url: str) -> str:
    """Go River's CLI convention: ``sqlite://rel.db`` is relative, ``sqlite:///abs.db`` absolute;
    ``sqlite://`` and ``sqlite://:memory:`` are an in-memory database."""
    rest = url.split("://", 1)[1] if "://" in url else url.split(":", 1)[1]
    if rest in ("", ":memory:"):
        return ":memory:"
    from river_sync.db import sqlite_path

    return sqlite_path(url)


def strip_driver(url: str) -> str:
    """``postgresql+psycopg://...`` -> ``postgresql://...`` (libpq knows no driver suffix)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    return scheme.split("+", 1)[0] + sep + rest
