"""What both dialects share: names they accept, batch unique-key checks and list ordering.

Neither dialect imports the other; where Postgres and SQLite follow the same
rule (a schema name's shape, which rows of a batch can conflict, how a job list
pages) the rule lives here once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from river_protocol.dialects.rows import Binder
from river_protocol.errors import UniqueKeyRepeatedError, ValidationError
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


def refuse_repeated_unique_keys(jobs: Sequence[InsertParams]) -> None:
    """Raise ``UniqueKeyRepeatedError`` when two inputs of one batch would both enter the unique
    index with the same key, before any SQL runs, so nothing of the batch is inserted.

    River refuses such a batch (docs/protocol.md §5.2): on Postgres its multi-row
    ``ON CONFLICT DO UPDATE`` cannot touch one row twice, and its fast ``COPY`` hits the index.
    Both dialects here refuse it the same way, with a typed error instead of the database's.
    """
    first_by_key: dict[bytes, int] = {}
    for i, job in enumerate(jobs):
        if not unique_index_covers(job):
            continue
        assert job.unique_key is not None
        first = first_by_key.setdefault(job.unique_key, i)
        if first != i:
            raise UniqueKeyRepeatedError(
                f"insert batch repeats a unique key: jobs {first} and {i} (kind {job.kind!r}) would "
                "both enter the unique index with the same key; River refuses such a batch, so "
                "nothing was inserted (insert them in separate batches, or drop the repeat)",
                positions=(first, i),
            )


def results_from_rows(inserted: list[tuple[JobRow, bool]]) -> list[InsertResult]:
    """One result per input, in input order (RETURNING yields rows in input order)."""
    return [InsertResult(job=job, unique_skipped_as_duplicate=skipped) for job, skipped in inserted]


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
    # River's JobList as its ports and harness leaf List/CursorInterchange have it: "col dir, id dir"
    # with Postgres's NULL placement on both databases (last ascending, first descending), and a
    # cursor value of None standing on a NULL of col (on an id listing, ids alone decide).
    if col == "id":
        return f"id {direction}", [] if intent.after is None else [f"id {cmp} {b.p(intent.after[1])}"]
    order = f"{col} {direction} NULLS {'FIRST' if intent.descending else 'LAST'}, id {direction}"
    where: list[str] = []
    if intent.after is not None:
        value, after_id = intent.after
        if value is None:
            # Past a NULL: the NULLs after it by id, and descending every non-NULL.
            rest = f" OR {col} IS NOT NULL" if intent.descending else ""
            where.append(f"(({col} IS NULL AND id {cmp} {b.p(after_id)}){rest})")
        else:
            # Past a value: later values, its ties by id, and ascending every NULL.
            rest = "" if intent.descending else f" OR {col} IS NULL"
            where.append(
                f"({col} {cmp} {bind_time(b, value)} OR ({col} = {bind_time(b, value)}"
                f" AND id {cmp} {b.p(after_id)}){rest})"
            )
    return order, where
