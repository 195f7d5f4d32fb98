"""Postgres plans for the migration intents. A script runs as one multi-statement string:
psycopg sends a parameterless query with the simple protocol, which accepts several
statements (so scripts must not contain ``%``, which psycopg would read as a placeholder).
A script of comments only (River's no-op version 8 here) sends nothing but its bookkeeping."""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.intents import ApplyMigration, CheckMigration, GetMigrations, Statement
from river_protocol.migrations.bookkeeping import apply_plan, get_versions_plan
from river_protocol.migrations.sqlsplit import split_statements

_EXISTENCE = (
    "SELECT to_regclass(%s) IS NOT NULL, EXISTS ("
    "SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = to_regclass(%s) "
    "AND attname = 'line' AND NOT attisdropped)"
)


def get_migrations(dialect: Any, intent: GetMigrations) -> Plan[list[int]]:
    table = f"{dialect.prefix}river_migration"
    existence = Statement(_EXISTENCE, (table, table))
    return get_versions_plan(dialect.prefix, "%s", intent.line, existence)


def apply_migration(dialect: Any, intent: ApplyMigration) -> Plan[None]:
    script = [Statement(intent.sql, (), fetch=False)] if split_statements(intent.sql) else []
    return apply_plan(dialect.prefix, "%s", intent, script)


def check_migration(dialect: Any, intent: CheckMigration) -> Plan[None]:
    """Nothing refuses a Postgres version before it runs (its 8 rebuilds nothing, so River
    looks for no River Pro objects there): a dry run's check sends no statement."""
    return None
    yield  # a generator, as every plan is


PLANNERS: dict[type, Planner] = {
    GetMigrations: get_migrations,
    ApplyMigration: apply_migration,
    CheckMigration: check_migration,
}
