"""The SQLite dialect (sqlite3 paramstyle ``?``), for SQLite >= 3.45 with JSONB."""

from __future__ import annotations

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import validate_schema


class SQLiteDialect(Dialect):
    name = "sqlite"
    paramstyle = "qmark"
    # Take the write lock up front: River's SQLite statements are multi-step and a
    # deferred transaction would hit SQLITE_BUSY when upgrading to a writer.
    begin_sql = "BEGIN IMMEDIATE"
    planner_modules = (
        "river_protocol.dialects.sqlite_statements",
        "river_protocol.migrations.sqlite_planners",
    )

    def __init__(self, schema: str | None = None) -> None:
        super().__init__(validate_schema(schema) if schema else None)
        # A schema on SQLite is the name of an attached database.
        self.prefix = f'"{self.schema}".' if self.schema else ""
