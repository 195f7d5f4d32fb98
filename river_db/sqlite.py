"""A SQLite new enough for River's schema (>= 3.45, JSONB), from the stdlib or sqlean-py."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import suppress
from types import ModuleType
from typing import Any

from river_db.urls import MEMORY, explain_sqlite_path
from river_protocol.errors import RiverError, ValidationError

log = logging.getLogger(__name__)

MIN_VERSION = (3, 45, 0)
MIN_VERSION_TEXT = ".".join(map(str, MIN_VERSION))


class SQLiteOpenError(RiverError, OSError):
    """A SQLite file that cannot be opened (its directory is missing, or not writable). The message
    names the absolute path tried and both URL spellings; the driver's error is chained."""


def sqlite_module() -> ModuleType:
    """The DB-API module to use: stdlib ``sqlite3`` when recent enough, else ``sqlean``."""
    if sqlite3.sqlite_version_info >= MIN_VERSION:
        return sqlite3
    import sqlean  # type: ignore[import-untyped]

    module: ModuleType = sqlean
    return module


def connect_sqlite(path: str, *, busy_timeout_ms: int = 5000, **kwargs: Any) -> Any:
    """Open ``path`` in autocommit mode (explicit BEGIN IMMEDIATE for writes), WAL, busy timeout."""
    module = sqlite_module()
    try:
        conn = module.connect(path, isolation_level=None, check_same_thread=False, **kwargs)
    except module.OperationalError as exc:
        if path in (MEMORY, "") or kwargs.get("uri"):
            raise
        raise SQLiteOpenError(f"cannot open the SQLite database {explain_sqlite_path(path)}: {exc}") from exc
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if path not in (":memory:", ""):
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


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
            f"SQLite {found} is too old: River's schema needs SQLite >= {MIN_VERSION_TEXT} (JSONB). {hint}"
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
