"""Rules behind the client's management API (``client.jobs`` / ``client.queues``), §13-§14.

Drivers run the intents built here, in the order given and in ONE transaction
(the caller's when it passes one), and then apply the local-delivery rule:

- cancel: ``CancelJob``; on Postgres the statement itself notifies
  ``river_control``, SQLite sends nothing (as Go). After a cancel outside a
  caller's transaction the driver also hands the cancel to its own producers
  in-process (``local_control``), the way Go's clients without a listener do,
  so a job running in this very client stops at once whatever the database.
- pause / resume: ``PauseQueue``/``ResumeQueue`` + ``Notify(river_control)``.
  Outside a caller's transaction the driver also hands them to its own
  producers and waits until each has acknowledged (``ControlMessage.ack``: no
  claim that started before it still in flight), so when ``pause()`` returns
  this client fetches nothing more from the queue, on either database; the
  notification coming back later changes nothing. Other clients keep River's
  timing: the next notification, or their settings poll.
- queue update: ``UpdateQueue`` + ``Notify(metadata_changed)`` when metadata
  is given (even if equal).
- Metadata changes are delivered locally only when the client does not listen
  (poll-only): with a listener the notification comes back anyway and a
  second copy would duplicate the metadata-changed event.

Nothing is delivered locally inside a caller's transaction: it may still roll
back (Go: "should only ever be invoked outside a transaction").
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from river_protocol.errors import QueueNotFoundError, ReservedMetadataKeyError, ValidationError
from river_protocol.golang.encoding_json import RawJSON, encode
from river_protocol.golang.gotime import format_rfc3339nano, parse_time
from river_protocol.intents import (
    CancelJob,
    Intent,
    JobListFilter,
    ListJobs,
    ListQueues,
    Notify,
    PauseQueue,
    QueueRow,
    ResumeQueue,
    UpdateJobMetadata,
    UpdateQueue,
)
from river_protocol.job import JobRow
from river_protocol.machines.notifications import (
    ACTION_CANCEL,
    ACTION_PAUSE,
    ACTION_RESUME,
    TOPIC_CONTROL,
    build_cancel,
    build_metadata_changed,
    build_pause,
    build_resume,
    parse_control,
)
from river_protocol.metadata_keys import RIVER_PREFIX, is_river_key
from river_protocol.outcomes import cancel_attempted_at_json, record_output
from river_protocol.rawjson import object_members
from river_protocol.states import JobState

ORDER_COLUMNS = ("id", "scheduled_at", "finalized_at", "created_at")
# What must hold in this client the moment the call returns, whatever the notification latency.
_ALWAYS_LOCAL = frozenset({ACTION_CANCEL, ACTION_PAUSE, ACTION_RESUME})
LIST_LIMIT_DEFAULT = 100
LIST_LIMIT_MAX = 10_000


class JobRunningError(ValidationError):
    """The job is running and can't be deleted (Go's ``ErrJobRunning``)."""


class QueueAlreadyAddedError(ValidationError):
    """``queues.add`` for a queue this client already works (Go's ``QueueAlreadyAddedError``)."""


class QueueNotAddedError(ValidationError):
    """``queues.remove`` for a queue this client doesn't work."""


# ---------------------------------------------------------------- job listing


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of ``jobs.list``; pass ``next_cursor`` as ``after=`` for the next (None: last page)."""

    jobs: tuple[JobRow, ...]
    next_cursor: str | None


def _tuple(name: str, values: Iterable[Any] | None) -> tuple[Any, ...] | None:
    if values is None:
        return None
    if isinstance(values, str | bytes):
        raise ValidationError(f"{name} must be a list or tuple, not a single string")
    return tuple(values)


def _states(values: Iterable[JobState | str] | None) -> tuple[JobState, ...] | None:
    items = _tuple("states", values)
    if items is None:
        return None
    out: list[JobState] = []
    for item in items:
        try:
            out.append(item if isinstance(item, JobState) else JobState(item))
        except ValueError:
            known = ", ".join(s.value for s in JobState)
            raise ValidationError(f"unknown job state {item!r}; known states: {known}") from None
    return tuple(out)


def encode_job_cursor(job: JobRow, order_by: str, descending: bool) -> str:
    """An opaque cursor continuing a listing after ``job``."""
    value = getattr(job, order_by) if order_by != "id" else None
    text = None if value is None else format_rfc3339nano(value)
    raw = json.dumps({"o": order_by, "d": descending, "v": text, "id": job.id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_job_cursor(token: str, order_by: str, descending: bool) -> tuple[Any, int]:
    """``(order value, id)`` of a cursor; it must come from a listing with the same ordering."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        job_id = int(data["id"])
        value = None if data["v"] is None else parse_time(str(data["v"]))
        made_for = (str(data["o"]), bool(data["d"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValidationError(
            f"invalid job list cursor {token!r}: pass a next_cursor from jobs.list"
        ) from exc
    if made_for != (order_by, descending):
        raise ValidationError(
            f"the cursor belongs to a listing ordered by {made_for[0]} (descending={made_for[1]}); "
            "list with the same order_by and descending"
        )
    return value, job_id


def list_jobs_intent(
    *,
    states: Iterable[JobState | str] | None = None,
    kinds: Iterable[str] | None = None,
    queues: Iterable[str] | None = None,
    ids: Iterable[int] | None = None,
    priorities: Iterable[int] | None = None,
    tags_any: Iterable[str] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    order_by: str = "id",
    descending: bool = False,
    limit: int = LIST_LIMIT_DEFAULT,
    after: str | None = None,
) -> ListJobs:
    """The ``ListJobs`` for ``jobs.list`` arguments, validated."""
    if order_by not in ORDER_COLUMNS:
        raise ValidationError(f"cannot order jobs by {order_by!r}; use one of {', '.join(ORDER_COLUMNS)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValidationError(f"limit must be an integer from 1 to {LIST_LIMIT_MAX}, got {limit!r}")
    for name, moment in (("created_after", created_after), ("created_before", created_before)):
        if moment is not None and moment.tzinfo is None:
            raise ValidationError(f"{name} must be timezone-aware, got {moment!r}")
    flt = JobListFilter(
        ids=_tuple("ids", ids), kinds=_tuple("kinds", kinds), queues=_tuple("queues", queues),
        states=_states(states), priorities=_tuple("priorities", priorities),
        tags_any=_tuple("tags_any", tags_any), created_after=created_after, created_before=created_before,
    )
    cursor = None if after is None else decode_job_cursor(after, order_by, descending)
    return ListJobs(filter=flt, order_by=order_by, descending=descending, limit=limit, after=cursor)


def job_page(intent: ListJobs, jobs: Iterable[JobRow]) -> JobPage:
    """The page for ``intent``'s result; a full page has a cursor (the next may be empty)."""
    rows = tuple(jobs)
    full = len(rows) == intent.limit and rows
    cursor = encode_job_cursor(rows[-1], intent.order_by, intent.descending) if full else None
    return JobPage(rows, cursor)


def count_by_state(counts: Mapping[tuple[JobState, str, str], int]) -> dict[JobState, int]:
    """``CountJobs`` rows summed per state, every state present (zero when none)."""
    out = dict.fromkeys(JobState, 0)
    for (state, _queue, _kind), n in counts.items():
        out[state] += n
    return out


def count_by_queue_and_state(
    counts: Mapping[tuple[JobState, str, str], int],
) -> dict[tuple[str, JobState], int]:
    """``CountJobs`` rows summed per (queue, state), every state present for each queue seen."""
    out: dict[tuple[str, JobState], int] = {}
    for queue in sorted({queue for _state, queue, _kind in counts}):
        out.update(dict.fromkeys(((queue, state) for state in JobState), 0))
    for (state, queue, _kind), n in counts.items():
        out[(queue, state)] += n
    return out


# ---------------------------------------------------------------- job changes


def cancel_intent(job_id: int, now: datetime) -> CancelJob:
    """Cancel ``job_id`` (§14.1); ``now`` is the client's clock, stored as ``cancel_attempted_at``."""
    return CancelJob(id=_job_id(job_id), cancel_attempted_at=cancel_attempted_at_json(now))


def local_cancel_payload(job: JobRow) -> str | None:
    """The control payload to hand to this client's own producers after a cancel, if any."""
    return build_cancel(job.id, job.queue) if job.state is JobState.RUNNING else None


def update_output_intent(job_id: int, output: Any) -> UpdateJobMetadata:
    """Merge ``{"output": output}`` into the job's metadata (§14.4; ≤ 32 MB encoded)."""
    return UpdateJobMetadata(id=_job_id(job_id), metadata_updates=encode(record_output(output)))


def _job_id(job_id: Any) -> int:
    if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id < 1:
        raise ValidationError(f"job id must be a positive integer, got {job_id!r}")
    return job_id


# ---------------------------------------------------------------- queues


def _queue_target(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ValidationError(f"queue name must be a non-empty string (or '*' for all), got {name!r}")
    return name


def pause_intents(name: str, *, pause: bool) -> tuple[Intent, ...]:
    """Pause (or resume) ``name`` (``*`` = every queue) and announce it, in one transaction."""
    target = _queue_target(name)
    change: Intent = PauseQueue(target) if pause else ResumeQueue(target)
    payload = build_pause(target) if pause else build_resume(target)
    return change, Notify(TOPIC_CONTROL, (payload,))


def encode_queue_metadata(metadata: Any) -> bytes:
    """Queue metadata as stored: a JSON object given as a mapping, JSON text or bytes."""
    if isinstance(metadata, str | bytes):
        raw = metadata.encode() if isinstance(metadata, str) else metadata
        try:
            value = json.loads(raw)
        except ValueError:
            raise ValidationError(f"queue metadata is not valid JSON: {raw[:80]!r}") from None
        if not isinstance(value, dict):
            raise ValidationError(f"queue metadata must be a JSON object, got {type(value).__name__}")
        return encode(RawJSON(raw))
    if not isinstance(metadata, Mapping):
        raise ValidationError(
            f"queue metadata must be a mapping or JSON object text, got {type(metadata).__name__}"
        )
    return encode(dict(metadata))


def refuse_river_keys(data: bytes) -> None:
    """Raise ``ReservedMetadataKeyError`` if the JSON object ``data`` has a top-level ``river:`` key."""
    members = object_members(data) or []
    keys = tuple(key.decode("utf-8", "replace") for key, _ in members)
    reserved = tuple(key for key in keys if is_river_key(key))
    if reserved:
        raise ReservedMetadataKeyError(
            f"queue metadata keys {list(reserved)} are River's (keys under {RIVER_PREFIX!r} are "
            "reserved): choose other names",
            keys=reserved,
        )


def update_queue_intents(name: str, metadata: Any = None) -> tuple[Intent, ...]:
    """Update ``name``; with metadata, replace it and announce ``metadata_changed`` (§13.3).

    The user's metadata may hold no ``river:`` key, and the ``river:`` keys stored on the queue
    are kept through the replacement: they are River's (River Pro keeps queue settings there).
    """
    if name == "*" or not isinstance(name, str) or not name:
        raise ValidationError(f"queue update needs one queue name, got {name!r}")
    if metadata is None:
        return (UpdateQueue(name),)
    data = encode_queue_metadata(metadata)
    refuse_river_keys(data)
    return UpdateQueue(name, data), Notify(TOPIC_CONTROL, (build_metadata_changed(name, data),))


def deliver_control_locally(payload: str, *, in_caller_tx: bool, listening: bool) -> bool:
    """Whether the driver hands a control message to its own producers in-process (see module doc)."""
    if in_caller_tx:
        return False
    control = parse_control(payload)
    if control is None:
        return False
    return control.action in _ALWAYS_LOCAL or not listening


def control_payloads(intents: Iterable[Intent]) -> tuple[str, ...]:
    """The control messages among ``intents``, which the driver also delivers in-process."""
    return tuple(p for intent in intents if isinstance(intent, Notify) for p in intent.payloads)


def delete_refusal(exc: ValidationError) -> ValidationError:
    """The error to raise when a delete was refused: ``JobRunningError`` when the job is running."""
    if isinstance(exc, JobRunningError) or "running" not in str(exc):
        return exc
    return JobRunningError(str(exc))


def list_queues_intent(limit: int, after: str | None) -> ListQueues:
    """One page of queue records ordered by name; ``after`` is the previous page's last name."""
    if not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValidationError(f"limit must be from 1 to {LIST_LIMIT_MAX}, got {limit}")
    return ListQueues(limit=limit, after_name=after)


def found_queue(name: str, row: QueueRow | None) -> QueueRow:
    """``row``, or ``QueueNotFoundError`` when no queue ``name`` exists."""
    if row is None:
        raise QueueNotFoundError(f"queue {name!r} not found")
    return row
