"""SQL pieces every Postgres planner family builds with: placeholders, the job
column list, the clock and the notification channel.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from river_protocol.dialects.base import Plan
from river_protocol.dialects.rows import Binder, job_row_from_pg, pg_job_columns
from river_protocol.intents import Statement
from river_protocol.job import JobRow

JOB_COLUMNS = pg_job_columns()


def binder() -> Binder:
    return Binder("%s")


def now_sql(b: Binder, now: datetime | None, clock: str = "now()") -> str:
    """``now`` bound, or the database's ``clock`` (``now()``: the transaction's start)."""
    return clock if now is None else f"{b.p(now)}::timestamptz"


def channel_sql(d: Any, b: Binder, topic: str) -> str:
    # Listeners subscribe to "<schema>.<topic>"; without a configured schema
    # that is whatever schema the tables resolve to (docs/protocol.md §12.1).
    return f"concat(coalesce({b.p(d.schema)}::text, current_schema()), '.', {b.p(topic)}::text)"


def job_rows(rows: list[tuple[Any, ...]]) -> list[JobRow]:
    return [job_row_from_pg(r) for r in rows]


def table_exists(d: Any, name: str) -> Plan[bool]:
    """Whether the table ``name`` exists in the dialect's schema (a python-line table may not)."""
    rows = yield Statement("SELECT to_regclass(%s) IS NOT NULL", (f"{d.prefix}{name}",))
    return bool(rows[0][0])
