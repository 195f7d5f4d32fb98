"""SQL pieces every SQLite planner family builds with: placeholders, the job
column list, timestamps as canonical text, JSON lists and the unique index's
predicate.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol.dialects.base import Plan
from river_protocol.dialects.rows import Binder, job_row_from_sqlite, sqlite_job_columns
from river_protocol.golang.gotime import format_sqlite_time
from river_protocol.intents import Statement
from river_protocol.job import JobRow
from river_protocol.states import JobState

JOB_COLUMNS = sqlite_job_columns()

# errors as an array to append to: NULL, or a value of another type some other
# writer left (appending to it would silently do nothing), starts a new one.
ERRORS_ARRAY = "CASE WHEN json_type(errors) = 'array' THEN errors ELSE jsonb('[]') END"


# A LIMIT bound as a plain ``?`` is read at prepare time by SQLite >= 3.47 (to size the sort),
# which marks the statement to be prepared again whenever the bound value changes: a claim or an
# outbox poll with a new limit would re-prepare despite the statement cache. Unary plus makes the
# LIMIT an expression SQLite does not look into, so one prepared statement serves every limit.
LIMIT_PARAM = "+?"


def limit_param(b: Binder, limit: int) -> str:
    """Bind ``limit`` for a LIMIT clause: ``b.p`` spelled ``LIMIT_PARAM``, the text the same for any limit."""
    b.params.append(limit)
    return LIMIT_PARAM


def binder() -> Binder:
    return Binder("?")


_HALF_MS = timedelta(microseconds=500)


def sqlite_time(value: datetime | None) -> str | None:
    """``format_sqlite_time`` of ``value`` (None stays None)."""
    if value is None:
        return None
    if value.__class__ is datetime and value.tzinfo is UTC:
        # Every completion sends one; the general formatter's replace() costs a few times this.
        # Adding half a millisecond and truncating is its rounding; isoformat pads the year.
        try:
            return (value + _HALF_MS).isoformat(" ", "milliseconds")[:23]
        except OverflowError:
            pass
    return format_sqlite_time(value)


def job_rows(rows: list[tuple[Any, ...]]) -> list[JobRow]:
    return [job_row_from_sqlite(r) for r in rows]


def json_list(values: Any) -> str:
    return json.dumps(list(values))


def in_bitmask(alias: str = "") -> str:
    """``river_job_unique_idx``'s predicate, spelled as in the index so SQLite matches it."""
    q = f"{alias}." if alias else ""
    cases = " ".join(
        f"WHEN '{state.value}' THEN {q}unique_states & (1 << {bit})"
        for bit, state in enumerate(JobState)
    )
    return f"CASE {q}state {cases} ELSE 0 END >= 1"


def table_exists(d: Any, name: str) -> Plan[bool]:
    """Whether the table ``name`` exists in the dialect's schema (a python-line table may not)."""
    rows = yield Statement(
        f"SELECT EXISTS (SELECT 1 FROM {d.prefix}sqlite_master WHERE type = 'table' AND name = ?)", (name,))
    return bool(rows[0][0])
