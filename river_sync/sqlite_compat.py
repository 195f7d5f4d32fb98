"""A SQLite new enough for River's schema (>= 3.45, JSONB), from the stdlib or sqlean-py."""

from __future__ import annotations

import sqlite3
from types import ModuleType
from typing import Any

MIN_VERSION = (3, 45, 0)


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
    conn = module.connect(path, isolation_level=None, check_same_thread=False, **kwargs)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if path not in (":memory:", ""):
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn
