"""River's migrations (main line, versions 1..8) for Postgres and SQLite, and the pure planner.

The SQL lives in ``postgres/`` and ``sqlite/`` as package data. The ``GetMigrations`` and
``ApplyMigration`` intents are planned by each dialect's ``migrations`` module
(``river_protocol.dialects.postgres.migrations``, ``...sqlite.migrations``) from the
bookkeeping plan in ``bookkeeping``.
"""

from river_protocol.migrations.bundle import (
    DIALECTS,
    LINE_MAIN,
    LINE_PYTHON,
    LINES,
    SCHEMA_PLACEHOLDER,
    Migration,
    check_line,
    migration,
    migrations_for,
    render,
    versions_for,
)
from river_protocol.migrations.plan import ALL, MAIN_VERSIONS, plan_migration, unapplied
from river_protocol.migrations.sqlsplit import split_statements

__all__ = [
    "ALL",
    "DIALECTS",
    "LINES",
    "LINE_MAIN",
    "LINE_PYTHON",
    "MAIN_VERSIONS",
    "SCHEMA_PLACEHOLDER",
    "Migration",
    "check_line",
    "migration",
    "migrations_for",
    "plan_migration",
    "render",
    "split_statements",
    "unapplied",
    "versions_for",
]
