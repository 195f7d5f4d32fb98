"""The Postgres dialect (psycopg 3 paramstyle ``%s``)."""

from __future__ import annotations

import re

from river_protocol.dialects.base import Dialect
from river_protocol.errors import ValidationError

_SCHEMA_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
MAX_SCHEMA_LENGTH = 46  # 63-byte channel limit minus ".river_leadership"


def validate_schema(schema: str) -> str:
    if len(schema) > MAX_SCHEMA_LENGTH or not _SCHEMA_RE.match(schema):
        raise ValidationError(
            f"invalid schema name {schema!r}: must match [a-zA-Z_][a-zA-Z0-9_]* and be at most "
            f"{MAX_SCHEMA_LENGTH} characters"
        )
    return schema


class PostgresDialect(Dialect):
    name = "postgres"
    paramstyle = "format"
    begin_sql = "BEGIN"
    planner_modules = (
        "river_protocol.dialects.pg_statements",
        "river_protocol.migrations.pg_planners",
    )

    def __init__(self, schema: str | None = None) -> None:
        super().__init__(validate_schema(schema) if schema else None)
        # Tables are qualified only when a schema is configured; otherwise search_path decides.
        self.prefix = f'"{self.schema}".' if self.schema else ""
