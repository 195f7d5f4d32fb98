"""The plan shared by both dialects for one migration version (docs/protocol.md §2.5 steps 3-5)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from river_protocol.dialects.base import Plan
from river_protocol.errors import MigrationError
from river_protocol.intents import ApplyMigration, Statement
from river_protocol.migrations.bundle import LINE_MAIN, check_direction

# The version whose script creates the bookkeeping table, and the one that adds ``line``.
VERSION_TABLE_ADDED = 1
VERSION_LINE_ADDED = 5


def apply_plan(
    prefix: str, placeholder: str, intent: ApplyMigration, script: Iterable[Statement]
) -> Plan[None]:
    """Run ``script``, then record (up) or forget (down) the version in river_migration."""
    check_direction(intent.direction)
    if intent.version < 1:
        raise MigrationError(f"invalid migration version {intent.version}: versions start at 1")
    # Not ``yield from``: the driver sends result rows back, which a list iterator can't take.
    for statement in script:  # noqa: UP028
        yield statement
    bookkeeping = _bookkeeping(prefix, placeholder, intent)
    if bookkeeping is not None:
        yield bookkeeping


def get_versions_plan(
    prefix: str,
    placeholder: str,
    line: str,
    existence: Statement,
) -> Plan[list[int]]:
    """Applied versions of ``line``; ``existence`` returns one row (table exists, has ``line``)."""
    rows = yield existence
    table_exists, has_line = (bool(rows[0][0]), bool(rows[0][1])) if rows else (False, False)
    if not table_exists:
        if line != LINE_MAIN:
            raise MigrationError(
                "can't add a non-main migration line until river_migration exists; "
                "migrate the main line fully first"
            )
        return []
    table = f"{prefix}river_migration"
    if not has_line:
        # Before version 5 the table had no line column: every row belongs to main.
        if line != LINE_MAIN:
            raise MigrationError(
                "can't add a non-main migration line until river_migration.line exists; "
                "migrate the main line fully first"
            )
        rows = yield Statement(f"SELECT version FROM {table} ORDER BY version")
    else:
        rows = yield Statement(
            f"SELECT version FROM {table} WHERE line = {placeholder} ORDER BY version", (line,)
        )
    return [int(row[0]) for row in rows]


def _bookkeeping(prefix: str, ph: str, intent: ApplyMigration) -> Statement | None:
    table = f"{prefix}river_migration"
    main = intent.line == LINE_MAIN
    params: tuple[Any, ...]
    if intent.direction == "up":
        if main and intent.version < VERSION_LINE_ADDED:
            return Statement(f"INSERT INTO {table} (version) VALUES ({ph})", (intent.version,), fetch=False)
        params = (intent.line, intent.version)
        return Statement(f"INSERT INTO {table} (line, version) VALUES ({ph}, {ph})", params, fetch=False)
    if main and intent.version == VERSION_TABLE_ADDED:
        return None  # the script just dropped the table
    if main and intent.version <= VERSION_LINE_ADDED:
        return Statement(f"DELETE FROM {table} WHERE version = {ph}", (intent.version,), fetch=False)
    params = (intent.line, intent.version)
    return Statement(f"DELETE FROM {table} WHERE line = {ph} AND version = {ph}", params, fetch=False)
