"""Whether a database's schema is one a client can work with, from its applied versions alone.

A client reads the versions of River's main line applied in ``river_migration`` (one
``GetMigrations`` intent at start) and asks ``schema_problem``: a database where ``river
migrate-up`` never ran, or one migrated by an older River, is refused with a
``DatabaseNotMigratedError`` naming the missing tables and versions and the fix, before
anything runs (docs/guides/client.md, "Migrations"). Which tables are missing is worked out
from the migration scripts themselves, so no second query is needed.

A client needs the main line up to ``CLIENT_NEEDS_VERSION`` (7), not every version this package
ships: version 8 only changes how SQLite numbers new jobs (no table, column or row a client
reads), and fleets with River Go v0.43 to v0.47 stay at 7, which those Go clients and CLIs
expect. A database at 8 is as good. Versions beyond the bundle (a newer River's) are ignored,
as River ignores them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from river_protocol.errors import DatabaseNotMigratedError
from river_protocol.migrations.bundle import LINE_MAIN, migrations_for, render

# CREATE [UNLOGGED] TABLE name, DROP TABLE name, ALTER TABLE name RENAME TO other: what a script
# does to the set of tables (rendered without a schema prefix).
_TABLE_CHANGE = re.compile(
    r"\bCREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<created>\w+)"
    r"|\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?P<dropped>\w+)"
    r"|\bALTER\s+TABLE\s+(?P<renamed>\w+)\s+RENAME\s+TO\s+(?P<to>\w+)",
    re.IGNORECASE,
)


def _tables_after(dialect: str, versions: Iterable[int]) -> set[str]:
    """The tables River's up scripts of ``versions`` (ascending) leave behind, from none."""
    wanted = set(versions)
    tables: set[str] = set()
    for migration in migrations_for(dialect, LINE_MAIN):
        if migration.version not in wanted:
            continue
        for change in _TABLE_CHANGE.finditer(render(migration.up_sql, "")):
            if change["created"]:
                tables.add(change["created"])
            elif change["dropped"]:
                tables.discard(change["dropped"])
            else:
                tables.discard(change["renamed"])
                tables.add(change["to"])
    return tables


# The newest main-line version a client requires (River v0.43's schema); see the module text.
CLIENT_NEEDS_VERSION = 7


def required_versions(dialect: str) -> tuple[int, ...]:
    """The main-line versions a client of this package needs: 1 to ``CLIENT_NEEDS_VERSION``."""
    return tuple(m.version for m in migrations_for(dialect, LINE_MAIN) if m.version <= CLIENT_NEEDS_VERSION)


def migrate_command(database_url: str | None, schema: str | None, line: str = LINE_MAIN) -> str:
    """The command that migrates the client's database (``URL`` when the client was given no URL),
    on migration line ``line``."""
    command = f"river migrate-up --database-url {database_url or 'URL'}"
    command += f" --schema {schema}" if schema else ""
    return command + (f" --line {line}" if line != LINE_MAIN else "")


def schema_problem(
    dialect: str, applied: Iterable[int], *, database_url: str | None, schema: str | None = None
) -> DatabaseNotMigratedError | None:
    """The error to refuse a start with, or None when every required version is applied.

    ``applied``: the main line's versions in ``river_migration`` (empty without the table);
    ``database_url``: the client's URL with any password hidden, for the fix (None: a pool,
    an engine or a Database was passed, and the message says ``URL``).
    """
    needed = required_versions(dialect)
    done = tuple(sorted(set(applied)))
    missing = tuple(v for v in needed if v not in done)
    if not missing:
        return None
    tables = tuple(sorted(_tables_after(dialect, needed) - _tables_after(dialect, done)))
    fix = migrate_command(database_url, schema)
    where = f" in schema {schema!r}" if schema else ""
    if not any(v in done for v in needed):
        head = f"River's tables are missing{where}: the database was never migrated"
    else:
        head = (f"the database's River schema{where} is older than this client needs: version "
                f"{max(done)} is applied, version {needed[-1]} is needed")
    missing_text = f" (missing tables: {', '.join(tables)})" if tables else ""
    versions = ", ".join(map(str, missing))
    not_applied = f"migrations {versions} are" if len(missing) > 1 else f"migration {versions} is"
    message = f"{head}{missing_text}; {not_applied} not applied. Run `{fix}`"
    return DatabaseNotMigratedError(
        message, missing_tables=tables, applied_versions=done, missing_versions=missing,
        required_version=needed[-1],
    )


__all__ = ["CLIENT_NEEDS_VERSION", "migrate_command", "required_versions", "schema_problem"]
