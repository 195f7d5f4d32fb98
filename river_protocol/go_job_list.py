"""River Go's job list, reproduced: its ordering fields, its defaults and its cursor text.

``jobs.list`` (``river_protocol.admin``) is this client's own listing, with its
own opaque cursor. This module is River Go v0.43's ``JobListParams`` and
``JobListCursor`` instead, for callers that must page with a Go client's
cursors or hand theirs to a Go client (River's conformance adapter):

- ``order_by`` is ``id``, ``finalized_at``, ``scheduled_at`` or ``time``;
  ``time`` sorts by the column of the first listed state (``scheduled_at``
  for available, pending, retryable and scheduled, ``attempted_at`` for
  running, ``finalized_at`` for the finalized states); Go's default state
  list starts with ``available``;
- ordering by ``finalized_at`` lists the finalized states unless states are
  given, and refuses non-finalized ones;
- a NULL of the order column (``finalized_at`` of a retried job, listed with
  cancelled ones) sorts last ascending and first descending, on both
  databases;
- the cursor is Go's: URL-safe base64 (padded) of the JSON object
  ``{"id","kind","queue","sort_field","time"}`` written by Go's encoder, the
  time being the last job's value of the listing's order column (for
  ``time``, the first listed state's column, whatever the job's own state),
  or Go's zero time when that value is NULL or the listing is by id. A cursor
  is read with either base64 alphabet, padded or not, and with a null time.

River Go v0.43 differs in three ways that newer River (its Rust and
JavaScript ports, and its harness leaf List/CursorInterchange) changed, and
this module follows the newer River: v0.43 reads cursors with the standard
alphabet only (so it cannot read its own cursors holding ``-`` or ``_``),
takes a ``time`` cursor's value from the job's own state's column, and cannot
page past a NULL.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import encode_go_string
from river_protocol.golang.gotime import format_rfc3339nano, parse_time
from river_protocol.intents import JobListFilter, ListJobs
from river_protocol.job import JobRow
from river_protocol.states import JobState

GO_ORDER_FIELDS = ("id", "finalized_at", "scheduled_at", "time")
GO_LIST_LIMIT_MAX = 10_000
GO_ZERO_TIME = "0001-01-01T00:00:00Z"

_FINALIZED = (JobState.CANCELLED, JobState.COMPLETED, JobState.DISCARDED)
# Go's NewJobListParams: every state, available first.
_DEFAULT_STATES = (JobState.AVAILABLE, JobState.CANCELLED, JobState.COMPLETED, JobState.DISCARDED,
                   JobState.PENDING, JobState.RETRYABLE, JobState.RUNNING, JobState.SCHEDULED)
_TIME_COLUMN = {
    JobState.AVAILABLE: "scheduled_at", JobState.PENDING: "scheduled_at",
    JobState.RETRYABLE: "scheduled_at", JobState.SCHEDULED: "scheduled_at",
    JobState.RUNNING: "attempted_at",
    JobState.CANCELLED: "finalized_at", JobState.COMPLETED: "finalized_at",
    JobState.DISCARDED: "finalized_at",
}


def _order_column(order_by: str, states: tuple[JobState, ...] | None) -> str:
    # "time" is the column of the first listed state, for every job listed.
    return _TIME_COLUMN[(states or _DEFAULT_STATES)[0]] if order_by == "time" else order_by


def _states(states: Iterable[JobState | str] | None) -> tuple[JobState, ...] | None:
    if states is None:
        return None
    try:
        return tuple(JobState(str(state)) for state in states)
    except ValueError as exc:
        raise ValidationError(f"unknown job state: {exc}") from None


def go_list_jobs_intent(
    *,
    states: Iterable[JobState | str] | None = None,
    kinds: Iterable[str] | None = None,
    queues: Iterable[str] | None = None,
    ids: Iterable[int] | None = None,
    priorities: Iterable[int] | None = None,
    tags_all: Iterable[str] | None = None,
    metadata: bytes | None = None,
    order_by: str = "id",
    descending: bool = False,
    limit: int = 100,
    after: str | None = None,
) -> ListJobs:
    """The ``ListJobs`` River Go's ``JobList`` runs for these params (None: not set)."""
    if order_by not in GO_ORDER_FIELDS:
        raise ValidationError(f"invalid order by field {order_by!r}; use one of {', '.join(GO_ORDER_FIELDS)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= GO_LIST_LIMIT_MAX:
        raise ValidationError(f"count must be between 1 and {GO_LIST_LIMIT_MAX}, got {limit!r}")
    listed = _states(states)
    if order_by == "finalized_at":
        if listed is None:
            listed = _FINALIZED
        unfinalized = [state.value for state in listed if state not in _FINALIZED]
        if unfinalized:
            raise ValidationError(
                f"cannot order by finalized_at with non-finalized state filters {unfinalized}")
    column = _order_column(order_by, listed)
    if metadata is not None:
        try:
            fragment = json.loads(metadata)
        except ValueError as exc:
            raise ValidationError(f"the metadata filter is not JSON: {exc}") from None
        if not isinstance(fragment, dict):
            raise ValidationError("the metadata filter must be a JSON object")
    flt = JobListFilter(
        ids=None if ids is None else tuple(ids), kinds=None if kinds is None else tuple(kinds),
        queues=None if queues is None else tuple(queues), states=listed,
        priorities=None if priorities is None else tuple(priorities),
        tags_all=None if tags_all is None else tuple(tags_all), metadata_contains=metadata,
    )
    cursor = None if after is None else decode_go_job_list_cursor(after)
    return ListJobs(filter=flt, order_by=column, descending=descending, limit=limit, after=cursor,
                    go_keyset=True)


def _sort_value(job: JobRow, sort_field: str, states: tuple[JobState, ...] | None) -> datetime | None:
    if sort_field == "id":
        return None
    value: datetime | None = getattr(job, _order_column(sort_field, states))
    return value


def go_job_list_cursor(
    job: JobRow, sort_field: str, *, states: Iterable[JobState | str] | None = None
) -> str:
    """The text of Go's ``JobListCursor`` after ``job`` in a listing by ``sort_field`` of
    ``states`` (None: Go's default list; only ``time`` depends on it)."""
    if sort_field not in GO_ORDER_FIELDS:
        raise ValidationError(f"invalid order by field {sort_field!r}")
    moment = _sort_value(job, sort_field, _states(states) or None)
    time_text = GO_ZERO_TIME if moment is None else format_rfc3339nano(moment.astimezone(UTC))
    encoded = b"".join((
        b'{"id":', str(job.id).encode(), b',"kind":', encode_go_string(job.kind),
        b',"queue":', encode_go_string(job.queue), b',"sort_field":', encode_go_string(sort_field),
        b',"time":', encode_go_string(time_text), b"}",
    ))
    return base64.urlsafe_b64encode(encoded).decode()


def decode_go_job_list_cursor(text: str) -> tuple[datetime | None, int]:
    """``(sort value, id)`` of a Go cursor; the value is None for Go's zero time or a null
    time (a NULL sort value, or a listing by id)."""
    try:
        raw = text.strip().replace("+", "-").replace("/", "_")
        data: Any = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        job_id = data["id"]
        moment = data.get("time")
        if isinstance(job_id, bool) or not isinstance(job_id, int) or not isinstance(moment, str | None):
            raise TypeError("id must be an integer and time a string")
        value = None if moment is None or moment.startswith("0001-01-01T") else parse_time(moment)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ValidationError(f"invalid job list cursor {text!r}: {exc}") from None
    return value, job_id
