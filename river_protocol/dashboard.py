"""What an operator's dashboard reads, and the rules that turn it into figures.

The intents here are read-only and built to stay fast on a large ``river_job``
(a million rows): counts come from River's ``river_job_prioritized_fetching_index``
(state, queue, ...) and are exact up to ``exact_up_to`` per (queue, state), the
planner's row estimate above that (Postgres; SQLite counts exactly, its tables
are small by nature); throughput reads River's partial
``river_job_state_and_finalized_at_index``; the oldest available job is one
index probe per (queue, priority). The web layer (``river_ui``) only renders
what the functions below compute.

A *failure* in the chart is an attempt that ended in an error or a discard:
a job now ``discarded`` counts in the bucket of its ``finalized_at``, a job now
``retryable`` in the bucket of its ``attempted_at`` (its failed attempt).
``cancelled`` is an operator's decision, not a failure: it is shown apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.intents import Intent, LeaderRow, QueueRow
from river_protocol.job import JobRow
from river_protocol.metadata_keys import PERIODIC, PERIODIC_JOB_ID
from river_protocol.states import JobState

# Above this many rows in one (queue, state) the count is the planner's estimate.
EXACT_COUNT_LIMIT = 1000
# The states a queue's row lists, in lifecycle order (reads better than alphabetical).
STATE_ORDER: tuple[JobState, ...] = (
    JobState.AVAILABLE,
    JobState.RUNNING,
    JobState.SCHEDULED,
    JobState.RETRYABLE,
    JobState.PENDING,
    JobState.COMPLETED,
    JobState.CANCELLED,
    JobState.DISCARDED,
)
# States whose jobs are placed in the chart by ``finalized_at`` / by ``attempted_at``.
HISTOGRAM_FINALIZED = (JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED)
HISTOGRAM_ATTEMPTED = (JobState.RETRYABLE,)
# (the time column placing a job in a bucket, the states placed by it): one SELECT each, UNION ALL.
HISTOGRAM_PARTS: tuple[tuple[str, tuple[JobState, ...]], ...] = (
    ("finalized_at", HISTOGRAM_FINALIZED),
    ("attempted_at", HISTOGRAM_ATTEMPTED),
)
SERIES = ("completed", "failed", "cancelled")
_SERIES_OF = {
    JobState.COMPLETED: "completed",
    JobState.DISCARDED: "failed",
    JobState.RETRYABLE: "failed",
    JobState.CANCELLED: "cancelled",
}


# ---------------------------------------------------------------- intents


@dataclass(frozen=True, slots=True)
class QueueStateCount:
    queue: str
    state: JobState
    count: int
    estimated: bool = False  # the planner's estimate, not a count (above ``exact_up_to``)
    # The estimate was below what was counted (stale statistics): ``count`` is only a floor.
    at_least: bool = False


@dataclass(frozen=True, slots=True)
class CountJobsByQueue(Intent):
    """Result: ``tuple[QueueStateCount, ...]``, one per (queue, state) holding jobs."""

    exact_up_to: int = EXACT_COUNT_LIMIT


@dataclass(frozen=True, slots=True)
class OldestAvailable(Intent):
    """Result: ``dict[queue, scheduled_at]`` of the earliest available job in each queue that has one."""

    queues: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HistogramCell:
    queue: str
    state: JobState
    bucket: int  # 0 = the bucket starting at ``since``
    count: int


@dataclass(frozen=True, slots=True)
class FinishedHistogram(Intent):
    """Result: ``tuple[HistogramCell, ...]``: jobs finished (or failed an attempt) per bucket and queue,
    for buckets of ``bucket`` from ``since`` (the client's clock) for ``buckets`` buckets."""

    since: datetime
    bucket: timedelta
    buckets: int


@dataclass(frozen=True, slots=True)
class PeriodicJobsSeen(Intent):
    """Result: ``list[JobRow]``, the newest ``limit`` jobs a periodic enqueuer inserted, newest first."""

    limit: int = 500


@dataclass(frozen=True, slots=True)
class RunningClients(Intent):
    """Result: ``dict[client_id, running jobs]``: who works the running jobs now, by each job's
    last ``attempted_by`` entry (River's schema records no producers; this is what the jobs
    say), over at most ``limit`` running jobs."""

    limit: int = 10_000


def histogram_cells(rows: Iterable[Sequence[Any]]) -> tuple[HistogramCell, ...]:
    """``FinishedHistogram``'s result from its rows: (queue, state, bucket, count)."""
    return tuple(HistogramCell(str(r[0]), JobState(r[1]), int(r[2]), int(r[3])) for r in rows)


def histogram_intent(
    now: datetime, *, span: timedelta = timedelta(hours=1), buckets: int = 30
) -> FinishedHistogram:
    """The chart's intent: ``span`` up to ``now`` in ``buckets`` equal buckets."""
    if now.tzinfo is None:
        raise ValidationError(f"now must be timezone-aware, got {now!r}")
    if buckets < 1 or span <= timedelta(0):
        raise ValidationError(f"a histogram needs a positive span and bucket count, got {span}, {buckets}")
    return FinishedHistogram(since=now - span, bucket=span / buckets, buckets=buckets)


def count_intent(exact_up_to: int = EXACT_COUNT_LIMIT) -> CountJobsByQueue:
    if isinstance(exact_up_to, bool) or not isinstance(exact_up_to, int) or exact_up_to < 1:
        raise ValidationError(f"exact_up_to must be a positive integer, got {exact_up_to!r}")
    return CountJobsByQueue(exact_up_to=exact_up_to)


# ---------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True)
class StateCount:
    count: int
    estimated: bool = False
    at_least: bool = False  # more than ``count - 1``; the statistics could not say how many


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """One queue's line on the overview."""

    name: str
    states: dict[JobState, StateCount]
    paused_at: datetime | None = None
    updated_at: datetime | None = None
    registered: bool = False  # has a river_queue row (a client has worked it)
    oldest_available_age: timedelta | None = None
    # series name ("completed", "failed", "cancelled") -> one count per bucket
    series: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    @property
    def total(self) -> StateCount:
        counts = self.states.values()
        return StateCount(sum(c.count for c in counts), any(c.estimated for c in counts))


def queue_overviews(
    *,
    queues: Iterable[QueueRow],
    counts: Iterable[QueueStateCount],
    oldest: Mapping[str, datetime],
    cells: Iterable[HistogramCell],
    buckets: int,
    now: datetime,
) -> list[QueueOverview]:
    """Every queue known from ``river_queue`` or from its jobs, by name, with its figures."""
    rows = {q.name: q for q in queues}
    states: dict[str, dict[JobState, StateCount]] = {}
    for c in counts:
        states.setdefault(c.queue, {})[c.state] = StateCount(c.count, c.estimated, c.at_least)
    series: dict[str, dict[str, list[int]]] = {}
    for cell in cells:
        name = _SERIES_OF.get(cell.state)
        if name is None or not 0 <= cell.bucket < buckets:
            continue
        per_queue = series.setdefault(cell.queue, {s: [0] * buckets for s in SERIES})
        per_queue[name][cell.bucket] += cell.count
    out = []
    for name in sorted(set(rows) | set(states) | set(series)):
        row = rows.get(name)
        found = states.get(name, {})
        oldest_at = oldest.get(name)
        out.append(
            QueueOverview(
                name=name,
                states={s: found.get(s, StateCount(0)) for s in STATE_ORDER},
                paused_at=row.paused_at if row else None,
                updated_at=row.updated_at if row else None,
                registered=row is not None,
                oldest_available_age=None if oldest_at is None else waited(oldest_at, now),
                series={s: tuple(v) for s, v in series.get(name, {s: [0] * buckets for s in SERIES}).items()},
            )
        )
    return out


def waited(scheduled_at: datetime, now: datetime) -> timedelta:
    """How long an available job scheduled at ``scheduled_at`` has waited by ``now``: never
    negative (a clock behind the database's reads a job scheduled a moment ago as not yet due)."""
    return max(now - scheduled_at, timedelta(0))


def live_leader(leader: LeaderRow | None, now: datetime) -> LeaderRow | None:
    """The leader the overview shows: none once its ``expires_at`` has passed (its client has
    stopped re-electing itself, and the next election removes the row)."""
    return leader if leader is not None and leader.expires_at > now else None


def available_queues(counts: Iterable[QueueStateCount]) -> tuple[str, ...]:
    """The queues holding available jobs (where an oldest available job exists)."""
    return tuple(sorted({c.queue for c in counts if c.state is JobState.AVAILABLE and c.count > 0}))


@dataclass(frozen=True, slots=True)
class PeriodicSeen:
    """A periodic job as its inserted jobs show it."""

    periodic_id: str  # River's periodic job ID, or the kind when the job had none
    kind: str
    queue: str
    last_run: datetime | None  # the newest inserted job's scheduled_at that is not in the future
    next_run: datetime | None  # a job of it scheduled after ``now``, if one was inserted ahead
    last_state: JobState | None
    last_job_id: int | None
    seen: int  # how many of the examined jobs it inserted


def periodic_seen(jobs: Iterable[JobRow], now: datetime) -> list[PeriodicSeen]:
    """Group periodic jobs (newest first) by periodic ID (else kind), with their last and next runs."""
    groups: dict[str, list[JobRow]] = {}
    for job in jobs:
        if job.metadata.get(PERIODIC) is not True:
            continue
        ident = job.metadata.get(PERIODIC_JOB_ID)
        key = ident if isinstance(ident, str) and ident else job.kind
        groups.setdefault(key, []).append(job)
    out = []
    for key, members in groups.items():
        past = [j for j in members if j.scheduled_at is None or j.scheduled_at <= now]
        ahead = [j.scheduled_at for j in members if j.scheduled_at is not None and j.scheduled_at > now]
        last = max(past, key=lambda j: (j.scheduled_at or now, j.id), default=None)
        newest = members[0]
        out.append(
            PeriodicSeen(
                periodic_id=key,
                kind=newest.kind,
                queue=newest.queue,
                last_run=None if last is None else last.scheduled_at,
                next_run=min(ahead, default=None),
                last_state=None if last is None else last.state,
                last_job_id=None if last is None else last.id,
                seen=len(members),
            )
        )
    return sorted(out, key=lambda p: p.periodic_id)


def action_outcome(action: str, row: JobRow) -> str | None:
    """Why ``action`` (retry, cancel, delete) left the job it returned as it was, or None when it
    took effect. The management API returns a job it could not change unchanged rather than
    failing: a running job is not retried, a finished one not cancelled."""
    if action == "retry" and row.state is not JobState.AVAILABLE:
        return f"job {row.id} is {row.state.value}: not retried"
    if action == "cancel" and row.state is JobState.RUNNING:
        return None  # asked to stop: its client cancels it (River's remote cancel)
    if action == "cancel" and row.state is not JobState.CANCELLED:
        return f"job {row.id} is {row.state.value}: not cancelled"
    return None


def pretty_json(value: object) -> str:
    """JSON for a person, indented, keys in stored order. ``bytes`` are stored JSON (shown as
    text when they are not JSON); anything else is a decoded value (a ``str`` is a JSON string)."""
    if isinstance(value, bytes):
        try:
            decoded: object = json.loads(value)
        except ValueError:
            return value.decode(errors="replace")
        value = decoded
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
