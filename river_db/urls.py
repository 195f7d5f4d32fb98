"""The one reader of database URLs, for both drivers, the CLI and the test helpers.

Accepted forms:

- ``postgres://...`` and ``postgresql://...``, with an optional SQLAlchemy-style
  driver suffix (``postgresql+psycopg://...``), which libpq does not know and is
  dropped before connecting;
- ``sqlite://PATH`` (relative to the working directory, Go River's CLI
  convention), ``sqlite:///ABS/PATH``, and ``sqlite://`` or ``sqlite://:memory:``
  for an in-memory database; the SQLAlchemy-style ``sqlite+pysqlite://`` too.
  SQLAlchemy reads three slashes as relative; Go's rule is kept because River's
  users share it, and ``explain_sqlite_path`` puts both spellings in the errors
  about a file that is not where the URL says;
- a bare path, only where it is plainly a file: it contains a ``/`` or ends in
  ``.sqlite``, ``.sqlite3`` or ``.db``. A bare word such as ``garbage`` is
  refused rather than silently becoming a new SQLite file in the working
  directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from river_protocol.errors import ValidationError

DialectName = Literal["postgres", "sqlite"]

DEFAULT_SQLITE_FILE = "river.sqlite3"
ENV_DATABASE_URL = "RIVER_DATABASE_URL"
MEMORY = ":memory:"

_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
ACCEPTED_FORMS = (
    "postgres://..., postgresql://..., sqlite://RELATIVE/PATH, sqlite:///ABSOLUTE/PATH, sqlite://:memory:, "
    "or a file path containing '/' or ending in .sqlite, .sqlite3 or .db"
)


@dataclass(frozen=True, slots=True)
class DatabaseURL:
    """A parsed database URL: ``conninfo`` for Postgres (driver suffix dropped), ``path`` for SQLite."""

    dialect: DialectName
    text: str
    conninfo: str = ""
    path: str = ""

    @property
    def in_memory(self) -> bool:
        return self.dialect == "sqlite" and self.path == MEMORY


def default_database_url() -> str:
    """``$RIVER_DATABASE_URL`` if set, else ``river.sqlite3`` in the working directory."""
    return os.environ.get(ENV_DATABASE_URL) or f"sqlite://{DEFAULT_SQLITE_FILE}"


def _sqlite(text: str, rest: str) -> DatabaseURL:
    if "?" in rest:
        raise ValidationError(f"SQLite URL {text!r}: query parameters are not supported")
    return DatabaseURL("sqlite", text, path=rest if rest not in ("", MEMORY) else MEMORY)


def is_plain_file_path(text: str) -> bool:
    """True for a bare string that can only mean a file: it has a ``/`` or a SQLite file ending."""
    return "/" in text or text.lower().endswith(_SQLITE_SUFFIXES)


def parse_database_url(text: str) -> DatabaseURL:
    """Parse ``text`` without connecting; ValidationError names the accepted forms."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"empty database URL: use {ACCEPTED_FORMS}")
    scheme, sep, rest = text.partition("://")
    if sep:
        base = scheme.split("+", 1)[0].lower()
        if base in ("postgres", "postgresql"):
            return DatabaseURL("postgres", text, conninfo=base + sep + rest)
        if base == "sqlite":
            return _sqlite(text, rest)
        raise ValidationError(f"unsupported database URL {scheme!r}://...: use {ACCEPTED_FORMS}")
    if text.lower().startswith("sqlite:"):
        return _sqlite(text, text.split(":", 1)[1])
    if text == MEMORY:
        return DatabaseURL("sqlite", text, path=MEMORY)
    if is_plain_file_path(text):
        return _sqlite(text, text)
    raise ValidationError(f"not a database URL: {text!r}; use {ACCEPTED_FORMS}")


def dialect_of_url(text: str) -> DialectName:
    """``"postgres"`` or ``"sqlite"`` for ``text``, without connecting."""
    return parse_database_url(text).dialect


def sqlite_path(text: str) -> str:
    """The file path (or ``:memory:``) of a SQLite URL; ValidationError for a Postgres one."""
    url = parse_database_url(text)
    if url.dialect != "sqlite":
        raise ValidationError(f"{text!r} is not a SQLite URL")
    return url.path


def sqlite_file_path(text: str) -> str:
    """Like ``sqlite_path`` but refuses an in-memory database (commands that need a file)."""
    path = sqlite_path(text)
    if path == MEMORY:
        raise ValidationError(f"SQLite URL {text!r} has no file path: use sqlite://river.sqlite3")
    return path


def explain_sqlite_path(path: str) -> str:
    """``path`` as the absolute path it names, followed by both URL spellings, for an error message.

    ``sqlite:///name.sqlite3`` is ``/name.sqlite3`` by Go River's rule, which surprises
    SQLAlchemy users; the message shows which file was meant by each spelling.
    """
    absolute = os.path.abspath(path)
    name = path.lstrip("/") or path
    return (
        f"{absolute} (sqlite:///{name} is the absolute path /{name}; "
        f"sqlite://{name} is {name} in the working directory {os.getcwd()})"
    )


def missing_sqlite_file(text: str) -> str | None:
    """The path of a SQLite URL whose file does not exist (None: it exists, it is in memory, or
    the URL is a Postgres one). Opening such a path would create an empty file with none of
    River's tables; the CLI and the clients refuse it instead."""
    url = parse_database_url(text)
    if url.dialect != "sqlite" or url.in_memory or os.path.exists(url.path):
        return None
    return url.path


def redact_url(text: str) -> str:
    """``text`` with any password replaced by ``***``, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    if "://" not in text:
        return text
    parts = urlsplit(text)
    if parts.password is None:
        return text
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def postgres_conninfo(text: str) -> str:
    """The libpq connection string of a Postgres URL (the driver suffix dropped)."""
    url = parse_database_url(text)
    if url.dialect != "postgres":
        raise ValidationError(f"{text!r} is not a Postgres URL")
    return url.conninfo
