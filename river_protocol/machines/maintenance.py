"""Leader-only maintenance services (docs/protocol.md §11), one machine each.

Every service shares one skeleton, ``MaintenanceService``: staggered start,
a run every interval (or on a ``Schedule``), batches that continue while full
after a U[50 ms, 1 s] pause, and a per-service breaker that drops the batch
size from 10 000 to 1 000 for good after 3 timeouts within 10 minutes with no
success between them. What differs per service is a small ``Job`` object that
names the statements of one run and reads their results.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from river_protocol import constants as C
from river_protocol.errors import ValidationError
from river_protocol.intents import (
    DeleteExpiredQueues,
    DeleteFinalizedBefore,
    DeleteNotificationsBefore,
    GetStuckJobs,
    IndexExists,
    Intent,
    ListReindexArtifacts,
    PromoteWorkflowTasks,
    PromotionResult,
    Reindex,
    RescueJobs,
    RescueUpdate,
    ScheduledJob,
    ScheduleJobs,
)
from river_protocol.job import JobRow, encode_attempt_error
from river_protocol.machines.base import (
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Rng,
    Stop,
    Table,
    Tick,
    to,
    uniform,
)
from river_protocol.machines.throttle import InsertNotifyThrottle
from river_protocol.states import Actor, JobState, check_transition

if TYPE_CHECKING:
    from river_protocol.cron import Schedule
    from river_protocol.retry import RetryPolicy

RESCUE_ERROR = "Stuck job rescued by JobRescuer"


# ---------------------------------------------------------------- breaker


class BatchSizeBreaker:
    """Counts batch timeouts; opens (permanently) at ``limit`` within ``window`` without a success."""

    def __init__(self, limit: int = C.MAINTENANCE_BREAKER_LIMIT,
                 window: timedelta = C.MAINTENANCE_BREAKER_WINDOW) -> None:
        self.limit, self.window = limit, window
        self.open = False
        self._trips: list[datetime] = []

    def trip(self, now: datetime) -> bool:
        if not self.open:
            self._trips = [t for t in self._trips if t >= now - self.window] + [now]
            self.open = len(self._trips) >= self.limit
        return self.open

    def success(self) -> None:
        if not self.open:
            self._trips = []

    def batch_size(self, default: int = C.MAINTENANCE_BATCH_SIZE,
                   reduced: int = C.MAINTENANCE_BATCH_SIZE_REDUCED) -> int:
        return reduced if self.open else default


# ---------------------------------------------------------------- schedules


class DailyAtMidnightUTC:
    """The reindexer's default schedule."""

    def next(self, after: datetime) -> datetime | None:
        day = after.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return day + timedelta(days=1)


# ---------------------------------------------------------------- one run of a service


@dataclass(frozen=True, slots=True)
class Step:
    """What a service does after a statement answered."""

    next: Intent | None = None  # continue this batch with another statement
    side: tuple[Intent, ...] = ()  # fire-and-forget statements (notifications)
    full: bool = False  # batch done and was full: pause, then run another batch


class Job(Protocol):
    """One service's statements. ``begin`` starts a run; ``first`` starts a batch."""

    batched: bool

    def begin(self, now: datetime) -> None: ...

    def first(self, now: datetime, batch_size: int) -> Intent | None: ...

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step: ...


class ServiceState(enum.Enum):
    NEW = "new"
    WAITING = "waiting"
    WORKING = "working"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Start(Event):
    pass


@dataclass(frozen=True, slots=True)
class RunCompleted:
    service: str
    batches: int
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class MaintenanceOutput(Output):
    runs: tuple[RunCompleted, ...] = ()
    stopped: bool = False


_S = ServiceState
_OK, _FAIL = IntentSucceeded, IntentFailed


class MaintenanceService(Machine):
    """A service on an interval or a schedule; intents of one batch are issued one at a time."""

    INITIAL: ClassVar[ServiceState] = _S.NEW
    state: ServiceState

    TABLE: ClassVar[Table] = {
        (_S.NEW, Start): to(_S.WAITING, via="_on_start"),
        (_S.NEW, Stop): to(_S.STOPPED, via="_on_stop"),
        # Conditional: a due run starts working, and a run with nothing to do ends at once.
        (_S.WAITING, Tick): to(_S.WAITING, _S.WORKING, via="_on_tick"),
        (_S.WORKING, Tick): to(_S.WORKING, _S.WAITING, via="_on_tick"),
        **{(s, Stop): to(_S.STOPPED, via="_on_stop") for s in (_S.WAITING, _S.WORKING)},
        (_S.STOPPED, Tick): to(_S.STOPPED, via="_ignore"),
        (_S.STOPPED, Stop): to(_S.STOPPED, via="_ignore"),
        # Results of any statement a job names (``Intent`` rows). Conditional while working:
        # the answer to the last statement of a run ends it. Others are notifications fired
        # on the side, or answers that outlived their run.
        (_S.WORKING, (_OK, Intent)): to(_S.WORKING, _S.WAITING, via="_on_result"),
        (_S.WORKING, (_FAIL, Intent)): to(_S.WORKING, _S.WAITING, via="_on_result"),
        **{(s, (r, Intent)): to(s, via="_ignore") for s in (_S.WAITING, _S.STOPPED) for r in (_OK, _FAIL)},
    }

    def __init__(
        self,
        name: str,
        job: Job,
        rng: Rng,
        *,
        interval: timedelta | None = None,
        schedule: Schedule | None = None,
        stagger: bool = True,
        timeout: timedelta = C.MAINTENANCE_BATCH_TIMEOUT,
        breaker: BatchSizeBreaker | None = None,
    ) -> None:
        super().__init__()
        if (interval is None) == (schedule is None):
            raise ValidationError(f"maintenance service {name!r} needs exactly one of interval or schedule")
        if interval is not None and interval <= timedelta(0):
            raise ValidationError(f"maintenance service {name!r}: interval must be positive, got {interval}")
        self.name, self.job, self._rng = name, job, rng
        self._interval, self._schedule, self._stagger = interval, schedule, stagger
        self._timeout = timeout
        self.breaker = breaker or BatchSizeBreaker()
        self._current: Intent | None = None
        self._run_started: datetime | None = None
        self._batches = 0
        self._runs: list[RunCompleted] = []
        self._stopped_now = False

    def handle(self, event: Event, now: datetime) -> MaintenanceOutput:
        out: MaintenanceOutput = super().handle(event, now)
        return out

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> MaintenanceOutput:
        out = MaintenanceOutput(intents=intents, next_deadline=deadline, runs=tuple(self._runs),
                                stopped=self._stopped_now)
        self._runs, self._stopped_now = [], False
        return out

    @property
    def batch_size(self) -> int:
        return self.breaker.batch_size()

    def _on_start(self, event: Start, now: datetime) -> None:
        if self._schedule is not None:
            self._plan_scheduled(now)
            return
        delay = uniform(self._rng, timedelta(0), C.START_STAGGER_MAX) if self._stagger else timedelta(0)
        self._timers["run"] = now + delay

    def _plan_scheduled(self, now: datetime) -> None:
        assert self._schedule is not None
        at = self._schedule.next(now)
        if at is not None:
            self._timers["run"] = at

    def _on_stop(self, event: Stop, now: datetime) -> None:
        self._timers.clear()
        self._current = None
        self._stopped_now = True

    def _on_tick(self, event: Tick, now: datetime) -> None:
        if self._due("batch", now):
            self._start_batch(now)
        if self._due("run", now):
            if self.state is _S.WORKING:
                # Go's ticker drops ticks while a run is busy; so do we.
                self._plan_next_run(now)
                return
            self._enter(_S.WORKING)
            self._run_started = now
            self._batches = 0
            self.job.begin(now)
            self._start_batch(now)

    def _start_batch(self, now: datetime) -> None:
        intent = self.job.first(now, self.batch_size)
        if intent is None:
            self._end_run(now, None)
            return
        self._send(intent)

    def _send(self, intent: Intent) -> None:
        timeout = C.REINDEX_TIMEOUT if isinstance(intent, Reindex) else self._timeout
        self._current = intent
        self._emit(intent, timeout)

    def _on_result(self, event: IntentSucceeded | IntentFailed, now: datetime) -> None:
        if event.intent is not self._current:
            return  # a notification fired on the side
        self._current = None
        if isinstance(event, IntentFailed):
            if event.timed_out and self.job.batched:
                self.breaker.trip(now)
            self._end_run(now, event.error)
            return
        if self.job.batched:
            self.breaker.success()
        step = self.job.on_result(event.intent, event.result, now, self.batch_size)
        for side in step.side:
            self._emit(side, self._timeout)
        if step.next is not None:
            self._send(step.next)
            return
        self._batches += 1
        if step.full:
            pause = uniform(self._rng, C.MAINTENANCE_BATCH_PAUSE_MIN, C.MAINTENANCE_BATCH_PAUSE_MAX)
            self._timers["batch"] = now + pause
            return
        self._end_run(now, None)

    def _end_run(self, now: datetime, error: BaseException | None) -> None:
        self._enter(_S.WAITING)
        self._runs.append(RunCompleted(self.name, self._batches, error))
        self._plan_next_run(now)

    def _plan_next_run(self, now: datetime) -> None:
        if self._schedule is not None:
            self._plan_scheduled(now)
            return
        assert self._interval is not None and self._run_started is not None
        # A ticker: runs stay on their grid; a slow run skips the slots it overran.
        nxt = self._run_started + self._interval
        while nxt <= now:
            nxt += self._interval
        self._timers["run"] = nxt


# ---------------------------------------------------------------- the services' jobs


class SchedulerJob:
    batched = True

    def __init__(self, throttle: InsertNotifyThrottle | None = None,
                 look_ahead: timedelta = C.SCHEDULER_INTERVAL) -> None:
        self.throttle, self.look_ahead = throttle, look_ahead

    def begin(self, now: datetime) -> None:
        pass

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        return ScheduleJobs(now=now + self.look_ahead, limit=batch_size)

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        rows: Sequence[ScheduledJob] = tuple(result or ())
        horizon = now + C.SCHEDULER_NOTIFY_MARGIN
        queues = [r.job.queue for r in rows if r.job.scheduled_at is None or r.job.scheduled_at <= horizon]
        side: tuple[Intent, ...] = ()
        if self.throttle is not None and queues:
            notify = self.throttle.notify_for_queues(queues, now)
            side = (notify,) if notify is not None else ()
        return Step(side=side, full=len(rows) >= batch_size)


class JobCleanerJob:
    batched = True

    def __init__(
        self,
        cancelled_retention: timedelta = C.CANCELLED_RETENTION_DEFAULT,
        completed_retention: timedelta = C.COMPLETED_RETENTION_DEFAULT,
        discarded_retention: timedelta = C.DISCARDED_RETENTION_DEFAULT,
        queues_included: tuple[str, ...] | None = None,
        queues_excluded: tuple[str, ...] | None = None,
    ) -> None:
        self.retentions = (cancelled_retention, completed_retention, discarded_retention)
        self.queues_included, self.queues_excluded = queues_included, queues_excluded

    def begin(self, now: datetime) -> None:
        pass

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        # A negative retention (Go's -1) disables that state; all disabled = nothing to run.
        horizons = [None if r < timedelta(0) else now - r for r in self.retentions]
        if all(h is None for h in horizons):
            return None
        return DeleteFinalizedBefore(
            cancelled_before=horizons[0], completed_before=horizons[1], discarded_before=horizons[2],
            limit=batch_size, queues_included=self.queues_included, queues_excluded=self.queues_excluded,
        )

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        return Step(full=int(result or 0) >= batch_size)


class QueueCleanerJob:
    batched = True

    def __init__(self, retention: timedelta = C.QUEUE_RETENTION) -> None:
        self.retention = retention

    def begin(self, now: datetime) -> None:
        pass

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        return DeleteExpiredQueues(updated_before=now - self.retention, limit=batch_size)

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        return Step(full=len(tuple(result or ())) >= batch_size)


class NotificationCleanerJob:
    batched = False

    def __init__(self, retention: timedelta = C.NOTIFICATION_RETENTION) -> None:
        self.retention = retention

    def begin(self, now: datetime) -> None:
        pass

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        return DeleteNotificationsBefore(created_before=now - self.retention)

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        return Step()


class ReindexerJob:
    """For each index: exists? -> no artifacts? -> reindex. One run walks the whole list."""

    batched = False

    def __init__(self, indexes: Sequence[str] = C.REINDEX_DEFAULT_INDEXES) -> None:
        self.indexes = tuple(indexes)
        self._todo: list[str] = []

    def begin(self, now: datetime) -> None:
        self._todo = list(self.indexes)

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        return IndexExists(self._todo.pop(0)) if self._todo else None

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        if isinstance(intent, IndexExists) and result:
            return Step(next=ListReindexArtifacts(intent.index))
        if isinstance(intent, ListReindexArtifacts) and not result:
            return Step(next=Reindex(intent.index))
        nxt = self.first(now, batch_size)
        return Step(next=nxt)


# ---------------------------------------------------------------- rescuer


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """What the rescuer needs to know about a locally registered kind."""

    timeout: timedelta | None = None  # None or 0 = use the client's job timeout; negative = never
    timeout_for: Callable[[JobRow], timedelta | None] | None = None  # per-job timeout; wins over ``timeout``
    next_retry: Callable[[JobRow], datetime | None] | None = None
    args_valid: Callable[[JobRow], bool] | None = None


def rescue_decision(
    job: JobRow,
    now: datetime,
    workers: Mapping[str, WorkerInfo],
    job_timeout: timedelta,
    retry_policy: RetryPolicy,
    rand: Rng,
) -> RescueUpdate | None:
    """docs/protocol.md §11.3 for one stuck row; None = leave it alone.

    ``river:rescue_count`` is not in the update: both dialects increment it inside the
    RescueJobs statement (as Go does in SQL), so a value computed from this read could
    only lose a concurrent increment. The change is checked against ``states.TRANSITIONS``
    from running, the only state the rescue statement touches.
    """
    update = _rescue_update(job, now, workers, job_timeout, retry_policy, rand)
    if update is not None:
        check_transition(JobState.RUNNING, Actor.RESCUER, update.state)
    return update


def _rescue_update(
    job: JobRow,
    now: datetime,
    workers: Mapping[str, WorkerInfo],
    job_timeout: timedelta,
    retry_policy: RetryPolicy,
    rand: Rng,
) -> RescueUpdate | None:
    now_utc = now.astimezone(UTC)
    error = encode_attempt_error(now_utc, max(job.attempt, 0), RESCUE_ERROR)
    scheduled = job.scheduled_at or now_utc

    def final(state: JobState) -> RescueUpdate:
        return RescueUpdate(id=job.id, state=state, error=error, finalized_at=now_utc,
                            scheduled_at=scheduled)

    def retry(at: datetime | None) -> RescueUpdate:
        when = at if at is not None else retry_policy.next_retry(job, now_utc, rand.random())
        return RescueUpdate(id=job.id, state=JobState.RETRYABLE, error=error, finalized_at=None,
                            scheduled_at=when)

    can_retry = job.attempt < max(job.max_attempts, 0)
    if "cancel_attempted_at" in job.metadata:
        return final(JobState.CANCELLED)
    worker = workers.get(job.kind)
    if worker is None:
        return final(JobState.DISCARDED)
    if worker.args_valid is not None and not worker.args_valid(job):
        return retry(None) if can_retry else final(JobState.DISCARDED)
    own = worker.timeout_for(job) if worker.timeout_for is not None else worker.timeout
    timeout = own if own else job_timeout
    if timeout < timedelta(0):
        return None
    if timeout > timedelta(0) and job.attempted_at is not None and now - job.attempted_at < timeout:
        return None
    if not can_retry:
        return final(JobState.DISCARDED)
    return retry(worker.next_retry(job) if worker.next_retry is not None else None)


@dataclass
class RescuerJob:
    workers: Mapping[str, WorkerInfo]
    job_timeout: timedelta
    retry_policy: RetryPolicy
    rand: Rng
    rescue_after: timedelta = C.RESCUE_AFTER_DEFAULT
    batched: bool = True
    _after_id: int = 0
    _horizon: datetime | None = None
    _page_full: bool = False
    _rescued: list[int] = field(default_factory=list)

    def begin(self, now: datetime) -> None:
        self._after_id = 0
        self._horizon = now - self.rescue_after

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        assert self._horizon is not None
        return GetStuckJobs(stuck_horizon=self._horizon, limit=batch_size, after_id=self._after_id)

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        if isinstance(intent, RescueJobs):
            return Step(full=self._page_full)
        rows: tuple[JobRow, ...] = tuple(result or ())
        if rows:
            self._after_id = rows[-1].id
        self._page_full = len(rows) >= batch_size
        updates = []
        for job in rows:
            update = rescue_decision(job, now, self.workers, self.job_timeout, self.retry_policy, self.rand)
            if update is not None:
                updates.append(update)
        if updates:
            return Step(next=RescueJobs(tuple(updates)))
        return Step(full=self._page_full)


# ---------------------------------------------------------------- workflow promoter (ours, not River's)


class WorkflowPromoterJob:
    """Promotes what the completers did not: dependents of tasks finalized by anyone (a Go
    worker, a client that crashed before promoting, an operator) move on within one interval.
    Run by the workflow sweeper (``river_protocol.machines.workflow_sweeper``) while its client
    holds the sweeper's lease, not among River's leader services.

    A full sweep (every pending workflow task, a page of ``batch_size`` at a time) runs at a
    sweeping term's first run and every ``FULL_SWEEP_EVERY`` after; the runs between look only at the
    workflows with a task finalized since the previous run began, less ``SINCE_MARGIN``
    (an end is stamped before its transaction commits, and by another host's clock)."""

    batched = True
    FULL_SWEEP_EVERY = timedelta(minutes=1)
    SINCE_MARGIN = timedelta(seconds=10)

    def __init__(self, throttle: InsertNotifyThrottle | None = None) -> None:
        self.throttle = throttle
        self._after_id = 0
        self._last_full: datetime | None = None
        self._last_begin: datetime | None = None
        self._since: datetime | None = None

    def begin(self, now: datetime) -> None:
        self._after_id = 0
        due = self._last_full is None or now - self._last_full >= self.FULL_SWEEP_EVERY
        if due or self._last_begin is None:
            self._since, self._last_full = None, now
        else:
            self._since = self._last_begin - self.SINCE_MARGIN
        self._last_begin = now

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        return PromoteWorkflowTasks(now=now, limit=batch_size, after_id=self._after_id,
                                    finished_since=self._since)

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        done: PromotionResult = result
        self._after_id = max(self._after_id, done.last_id)
        side: tuple[Intent, ...] = ()
        if self.throttle is not None and done.promoted:
            notify = self.throttle.notify_for_queues((q for _, q in done.promoted), now)
            side = (notify,) if notify is not None else ()
        return Step(side=side, full=done.examined >= batch_size)


# ---------------------------------------------------------------- constructors with River's defaults


def job_scheduler(rng: Rng, throttle: InsertNotifyThrottle | None = None,
                  interval: timedelta = C.SCHEDULER_INTERVAL, *, stagger: bool = True) -> MaintenanceService:
    return MaintenanceService("job_scheduler", SchedulerJob(throttle, interval), rng, interval=interval,
                              stagger=stagger)


def job_rescuer(rng: Rng, workers: Mapping[str, WorkerInfo], retry_policy: RetryPolicy,
                job_timeout: timedelta = C.JOB_TIMEOUT_DEFAULT,
                rescue_after: timedelta = C.RESCUE_AFTER_DEFAULT,
                interval: timedelta = C.RESCUER_INTERVAL, *, stagger: bool = True) -> MaintenanceService:
    job = RescuerJob(workers, job_timeout, retry_policy, rng, rescue_after)
    return MaintenanceService("job_rescuer", job, rng, interval=interval, stagger=stagger)


def job_cleaner(rng: Rng, job: JobCleanerJob | None = None,
                interval: timedelta = C.JOB_CLEANER_INTERVAL, *, stagger: bool = True) -> MaintenanceService:
    return MaintenanceService("job_cleaner", job or JobCleanerJob(), rng, interval=interval, stagger=stagger)


def queue_cleaner(rng: Rng, retention: timedelta = C.QUEUE_RETENTION,
                  interval: timedelta = C.QUEUE_CLEANER_INTERVAL, *,
                  stagger: bool = True) -> MaintenanceService:
    return MaintenanceService("queue_cleaner", QueueCleanerJob(retention), rng, interval=interval,
                              stagger=stagger)


def notification_cleaner(rng: Rng, retention: timedelta = C.NOTIFICATION_RETENTION,
                         interval: timedelta = C.NOTIFICATION_CLEANER_INTERVAL, *,
                         stagger: bool = True) -> MaintenanceService:
    return MaintenanceService("sqlite_notification_cleaner", NotificationCleanerJob(retention), rng,
                              interval=interval, stagger=stagger)


def reindexer(rng: Rng, indexes: Sequence[str] = C.REINDEX_DEFAULT_INDEXES,
              schedule: Schedule | None = None) -> MaintenanceService:
    return MaintenanceService("reindexer", ReindexerJob(indexes), rng,
                              schedule=schedule or DailyAtMidnightUTC(), stagger=False)


def rescue_after_for(job_timeout: timedelta | None, rescue_after: timedelta | None) -> timedelta:
    """§1: an explicit positive job timeout pushes the default rescue-after to timeout + 1 h."""
    if rescue_after is not None:
        return rescue_after
    if job_timeout is not None and job_timeout > timedelta(0):
        return job_timeout + C.RESCUE_AFTER_DEFAULT
    return C.RESCUE_AFTER_DEFAULT

