"""Open a DB-API connection from a database URL, ready for the ``Executor``.

Accepted: ``postgres://...`` / ``postgresql://...`` (psycopg 3, autocommit), ``sqlite://PATH``
(relative), ``sqlite:///ABS/PATH``, ``sqlite://:memory:``, or a plain file path (SQLite).
"""

from __future__ import annotations

import os
from typing import Any

from river_protocol.errors import ValidationError
from river_sync.sqlite_compat import connect_sqlite

DEFAULT_SQLITE_FILE = "river.sqlite3"
ENV_DATABASE_URL = "RIVER_DATABASE_URL"


def default_database_url() -> str:
    """``$RIVER_DATABASE_URL`` if set, else ``river.sqlite3`` in the working directory."""
    return os.environ.get(ENV_DATABASE_URL) or f"sqlite://{DEFAULT_SQLITE_FILE}"


def dialect_of_url(url: str) -> str:
    """"postgres" or "sqlite" for ``url`` without connecting (a bare path means SQLite)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("postgres", "postgresql"):
        return "postgres"
    if scheme in ("sqlite", ""):
        return "sqlite"
    raise ValidationError(
        f"unsupported database URL scheme {scheme!r}: use postgres://..., postgresql://..., "
        "sqlite://PATH or a plain SQLite file path"
    )


def sqlite_path(url: str) -> str:
    """The file path of a SQLite URL or bare path (``sqlite:///abs`` keeps the leading slash)."""
    path = url.split("://", 1)[1] if "://" in url else url
    if not path:
        raise ValidationError(f"SQLite URL {url!r} has no file path: use sqlite://river.sqlite3")
    if "?" in path:
        raise ValidationError(f"SQLite URL {url!r}: query parameters are not supported")
    return path


def open_connection(url: str | None = None) -> tuple[Any, str]:
    """Connect to ``url`` (default: ``default_database_url()``); returns (connection, dialect name)."""
    url = url or default_database_url()
    dialect = dialect_of_url(url)
    if dialect == "postgres":
        import psycopg

        return psycopg.connect(url, autocommit=True), dialect
    return connect_sqlite(sqlite_path(url)), dialect


def dialect_of_connection(conn: Any) -> str:
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
                "migrations manage their own transactions; see river_sync.sqlite_compat.connect_sqlite"
            )
        return "sqlite"
    raise ValidationError(f"unsupported connection type {type(conn).__module__}.{type(conn).__name__}")
