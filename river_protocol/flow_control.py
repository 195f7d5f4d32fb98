"""Flow control: concurrency limits, rate limits and sequences (docs/guides/flow-control.md).

The settings a client configures per queue, and the rule deciding which available jobs a
limited claim may start. The rule is written twice on purpose: ``choose_claims`` below is
the pure statement of it (the hypothesis model and the dialect property tests check it),
and each dialect renders the same rule as SQL (``dialects/*/flow.py``), where it runs
inside one serialised claim so that it holds across every process on the database.

The rule, for one claim of ``limit`` jobs of a queue at time ``now``:

1. *Counts.* Jobs ``running`` in the queue are grouped by their concurrency partition key:
   ``n`` running anywhere, ``mine`` running for this client (the last ``attempted_by``).
   Starts recorded in the last ``rate_period`` (``started_at > now - rate_period``) are
   grouped by their rate partition key.
2. *Candidates.* Available jobs of the queue due by ``now`` (claim order: priority,
   scheduled_at, id), leaving out those whose concurrency partition is full
   (``n >= global_limit`` or ``mine >= local_limit``), whose rate partition is full, and
   (with sequences) those behind an unfinished earlier job of their sequence. The first
   ``scan`` of them are considered; a full partition therefore never hides other
   partitions' jobs behind it.
3. *Ranks.* Among the candidates, each one's rank in its concurrency partition (``crn``,
   1-based, claim order) and in its rate partition (``rrn``).
4. *Choice.* A candidate is taken when ``n + crn <= global_limit``, ``mine + crn <=
   local_limit`` and ``starts + rrn <= rate_allowed``; the first ``limit`` taken, in claim
   order, are claimed. A missing limit is no constraint.

A candidate's ranks depend only on the candidates ahead of it, so when the first
``min(limit, scan)`` due jobs all fit their partitions' limits, they are the answer
(``fast_claims``, checked against ``choose_claims`` by hypothesis). The dialects try that
first, counting only those jobs' partitions (the usual case while limits do not bind: no more
candidates read than the plain claim reads), and rank the full scan only when it fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.states import JobState

# Job metadata keys (this project's prefix; River's and River Pro's own keys are untouched).
SEQUENCE_KEY = "river_py:sequence"
SEQUENCE_HALT = "river_py:sequence_halt"

# A claim considers at most this many candidates per slot it asks for (and at least
# SCAN_MIN): enough that partitions with room are found behind ones that fill up in this claim.
SCAN_FACTOR = 4
SCAN_MIN = 100
SCAN_MAX = 20_000

# Start records are kept this long at least (longer when the period is): only the window is
# counted, the rest shows recent history and covers a period raised at runtime.
START_RETENTION = timedelta(minutes=1)


def start_retention(period: timedelta) -> timedelta:
    """How far back a claim keeps ``river_py_job_start`` records (older ones it deletes)."""
    return max(period, START_RETENTION)


# States in which an earlier job of a sequence holds back the jobs behind it.
SEQUENCE_WAIT_STATES: tuple[JobState, ...] = (
    JobState.AVAILABLE, JobState.PENDING, JobState.RETRYABLE, JobState.RUNNING, JobState.SCHEDULED,
)
_HALTABLE = (JobState.CANCELLED.value, JobState.DISCARDED.value)


def _positive(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a positive integer or None, got {value!r}")


def _arg_names(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValidationError(f"{name} must be a list of argument names, got {value!r}")
    names = tuple(value)
    for arg in names:
        if not isinstance(arg, str) or not arg:
            raise ValidationError(f"{name} must hold non-empty argument names, got {arg!r}")
        if "'" in arg or '"' in arg or "\\" in arg:
            raise ValidationError(f"{name}: argument name {arg!r} may not contain quotes or backslashes")
    if len(set(names)) != len(names):
        raise ValidationError(f"{name} names an argument twice: {list(names)}")
    return names


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    """What splits a queue into partitions with a limit each: the job's kind and/or the values
    of top-level args members. Neither (the default) makes the whole queue one partition."""

    by_kind: bool = False
    by_args: Sequence[str] = ()  # kept as a tuple

    def __post_init__(self) -> None:
        if not isinstance(self.by_kind, bool):
            raise ValidationError(f"by_kind must be a bool, got {self.by_kind!r}")
        object.__setattr__(self, "by_args", _arg_names("by_args", self.by_args))

    def key(self, kind: str, args: Mapping[str, Any]) -> tuple[Any, ...]:
        """The partition of a job: equal keys share a limit. JSON of each named member (a
        missing member is null), so ``1`` and ``"1"`` are different partitions."""
        head: tuple[Any, ...] = (kind,) if self.by_kind else ()
        return head + tuple(json.dumps(args.get(a), sort_keys=True) for a in self.by_args)

    def as_json(self) -> dict[str, Any]:
        return {"by_kind": self.by_kind, "by_args": list(self.by_args)}


@dataclass(frozen=True, slots=True)
class ConcurrencyConfig:
    """At most ``global_limit`` jobs of a partition running at once across every client on the
    database, and at most ``local_limit`` in this client (River Pro's ``ConcurrencyConfig``)."""

    global_limit: int | None = None
    local_limit: int | None = None
    partition: PartitionConfig = field(default_factory=PartitionConfig)

    def __post_init__(self) -> None:
        _positive("global_limit", self.global_limit)
        _positive("local_limit", self.local_limit)
        if self.global_limit is None and self.local_limit is None:
            raise ValidationError("ConcurrencyConfig needs a global_limit, a local_limit or both")
        if not isinstance(self.partition, PartitionConfig):
            raise ValidationError(f"partition must be a PartitionConfig, got {self.partition!r}")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``allowed`` starts per partition in any window of ``period``, across every
    client: a sliding window over recorded start times; every attempt (a retry too) is a start."""

    allowed: int
    period: timedelta
    partition: PartitionConfig = field(default_factory=PartitionConfig)

    def __post_init__(self) -> None:
        _positive("allowed", self.allowed)
        if self.allowed is None:
            raise ValidationError("RateLimit.allowed is required")
        if not isinstance(self.period, timedelta) or self.period < timedelta(milliseconds=1):
            raise ValidationError(
                f"RateLimit.period must be a timedelta of at least 1 ms, got {self.period!r}")
        if self.period % timedelta(milliseconds=1):
            raise ValidationError(f"RateLimit.period must be whole milliseconds, got {self.period!r}")
        if not isinstance(self.partition, PartitionConfig):
            raise ValidationError(f"partition must be a PartitionConfig, got {self.partition!r}")


@dataclass(frozen=True, slots=True)
class SequenceOpts:
    """Jobs with the same sequence key (the kind, plus the ``by_args`` members) in the same
    queue run one at a time, in insert order. A job still to be retried holds the sequence;
    one discarded or cancelled lets it go on unless ``continue_on_discarded`` /
    ``continue_on_cancelled`` is False (then it waits until that job is retried or deleted)."""

    by_args: Sequence[str] = ()  # kept as a tuple
    continue_on_discarded: bool = True
    continue_on_cancelled: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_args", _arg_names("by_args", self.by_args))
        for name in ("continue_on_discarded", "continue_on_cancelled"):
            if not isinstance(getattr(self, name), bool):
                raise ValidationError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def key(self, kind: str, args: Mapping[str, Any]) -> str:
        members = {a: args.get(a) for a in self.by_args}
        return json.dumps([kind, members], sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def metadata(self, kind: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """The metadata entries that put a job in its sequence."""
        out: dict[str, Any] = {SEQUENCE_KEY: self.key(kind, args)}
        halt = [s for s, go_on in zip(_HALTABLE, (self.continue_on_cancelled, self.continue_on_discarded),
                                       strict=True) if not go_on]
        if halt:
            out[SEQUENCE_HALT] = halt
        return out


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """The limit numbers as stored in ``river_py_queue_limit`` and read by every claim."""

    global_limit: int | None = None
    local_limit: int | None = None
    rate_allowed: int | None = None
    rate_period: timedelta | None = None

    def __post_init__(self) -> None:
        _positive("global_limit", self.global_limit)
        _positive("local_limit", self.local_limit)
        _positive("rate_allowed", self.rate_allowed)
        if (self.rate_allowed is None) != (self.rate_period is None):
            raise ValidationError("rate_allowed and rate_period are set together or not at all")
        if self.rate_period is not None and self.rate_period < timedelta(milliseconds=1):
            raise ValidationError(f"rate_period must be at least 1 ms, got {self.rate_period!r}")

    @property
    def rate_period_ms(self) -> int | None:
        return None if self.rate_period is None else self.rate_period // timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class FlowControl:
    """One queue's flow control as a client configures it: what its claims render."""

    concurrency: ConcurrencyConfig | None = None
    rate_limit: RateLimit | None = None
    sequences: bool = False

    @property
    def enabled(self) -> bool:
        return self.concurrency is not None or self.rate_limit is not None or self.sequences

    @property
    def limits(self) -> QueueLimits:
        c, r = self.concurrency, self.rate_limit
        return QueueLimits(
            global_limit=c.global_limit if c else None,
            local_limit=c.local_limit if c else None,
            rate_allowed=r.allowed if r else None,
            rate_period=r.period if r else None,
        )

    @property
    def concurrency_partition(self) -> PartitionConfig:
        return self.concurrency.partition if self.concurrency else PartitionConfig()

    @property
    def rate_partition(self) -> PartitionConfig:
        return self.rate_limit.partition if self.rate_limit else PartitionConfig()


def scan_size(limit: int) -> int:
    """How many candidates a claim for ``limit`` jobs considers (see the module's rule, step 2)."""
    return min(max(limit * SCAN_FACTOR, SCAN_MIN), SCAN_MAX)


# ---------------------------------------------------------------- the rule, as a pure function


@dataclass(frozen=True, slots=True)
class FlowJob:
    """What the rule reads of one job of the queue."""

    id: int
    kind: str
    state: JobState
    args: Mapping[str, Any] = field(default_factory=dict)
    priority: int = 1
    scheduled_at: datetime | None = None
    last_attempted_by: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _sequence_blocked(job: FlowJob, jobs: Sequence[FlowJob]) -> bool:
    key = job.metadata.get(SEQUENCE_KEY)
    if key is None:
        return False
    halt = job.metadata.get(SEQUENCE_HALT) or ()
    for other in jobs:
        if other.id >= job.id or other.metadata.get(SEQUENCE_KEY) != key:
            continue
        if other.state in SEQUENCE_WAIT_STATES or other.state.value in halt:
            return True
    return False


def _running(jobs: Sequence[FlowJob], cpart: PartitionConfig, client_id: str
             ) -> tuple[dict[tuple[Any, ...], int], dict[tuple[Any, ...], int]]:
    """Rule step 1: running jobs per concurrency partition, anywhere and for ``client_id``."""
    running: dict[tuple[Any, ...], int] = {}
    mine: dict[tuple[Any, ...], int] = {}
    for job in jobs:
        if job.state is JobState.RUNNING:
            k = cpart.key(job.kind, job.args)
            running[k] = running.get(k, 0) + 1
            if job.last_attempted_by == client_id:
                mine[k] = mine.get(k, 0) + 1
    return running, mine


def _due(jobs: Sequence[FlowJob], flow: FlowControl, now: datetime) -> list[FlowJob]:
    """Available jobs due by ``now`` in claim order, those behind their sequence left out."""
    due = [j for j in jobs if j.state is JobState.AVAILABLE
           and (j.scheduled_at is None or j.scheduled_at <= now)]
    due.sort(key=lambda j: (j.priority, j.scheduled_at or now, j.id))
    return [j for j in due if not (flow.sequences and _sequence_blocked(j, jobs))]


def choose_claims(
    *,
    jobs: Sequence[FlowJob],
    flow: FlowControl,
    limits: QueueLimits,
    client_id: str,
    limit: int,
    now: datetime,
    recent_starts: Mapping[tuple[Any, ...], int] | None = None,
) -> list[int]:
    """The ids a limited claim takes from ``jobs`` (every job of the queue), in claim order.

    ``recent_starts``: starts per rate partition key in ``(now - rate_period, now]``.
    """
    if limit <= 0:
        return []
    cpart, rpart = flow.concurrency_partition, flow.rate_partition
    running, mine = _running(jobs, cpart, client_id)
    starts = dict(recent_starts or {})
    rate_on = limits.rate_allowed is not None

    def full(job: FlowJob) -> bool:
        k = cpart.key(job.kind, job.args)
        if limits.global_limit is not None and running.get(k, 0) >= limits.global_limit:
            return True
        if limits.local_limit is not None and mine.get(k, 0) >= limits.local_limit:
            return True
        return (rate_on and limits.rate_allowed is not None
                and starts.get(rpart.key(job.kind, job.args), 0) >= limits.rate_allowed)

    candidates = [j for j in _due(jobs, flow, now) if not full(j)]
    candidates = candidates[:scan_size(limit)]

    crn: dict[tuple[Any, ...], int] = {}
    rrn: dict[tuple[Any, ...], int] = {}
    chosen: list[int] = []
    for job in candidates:
        ck, rk = cpart.key(job.kind, job.args), rpart.key(job.kind, job.args)
        crn[ck] = crn.get(ck, 0) + 1
        rrn[rk] = rrn.get(rk, 0) + 1
        if limits.global_limit is not None and running.get(ck, 0) + crn[ck] > limits.global_limit:
            continue
        if limits.local_limit is not None and mine.get(ck, 0) + crn[ck] > limits.local_limit:
            continue
        if limits.rate_allowed is not None and starts.get(rk, 0) + rrn[rk] > limits.rate_allowed:
            continue
        chosen.append(job.id)
        if len(chosen) == limit:
            break
    return chosen


def fast_claims(
    *,
    jobs: Sequence[FlowJob],
    flow: FlowControl,
    limits: QueueLimits,
    client_id: str,
    limit: int,
    now: datetime,
    recent_starts: Mapping[tuple[Any, ...], int] | None = None,
) -> list[int] | None:
    """The dialects' shortcut to ``choose_claims`` (the module docstring's last paragraph), as
    their fast path computes it: the first ``min(limit, scan_size(limit))`` due jobs in claim
    order (sequence heads only, full partitions not left out) when, in each of their
    partitions, their count plus the running jobs (and recent starts) is within every limit.
    Then none of those partitions is full and each job's rank is at most that count, so they
    are exactly what ``choose_claims`` takes. None when one partition would go over: then only
    the full rule decides."""
    if limit <= 0:
        return []
    cpart, rpart = flow.concurrency_partition, flow.rate_partition
    batch = _due(jobs, flow, now)[:min(limit, scan_size(limit))]
    running, mine = _running(jobs, cpart, client_id)
    starts = recent_starts or {}
    count: dict[tuple[Any, ...], int] = {}
    rcount: dict[tuple[Any, ...], int] = {}
    for job in batch:
        ck, rk = cpart.key(job.kind, job.args), rpart.key(job.kind, job.args)
        count[ck] = count.get(ck, 0) + 1
        rcount[rk] = rcount.get(rk, 0) + 1
    for k, n in count.items():
        if limits.global_limit is not None and running.get(k, 0) + n > limits.global_limit:
            return None
        if limits.local_limit is not None and mine.get(k, 0) + n > limits.local_limit:
            return None
    for k, n in rcount.items():
        if limits.rate_allowed is not None and starts.get(k, 0) + n > limits.rate_allowed:
            return None
    return [j.id for j in batch]
