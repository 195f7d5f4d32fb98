"""The Postgres dialect (psycopg 3 paramstyle ``%s``), its planners one module per family.

Batched intents ship one array per column and ``unnest`` them, so a batch is
one statement whatever its size (psycopg adapts lists to arrays; JSON goes as
text and is cast). Rows come back through ``rows.pg_job_columns`` so one
parser reads them all. Conditions follow docs/protocol.md §5-§14.
"""

from __future__ import annotations

from typing import ClassVar

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.common import validate_schema
from river_protocol.intents import ClaimJobs, Intent, SetStateIfRunning

# The hot path's intents whose Postgres plan is a single statement: each runs as its own
# transaction, as River Go runs its claim and its completions (no BEGIN/COMMIT round trips).
# A claim per job is what low latency costs (docs/guides/client.md, Low latency).
SINGLE_STATEMENT: frozenset[type[Intent]] = frozenset({ClaimJobs, SetStateIfRunning})


class PostgresDialect(Dialect):
    name = "postgres"
    paramstyle = "format"
    begin_sql = "BEGIN"
    single_statement: ClassVar[frozenset[type[Intent]]] = SINGLE_STATEMENT
    planner_modules = (
        "river_protocol.dialects.postgres.jobs",
        "river_protocol.dialects.postgres.maintenance",
        "river_protocol.dialects.postgres.queues",
        "river_protocol.dialects.postgres.leadership",
        "river_protocol.dialects.postgres.notifications",
        "river_protocol.dialects.postgres.admin",
        "river_protocol.dialects.postgres.migrations",
        "river_protocol.dialects.postgres.workflows",
        "river_protocol.dialects.postgres.dashboard",
        "river_protocol.dialects.postgres.flow",
        "river_protocol.dialects.postgres.leases",
    )

    def __init__(self, schema: str | None = None) -> None:
        super().__init__(validate_schema(schema) if schema else None)
        # Tables are qualified only when a schema is configured; otherwise search_path decides.
        self.prefix = f'"{self.schema}".' if self.schema else ""

    def needs_transaction(self, intent: Intent) -> bool:
        return intent.transactional and type(intent) not in self.single_statement
