"""The SQLite dialect (sqlite3 paramstyle ``?``, SQLite >= 3.45 with JSONB), one module per family.

SQLite has no arrays and no data-modifying CTEs, so batches travel as one
JSON array expanded with ``json_each`` and multi-step operations become
several statements inside the intent's transaction (``BEGIN IMMEDIATE``
makes this process the only writer meanwhile). JSON columns are JSONB:
written through ``jsonb()``, read through ``json()``. Times are canonical UTC
text (docs/protocol.md §3.4) because River compares them as strings.
"""

from __future__ import annotations

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.common import validate_schema


class SQLiteDialect(Dialect):
    name = "sqlite"
    paramstyle = "qmark"
    # Take the write lock up front: River's SQLite statements are multi-step and a
    # deferred transaction would hit SQLITE_BUSY when upgrading to a writer.
    begin_sql = "BEGIN IMMEDIATE"
    planner_modules = (
        "river_protocol.dialects.sqlite.jobs",
        "river_protocol.dialects.sqlite.maintenance",
        "river_protocol.dialects.sqlite.queues",
        "river_protocol.dialects.sqlite.leadership",
        "river_protocol.dialects.sqlite.notifications",
        "river_protocol.dialects.sqlite.admin",
        "river_protocol.dialects.sqlite.migrations",
        "river_protocol.dialects.sqlite.workflows",
        "river_protocol.dialects.sqlite.dashboard",
        "river_protocol.dialects.sqlite.flow",
        "river_protocol.dialects.sqlite.leases",
    )

    def __init__(self, schema: str | None = None) -> None:
        super().__init__(validate_schema(schema) if schema else None)
        # A schema on SQLite is the name of an attached database.
        self.prefix = f'"{self.schema}".' if self.schema else ""
