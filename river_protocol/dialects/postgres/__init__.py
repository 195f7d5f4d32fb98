"""The Postgres dialect (psycopg 3 paramstyle ``%s``), its planners one module per family.

Batched intents ship one array per column and ``unnest`` them, so a batch is
one statement whatever its size (psycopg adapts lists to arrays; JSON goes as
text and is cast). Rows come back through ``rows.pg_job_columns`` so one
parser reads them all. Conditions follow docs/protocol.md §5-§14.
"""

from __future__ import annotations

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.common import validate_schema
from river_protocol.intents import Intent, SetStateIfRunning

# Intents marked transactional (other dialects plan them as several statements) that Postgres
# plans as one statement, atomic on its own in autocommit: BEGIN and COMMIT around it would only
# cost two round trips. The completer sends one such batch per flush.
_ONE_STATEMENT: frozenset[type[Intent]] = frozenset({SetStateIfRunning})


class PostgresDialect(Dialect):
    name = "postgres"
    paramstyle = "format"
    begin_sql = "BEGIN"
    planner_modules = (
        "river_protocol.dialects.postgres.jobs",
        "river_protocol.dialects.postgres.maintenance",
        "river_protocol.dialects.postgres.queues",
        "river_protocol.dialects.postgres.leadership",
        "river_protocol.dialects.postgres.notifications",
        "river_protocol.dialects.postgres.admin",
        "river_protocol.dialects.postgres.migrations",
    )

    def __init__(self, schema: str | None = None) -> None:
        super().__init__(validate_schema(schema) if schema else None)
        # Tables are qualified only when a schema is configured; otherwise search_path decides.
        self.prefix = f'"{self.schema}".' if self.schema else ""

    def needs_transaction(self, intent: Intent) -> bool:
        return intent.transactional and type(intent) not in _ONE_STATEMENT
