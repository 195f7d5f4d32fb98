"""What a client checks before it starts, for both drivers (docs/guides/client.md, "Migrations").

- Before it opens a SQLite URL or path itself: that the file exists. Opening it would create an
  empty file with none of River's tables; the client refuses instead, as the CLI does.
- At start, before anything runs: that the database's schema is one it can work with. The
  driver reads the applied versions (one ``GetMigrations``) and ``check_schema`` raises the
  core's verdict (``river_protocol.schema_check``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from river_db.urls import explain_sqlite_path, missing_sqlite_file, redact_url
from river_protocol.errors import DatabaseNotFoundError
from river_protocol.intents import GetMigrations
from river_protocol.migrations import LINE_MAIN
from river_protocol.schema_check import migrate_command, schema_problem

# What a driver runs at start: the applied versions of River's main line.
APPLIED_VERSIONS = GetMigrations(line=LINE_MAIN)


def database_url_of(database: Any) -> str | None:
    """The client's ``database`` argument as a URL for ``river migrate-up`` (password hidden);
    None for a pool, an engine or a Database."""
    if isinstance(database, Path):
        return f"sqlite://{database}"
    if isinstance(database, str):
        return redact_url(database)
    return None


def refuse_missing_sqlite_file(database: Any) -> None:
    """Raise ``DatabaseNotFoundError`` when ``database`` (a URL or path) names a SQLite file that
    does not exist; anything else passes."""
    url = database_url_of(database)
    if url is None or not isinstance(database, str | Path):
        return
    text = f"sqlite://{database}" if isinstance(database, Path) else database
    path = missing_sqlite_file(text)
    if path is None:
        return
    problem = schema_problem("sqlite", (), database_url=url)
    assert problem is not None  # nothing applied is always a problem
    raise DatabaseNotFoundError(
        f"no SQLite database at {explain_sqlite_path(path)}: a client does not create one (an "
        f"empty file has none of River's tables). Create and migrate it with `{migrate_command(url, None)}`",
        missing_tables=problem.missing_tables, missing_versions=problem.missing_versions,
        required_version=problem.required_version,
    )


def check_schema(dialect: str, applied: Iterable[int], database: Any, schema: str | None) -> None:
    """Raise ``DatabaseNotMigratedError`` unless ``applied`` holds every version the client needs."""
    problem = schema_problem(dialect, applied, database_url=database_url_of(database), schema=schema)
    if problem is not None:
        raise problem
