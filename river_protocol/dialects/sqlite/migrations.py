"""SQLite plans for the migration intents. sqlite3 executes one statement per call, so a
script is split into statements first (see ``sqlsplit``). A version that rebuilds river_job
first looks for River Pro's schema and is refused when it is there (see ``pro_guard``)."""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.intents import ApplyMigration, CheckMigration, GetMigrations, Statement
from river_protocol.migrations import pro_guard
from river_protocol.migrations.bookkeeping import apply_plan, get_versions_plan
from river_protocol.migrations.sqlsplit import split_statements


def get_migrations(dialect: Any, intent: GetMigrations) -> Plan[list[int]]:
    if dialect.schema:
        columns = "pragma_table_info('river_migration', ?)"
        params: tuple[Any, ...] = (dialect.schema,)
    else:
        columns = "pragma_table_info('river_migration')"
        params = ()
    existence = Statement(
        f"SELECT EXISTS (SELECT 1 FROM {dialect.prefix}sqlite_master "
        "WHERE type = 'table' AND name = 'river_migration'), "
        f"EXISTS (SELECT 1 FROM {columns} WHERE name = 'line')",
        params,
    )
    return get_versions_plan(dialect.prefix, "?", intent.line, existence)


def check_migration(dialect: Any, intent: ApplyMigration | CheckMigration) -> Plan[None]:
    """Raises River Pro's refusal for a version that rebuilds river_job; a dry run asks this
    alone, a real run asks it first, in the migration's transaction."""
    if pro_guard.rebuilds_job_table("sqlite", intent):
        rows = yield pro_guard.markers_query(dialect.prefix)
        refused = pro_guard.refusal(intent, tuple(str(row[0]) for row in rows), dialect.schema)
        if refused is not None:
            raise refused


def apply_migration(dialect: Any, intent: ApplyMigration) -> Plan[None]:
    yield from check_migration(dialect, intent)
    script = [Statement(sql, (), fetch=False) for sql in split_statements(intent.sql)]
    yield from apply_plan(dialect.prefix, "?", intent, script)


PLANNERS: dict[type, Planner] = {
    GetMigrations: get_migrations,
    ApplyMigration: apply_migration,
    CheckMigration: check_migration,
}
