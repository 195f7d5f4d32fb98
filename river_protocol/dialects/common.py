"""What both dialects share: names they accept, batch deduplication and list ordering.

Neither dialect imports the other; where Postgres and SQLite follow the same
rule (a schema name's shape, which rows of a batch can conflict, how a job list
pages) the rule lives here once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from river_protocol.dialects.rows import Binder
from river_protocol.errors import ValidationError
from river_protocol.intents import DeleteFinalizedBefore, InsertParams, InsertResult, ListJobs
from river_protocol.job import JobRow
from river_protocol.states import FINALIZED_STATES, JobState

_SCHEMA_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
MAX_SCHEMA_LENGTH = 46  # 63-byte channel limit minus ".river_leadership"
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ORDER_COLUMNS = ("id", "scheduled_at", "finalized_at", "created_at", "attempted_at")


def finalized_horizons(intent: DeleteFinalizedBefore) -> list[tuple[str, datetime]]:
    """(state, horizon) for each finalized state the cleaner deletes; a state without one is kept."""
    pairs = (
        (JobState.CANCELLED.value, intent.cancelled_before),
        (JobState.COMPLETED.value, intent.completed_before),
        (JobState.DISCARDED.value, intent.discarded_before),
    )
    return [(state, horizon) for state, horizon in pairs if horizon is not None]


def validate_schema(schema: str) -> str:
    """``schema`` if it can name a Postgres schema or an attached SQLite database, else an error.

    Both dialects take Postgres's limit: a schema name is also part of the
    notification channel names, which Postgres caps at 63 bytes.
    """
    if len(schema) > MAX_SCHEMA_LENGTH or not _SCHEMA_RE.match(schema):
        raise ValidationError(
            f"invalid schema name {schema!r}: must match [a-zA-Z_][a-zA-Z0-9_]* and be at most "
            f"{MAX_SCHEMA_LENGTH} characters"
        )
    return schema


# Spelled out for SQL text; the assert keeps it in step with the state table.
FINALIZED_SQL = "('cancelled', 'completed', 'discarded')"
assert {s.value for s in FINALIZED_STATES} == {"cancelled", "completed", "discarded"}


def json_text(data: bytes) -> str:
    """JSON bytes as bound text (Postgres casts it to jsonb, SQLite reads it with ``jsonb()``)."""
    return data.decode()


def index_identifier(name: str) -> str:
    """``name`` quoted for DDL, once it is known to be a plain identifier (it cannot be bound)."""
    if not _IDENT_RE.match(name):
        raise ValidationError(f"invalid index name {name!r}: must match [A-Za-z_][A-Za-z0-9_]*")
    return f'"{name}"'


def unique_index_covers(params: InsertParams) -> bool:
    """Whether the row would enter ``river_job_unique_idx`` (and so can conflict)."""
    if params.unique_key is None or not params.unique_states:
        return False
    bit = tuple(JobState).index(params.state)
    return bool(params.unique_states & (1 << bit))


def dedupe_batch(jobs: tuple[InsertParams, ...]) -> tuple[list[int], list[int]]:
    """Split a batch into rows to insert and, per input, the inserted row it maps to.

    Two inputs that would both enter the unique index with the same key
    conflict with each other; Postgres rejects such a statement and SQLite
    silently merges them (docs/protocol.md §5.2). Both dialects instead insert the
    first and report later ones as duplicates of it, as if inserted one by one.
    """
    first_by_key: dict[bytes, int] = {}
    to_insert: list[int] = []
    source: list[int] = []
    for i, job in enumerate(jobs):
        if unique_index_covers(job):
            assert job.unique_key is not None
            if job.unique_key in first_by_key:
                source.append(first_by_key[job.unique_key])
                continue
            first_by_key[job.unique_key] = len(to_insert)
        source.append(len(to_insert))
        to_insert.append(i)
    return to_insert, source


def results_in_input_order(
    jobs: tuple[InsertParams, ...], inserted: list[tuple[JobRow, bool]], source: list[int]
) -> list[InsertResult]:
    """One result per input, in input order: a repeat of an earlier input reports a duplicate."""
    seen: set[int] = set()
    out = []
    for slot in source:
        job, skipped = inserted[slot]
        out.append(InsertResult(job=job, unique_skipped_as_duplicate=skipped or slot in seen))
        seen.add(slot)
    return out


def order_and_cursor(
    b: Binder, intent: ListJobs, bind_time: Callable[[Binder, Any], str]
) -> tuple[str, list[str]]:
    """ORDER BY text and keyset conditions; NULLs (finalized_at) always sort last."""
    if intent.order_by not in _ORDER_COLUMNS:
        raise ValidationError(
            f"cannot order jobs by {intent.order_by!r}; use one of {', '.join(_ORDER_COLUMNS)}"
        )
    col = intent.order_by
    direction = "DESC" if intent.descending else "ASC"
    cmp = "<" if intent.descending else ">"
    if intent.go_keyset:
        return _go_order_and_cursor(b, intent, bind_time, col, direction, cmp)
    order = f"id {direction}" if col == "id" else f"{col} IS NULL, {col} {direction}, id {direction}"
    where: list[str] = []
    if intent.after is not None:
        value, after_id = intent.after
        if col == "id":
            where.append(f"id {cmp} {b.p(after_id)}")
        elif value is None:
            where.append(f"({col} IS NULL AND id {cmp} {b.p(after_id)})")
        else:
            where.append(
                f"({col} {cmp} {bind_time(b, value)} OR ({col} = {bind_time(b, value)}"
                f" AND id {cmp} {b.p(after_id)}) OR {col} IS NULL)"
            )
    return order, where


def _go_order_and_cursor(
    b: Binder, intent: ListJobs, bind_time: Callable[[Binder, Any], str], col: str, direction: str, cmp: str
) -> tuple[str, list[str]]:
    # River Go's JobList: "ORDER BY col dir, id dir"; a cursor time compares (col, id), none ids only.
    order = f"id {direction}" if col == "id" else f"{col} {direction}, id {direction}"
    where: list[str] = []
    if intent.after is not None:
        value, after_id = intent.after
        if value is None:
            where.append(f"id {cmp} {b.p(after_id)}")
        else:
            where.append(
                f"({col} {cmp} {bind_time(b, value)} OR ({col} = {bind_time(b, value)}"
                f" AND id {cmp} {b.p(after_id)}))"
            )
    return order, where
