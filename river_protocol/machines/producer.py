"""The producer of one queue in one client (docs/protocol.md §6.2-§6.5, §12.3, §13.3).

It decides *when* to claim and how many, never how to run a job: claimed rows
come out as ``start_jobs`` and the driver reports each one back with
``JobFinished``. All fetch triggers go through a leading-edge debouncer, and
at most one claim is ever in flight.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from river_protocol.constants import (
    FETCH_COOLDOWN_DEFAULT,
    FETCH_COOLDOWN_MIN,
    FETCH_POLL_INTERVAL_DEFAULT,
    FETCH_POLL_INTERVAL_MIN,
    FETCH_POLL_JITTER_MIN,
    HOT_STATEMENT_TIMEOUT,
    MAX_ATTEMPTED_BY,
    QUEUE_MAX_WORKERS_MAX,
    QUEUE_MAX_WORKERS_MIN,
    QUEUE_SETTINGS_POLL_INTERVAL,
    QUEUE_STATUS_REFRESH_INTERVAL,
    START_STAGGER_MAX,
)
from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.flow_control import FlowControl
from river_protocol.flow_intents import ClaimLimitedJobs
from river_protocol.frozen import quick_init
from river_protocol.intents import (
    ClaimJobs,
    GetCancelRequested,
    GetQueue,
    Intent,
    Notify,
    QueueRow,
    ReconcileClaim,
    UpsertQueue,
)
from river_protocol.job import JobRow
from river_protocol.machines.base import (
    Batches,
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Rng,
    Stop,
    Table,
    Tick,
    exponential_backoff,
    to,
    uniform,
)
from river_protocol.machines.notifications import (
    ACTION_CANCEL,
    ACTION_METADATA_CHANGED,
    ACTION_PAUSE,
    ACTION_RESUME,
    TOPIC_INSERT,
    ControlPayload,
    build_insert,
)
from river_protocol.metadata_keys import CANCEL_ATTEMPTED_AT

# A rate-limited producer polls at least this many times per rate period.
RATE_POLLS_PER_PERIOD = 20


class ProducerState(enum.Enum):
    NEW = "new"
    STARTING = "starting"  # initial queue upsert in flight
    RUNNING = "running"
    STOPPING = "stopping"  # no more fetches; waiting for running jobs
    STOPPED = "stopped"


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Start(Event):
    """Start the producer; ``poll_only`` as ``ProducerConfig.poll_only``, for a client that
    learnt only after making its producers that no notification reaches it (its listener
    sits behind a transaction pooler)."""

    poll_only: bool = False


@dataclass(frozen=True, slots=True)
class InsertNotification(Event):
    queue: str


@dataclass(frozen=True, slots=True)
class ControlMessage(Event):
    """``ack`` (opaque, from this client's own admin call) comes back in ``ProducerOutput.acks``
    once the message is applied and no claim that started before it is still in flight."""

    payload: ControlPayload
    ack: Any = None


@dataclass(frozen=True, slots=True)
class TriggerFetch(Event):
    """A local poke, e.g. after this client's own insert when no listener exists."""


@dataclass(frozen=True, slots=True)
class SlotsFreed(Event):
    """Flow control: completions of this queue's jobs were just written, freeing slots of its
    limits on every client. The producer fetches again and, when clients hear notifications,
    announces the queue on ``river_insert`` (at most once per fetch cooldown) so that other
    clients fetch too instead of waiting for their next poll."""


@quick_init
@dataclass(frozen=True, slots=True)
class JobFinished(Event):
    job_id: int


@dataclass(frozen=True, slots=True)
class JobsFinished(Event):
    """Consecutive ``JobFinished`` events as one (``take_event`` merges them). The effect is
    theirs, one after another, except that a fetch they trigger asks for every slot they free."""

    job_ids: tuple[int, ...]

    @classmethod
    def of(cls, events: tuple[JobFinished, ...]) -> JobsFinished:
        return cls(tuple(e.job_id for e in events))


@dataclass(frozen=True, slots=True)
class SlotReleased(Event):
    """A stuck-job handler gave up this running job's slot (the job keeps running)."""

    job_id: int


class QueueEventKind(enum.Enum):
    PAUSED = "queue_paused"
    RESUMED = "queue_resumed"
    METADATA_CHANGED = "queue_metadata_changed"


@dataclass(frozen=True, slots=True)
class QueueEvent:
    kind: QueueEventKind
    queue: str
    metadata: bytes | None = None


@dataclass(frozen=True, slots=True)
class ClaimFailure:
    """A claim that failed, and how many have failed in a row (this one included)."""

    error: BaseException
    consecutive: int

    @property
    def repeated(self) -> bool:
        """A failure that repeats is not a blip: drivers log it at WARNING with its cause."""
        return self.consecutive > 1


@dataclass(frozen=True, slots=True)
class StartFailure:
    """A start upsert that failed for a reason a retry may cure (a lost connection): the
    producer tries again after ``retry_in``; ``consecutive`` counts the failures in a row."""

    error: BaseException
    consecutive: int
    retry_in: timedelta


# The start retry's back-off: 1, 2, 4 ... 32 s (±10 %), then from 1 s again.
START_BACKOFF_RESET = 6


@dataclass(frozen=True, slots=True)
class ProducerOutput(Output):
    start_jobs: tuple[JobRow, ...] = ()
    cancel_job_ids: tuple[int, ...] = ()
    queue_events: tuple[QueueEvent, ...] = ()
    acks: tuple[Any, ...] = ()  # ControlMessage acks now settled
    start_error: BaseException | None = None  # the start failed for good: the producer stopped
    start_failure: StartFailure | None = None  # the start failed, will be retried
    claim_failure: ClaimFailure | None = None
    reconciled_job_ids: tuple[int, ...] = ()  # rows of a lost claim put back to available
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    queue: str
    client_id: str
    max_workers: int
    fetch_cooldown: timedelta = FETCH_COOLDOWN_DEFAULT
    fetch_poll_interval: timedelta = FETCH_POLL_INTERVAL_DEFAULT
    poll_only: bool = False
    queue_refresh_interval: timedelta = QUEUE_STATUS_REFRESH_INTERVAL
    settings_poll_interval: timedelta = QUEUE_SETTINGS_POLL_INTERVAL
    # Claim filters passed through to ClaimJobs (None = no filter, River's default).
    kinds: tuple[str, ...] | None = None
    tags_any: tuple[str, ...] | None = None
    untagged_only: bool = False
    async_claim_commit: bool = False  # ClaimJobs.asynchronous_commit
    # Flow control: claims are ClaimLimitedJobs under it (None: today's ClaimJobs, unchanged).
    flow: FlowControl | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.async_claim_commit, bool):
            raise ValidationError(f"async_claim_commit must be a bool, got {self.async_claim_commit!r}")
        if not QUEUE_MAX_WORKERS_MIN <= self.max_workers <= QUEUE_MAX_WORKERS_MAX:
            raise ValidationError(
                f"max_workers must be between {QUEUE_MAX_WORKERS_MIN} and {QUEUE_MAX_WORKERS_MAX},"
                f" got {self.max_workers}"
            )
        if self.fetch_cooldown < FETCH_COOLDOWN_MIN:
            raise ValidationError(
                f"fetch_cooldown must be at least {FETCH_COOLDOWN_MIN}, got {self.fetch_cooldown}"
            )
        if self.fetch_poll_interval < FETCH_POLL_INTERVAL_MIN:
            raise ValidationError(
                f"fetch_poll_interval must be at least {FETCH_POLL_INTERVAL_MIN},"
                f" got {self.fetch_poll_interval}"
            )
        if self.fetch_poll_interval < self.fetch_cooldown:
            raise ValidationError(
                f"fetch_poll_interval ({self.fetch_poll_interval}) must not be shorter than"
                f" fetch_cooldown ({self.fetch_cooldown})"
            )


_S = ProducerState
_OK, _FAIL = IntentSucceeded, IntentFailed


def _metadata_equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Producer(Machine):
    INITIAL: ClassVar[ProducerState] = _S.NEW
    BATCHES: ClassVar[Batches] = {JobFinished: JobsFinished.of}
    state: ProducerState

    TABLE: ClassVar[Table] = {
        (_S.NEW, Start): to(_S.STARTING, via="_on_start"),
        (_S.STARTING, (_OK, UpsertQueue)): to(_S.RUNNING, via="_on_started"),
        # Conditional: a transient failure (a lost connection) is retried after a back-off, while
        # the client runs; any other stops the producer.
        (_S.STARTING, (_FAIL, UpsertQueue)): to(_S.STARTING, _S.STOPPED, via="_on_start_failed"),
        (_S.STARTING, Tick): to(_S.STARTING, via="_on_starting_tick"),
        # The first claim follows the start upsert: it finds whatever a poke announced meanwhile
        # (a start retried after a lost connection can take seconds).
        **{(_S.STARTING, e): to(_S.STARTING, via="_ignore") for e in (InsertNotification, TriggerFetch)},
        # A pause or resume before the first fetch is applied over the start upsert's row.
        (_S.STARTING, ControlMessage): to(_S.STARTING, via="_on_control_starting"),
        (_S.RUNNING, Tick): to(_S.RUNNING, via="_on_tick"),
        (_S.RUNNING, InsertNotification): to(_S.RUNNING, via="_on_insert_notification"),
        (_S.RUNNING, TriggerFetch): to(_S.RUNNING, via="_on_trigger"),
        (_S.RUNNING, SlotsFreed): to(_S.RUNNING, via="_on_slots_freed"),
        **{(s, SlotsFreed): to(s, via="_ignore") for s in (_S.NEW, _S.STARTING, _S.STOPPING, _S.STOPPED)},
        # The announcement of freed slots is best effort: a lost one costs a poll interval.
        **{(s, (r, Notify)): to(s, via="_ignore") for s in (_S.RUNNING, _S.STOPPING, _S.STOPPED)
           for r in (_OK, _FAIL)},
        (_S.RUNNING, ControlMessage): to(_S.RUNNING, via="_on_control"),
        (_S.RUNNING, (_OK, GetQueue)): to(_S.RUNNING, via="_on_settings"),
        # Poll-only: cancellations of running jobs, read with the settings (§12.6).
        (_S.RUNNING, (_OK, GetCancelRequested)): to(_S.RUNNING, via="_on_cancel_requested"),
        (_S.STOPPING, (_OK, GetCancelRequested)): to(_S.STOPPING, via="_on_cancel_requested"),
        (_S.STOPPED, (_OK, GetCancelRequested)): to(_S.STOPPED, via="_ignore"),
        **{(s, (_FAIL, GetCancelRequested)): to(s, via="_ignore")
           for s in (_S.RUNNING, _S.STOPPING, _S.STOPPED)},
        # Conditional: with no job running and no claim in flight it stops at once.
        (_S.RUNNING, Stop): to(_S.STOPPING, _S.STOPPED, via="_on_stop"),
        (_S.RUNNING, JobFinished): to(_S.RUNNING, via="_on_job_finished"),
        (_S.RUNNING, JobsFinished): to(_S.RUNNING, via="_on_jobs_finished"),
        (_S.RUNNING, SlotReleased): to(_S.RUNNING, via="_on_slot_released"),
        (_S.RUNNING, (_OK, ClaimJobs)): to(_S.RUNNING, via="_on_claimed"),
        (_S.RUNNING, (_FAIL, ClaimJobs)): to(_S.RUNNING, via="_on_claim_failed"),
        # Conditional while stopping: the last job or claim to settle stops the producer.
        (_S.STOPPING, JobFinished): to(_S.STOPPING, _S.STOPPED, via="_on_job_finished"),
        (_S.STOPPING, JobsFinished): to(_S.STOPPING, _S.STOPPED, via="_on_jobs_finished"),
        (_S.STOPPING, SlotReleased): to(_S.STOPPING, via="_on_slot_released"),
        (_S.STOPPING, (_OK, ClaimJobs)): to(_S.STOPPING, _S.STOPPED, via="_on_claimed"),
        (_S.STOPPING, (_FAIL, ClaimJobs)): to(_S.STOPPING, _S.STOPPED, via="_on_claim_failed"),
        # A limited claim (flow control) is a claim like any other to the producer.
        (_S.RUNNING, (_OK, ClaimLimitedJobs)): to(_S.RUNNING, via="_on_claimed"),
        (_S.RUNNING, (_FAIL, ClaimLimitedJobs)): to(_S.RUNNING, via="_on_claim_failed"),
        (_S.STOPPING, (_OK, ClaimLimitedJobs)): to(_S.STOPPING, _S.STOPPED, via="_on_claimed"),
        (_S.STOPPING, (_FAIL, ClaimLimitedJobs)): to(_S.STOPPING, _S.STOPPED, via="_on_claim_failed"),
        (_S.RUNNING, (_OK, ReconcileClaim)): to(_S.RUNNING, via="_on_reconciled"),
        (_S.RUNNING, (_FAIL, ReconcileClaim)): to(_S.RUNNING, via="_on_reconcile_failed"),
        # Conditional while stopping: a reconcile is the last statement a stopping producer waits for.
        (_S.STOPPING, (_OK, ReconcileClaim)): to(_S.STOPPING, _S.STOPPED, via="_on_reconciled"),
        (_S.STOPPING, (_FAIL, ReconcileClaim)): to(_S.STOPPING, _S.STOPPED, via="_on_reconcile_failed"),
        # Refresh/poll results are advisory; late ones after stop are dropped.
        **{(s, (r, UpsertQueue)): to(s, via="_ignore") for s in (_S.RUNNING, _S.STOPPING, _S.STOPPED)
           for r in (_OK, _FAIL)},
        **{(s, (_OK, GetQueue)): to(s, via="_ignore") for s in (_S.STOPPING, _S.STOPPED)},
        **{(s, (_FAIL, GetQueue)): to(s, via="_ignore") for s in (_S.RUNNING, _S.STOPPING, _S.STOPPED)},
        # Notifications keep arriving until the driver unsubscribes; Go drops them once stopping.
        **{(s, e): to(s, via="_ignore") for s in (_S.STOPPING, _S.STOPPED) for e in (
            Tick, InsertNotification, TriggerFetch, Stop)},
        # Dropped too, but a local caller waiting for the message is answered (nothing fetches).
        **{(s, ControlMessage): to(s, via="_ack_only") for s in (_S.STOPPING, _S.STOPPED)},
        # A start upsert still in flight is answered later and dropped by the STOPPED rows.
        (_S.NEW, Stop): to(_S.STOPPED, via="_on_stop_unstarted"),
        (_S.STARTING, Stop): to(_S.STOPPED, via="_on_stop_unstarted"),
    }

    def __init__(self, config: ProducerConfig, rng: Rng) -> None:
        super().__init__()
        self.config = config
        self._rng = rng
        self._poll_only = config.poll_only
        self.paused = False
        self._metadata: Any = {}
        self._polled_paused = False
        self._polled_metadata: Any = {}
        self._running: set[int] = set()
        self._cancel_seen: set[int] = set()  # running jobs whose polled cancellation was passed on
        # Poll-only: a cancel attempt a job already carried when claimed (before a retry, say) is
        # not a request to stop this run; only a new or changed one is.
        self._cancel_at_claim: dict[int, Any] = {}
        self._released: set[int] = set()
        self._fetch_when_slots_free = False
        self._cooldown_until: datetime | None = None
        self._trigger_pending = False  # a trigger arrived during cooldown or an in-flight claim
        self._claim_limit = 0
        self._start_upsert: UpsertQueue | None = None
        self._effects_start: list[JobRow] = []
        self._effects_cancel: list[int] = []
        self._effects_queue: list[QueueEvent] = []
        self._effects_acks: list[Any] = []
        self._acks_after_claim: list[Any] = []  # wait for the claim in flight when they arrived
        self._paused_before_start: bool | None = None  # a local pause/resume during the start upsert
        self._effects_start_error: BaseException | None = None
        self._effects_start_failure: StartFailure | None = None
        self._start_failures = 0
        self._effects_claim_failure: ClaimFailure | None = None
        self._effects_reconciled: tuple[int, ...] = ()
        self._effects_stopped = False
        self._claim_failures = 0
        # Where a lost claim's rows can be told apart (docs/protocol.md §6.5): every row
        # claimed before has attempted_at below _claimed_since (database time, from the
        # last claim that returned rows, or the start upsert), except that claim's own.
        self._claimed_since: datetime | None = None
        self._claimed_last_ids: frozenset[int] = frozenset()
        self._reconcile_pending = False
        self._announced_at: datetime | None = None  # the last SlotsFreed announcement
        # When the last claim answered (rows or none): a health check's "when did it last fetch".
        self.last_fetched_at: datetime | None = None

    # ---------------------------------------------------------------- views

    @property
    def active_count(self) -> int:
        return len(self._running) - len(self._released)

    @property
    def running_job_ids(self) -> frozenset[int]:
        return frozenset(self._running)

    @property
    def claim_failures(self) -> int:
        """Claims that failed in a row since the last one that answered."""
        return self._claim_failures

    @property
    def claim_in_flight(self) -> ClaimJobs | None:
        claim = self._flight_of(ClaimJobs) or self._flight_of(ClaimLimitedJobs)
        if isinstance(claim, ClaimLimitedJobs):
            return claim.claim
        return claim if isinstance(claim, ClaimJobs) else None

    @property
    def _claiming(self) -> bool:
        # A reconcile must never overlap a claim: it would take back rows the claim is returning.
        return self.claim_in_flight is not None or self._flight_of(ReconcileClaim) is not None

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> ProducerOutput:
        out = ProducerOutput(
            intents=intents,
            next_deadline=deadline,
            start_jobs=tuple(self._effects_start),
            cancel_job_ids=tuple(self._effects_cancel),
            queue_events=tuple(self._effects_queue),
            acks=tuple(self._effects_acks),
            start_error=self._effects_start_error,
            start_failure=self._effects_start_failure,
            claim_failure=self._effects_claim_failure,
            reconciled_job_ids=self._effects_reconciled,
            stopped=self._effects_stopped,
        )
        self._effects_start, self._effects_cancel, self._effects_queue = [], [], []
        self._effects_acks = []
        self._effects_start_error, self._effects_stopped = None, False
        self._effects_start_failure = None
        self._effects_claim_failure, self._effects_reconciled = None, ()
        return out

    # ---------------------------------------------------------------- lifecycle

    def _on_start(self, event: Start, now: datetime) -> None:
        self._poll_only = self.config.poll_only or event.poll_only
        self._emit(UpsertQueue(name=self.config.queue), HOT_STATEMENT_TIMEOUT)

    def _on_started(self, event: IntentSucceeded, now: datetime) -> None:
        row = event.result
        if row is not None and not isinstance(row, QueueRow):
            raise ProtocolError(f"UpsertQueue result must be a QueueRow or None, got {type(row).__name__}")
        self.paused = self._polled_paused = row is not None and row.paused_at is not None
        self._metadata = self._polled_metadata = row.metadata if row is not None else {}
        if self._paused_before_start is not None and self._paused_before_start != self.paused:
            # Newer than the row: the upsert may have read the queue before that change committed.
            self.paused = self._paused_before_start
            self._queue_event(QueueEventKind.PAUSED if self.paused else QueueEventKind.RESUMED)
        self._claimed_since = row.updated_at if row is not None else None
        self._timers["poll"] = now + self._poll_wait()
        self._timers["refresh"] = now + uniform(self._rng, timedelta(0), START_STAGGER_MAX)
        if self._poll_only:
            self._timers["settings"] = now + self.config.settings_poll_interval
        self._trigger(now)

    def _on_start_failed(self, event: IntentFailed, now: datetime) -> None:
        self._start_failures += 1
        if event.transient and not event.fatal:
            wait = exponential_backoff(self._start_failures, START_BACKOFF_RESET, self._rng)
            self._timers["start_retry"] = now + wait
            self._effects_start_failure = StartFailure(event.error, self._start_failures, wait)
            return
        self._enter(_S.STOPPED)
        self._effects_start_error = event.error
        self._effects_stopped = True

    def _on_starting_tick(self, event: Tick, now: datetime) -> None:
        if self._due("start_retry", now) and self._flight_of(UpsertQueue) is None:
            self._emit(UpsertQueue(name=self.config.queue), HOT_STATEMENT_TIMEOUT)

    def _on_stop_unstarted(self, event: Stop, now: datetime) -> None:
        self._timers.clear()  # a start retry waiting: nothing more to try
        self._effects_stopped = True

    def _on_stop(self, event: Stop, now: datetime) -> None:
        self._enter(_S.STOPPING)
        self._timers.clear()
        self._trigger_pending = False
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self.state is _S.STOPPING and not self._running and not self._claiming:
            self._enter(_S.STOPPED)
            self._effects_stopped = True

    # ---------------------------------------------------------------- timers

    def _poll_wait(self) -> timedelta:
        interval = self.config.fetch_poll_interval
        rate = self.config.flow.rate_limit if self.config.flow is not None else None
        if rate is not None:
            # Nothing announces that a rate window has moved on: poll often enough to use it.
            interval = min(interval, max(rate.period / RATE_POLLS_PER_PERIOD, self.config.fetch_cooldown))
        return uniform(self._rng, interval, interval + max(interval / 10, FETCH_POLL_JITTER_MIN))

    def _on_tick(self, event: Tick, now: datetime) -> None:
        if self._due("cooldown", now) and self._trigger_pending and not self._claiming:
            self._trigger_pending = False
            self._fire(now)
        if self._due("poll", now):
            self._timers["poll"] = now + self._poll_wait()
            self._trigger(now)
        if self._due("refresh", now):
            self._timers["refresh"] = now + self.config.queue_refresh_interval
            if self._flight_of(UpsertQueue) is None:
                self._emit(UpsertQueue(name=self.config.queue), HOT_STATEMENT_TIMEOUT)
        if self._due("settings", now):
            self._timers["settings"] = now + self.config.settings_poll_interval
            if self._flight_of(GetQueue) is None:
                self._emit(GetQueue(name=self.config.queue), HOT_STATEMENT_TIMEOUT)
            if self._running and self._flight_of(GetCancelRequested) is None:
                self._emit(GetCancelRequested(ids=tuple(sorted(self._running))), HOT_STATEMENT_TIMEOUT)

    # ---------------------------------------------------------------- fetching

    def _trigger(self, now: datetime) -> None:
        """Leading-edge debounce: fire now unless cooling down or a claim is in flight."""
        cooling = self._cooldown_until is not None and now < self._cooldown_until
        if cooling or self._claiming:
            self._trigger_pending = True
            if cooling and self._cooldown_until is not None:
                self._timers["cooldown"] = self._cooldown_until
            return
        self._fire(now)

    def _fire(self, now: datetime) -> None:
        self._cooldown_until = now + self.config.fetch_cooldown
        self._timers.pop("cooldown", None)
        if self._reconcile_pending:
            # An earlier reconcile failed; its rows come first, and the claim follows its answer.
            self._trigger_pending = True
            self._reconcile()
            return
        if self.paused:
            return
        limit = self.config.max_workers - self.active_count
        if limit <= 0:
            self._fetch_when_slots_free = True
            return
        self._claim_limit = limit
        claim = ClaimJobs(
            queue=self.config.queue,
            limit=limit,
            client_id=self.config.client_id,
            max_attempted_by=MAX_ATTEMPTED_BY,
            kinds=self.config.kinds,
            tags_any=self.config.tags_any,
            untagged_only=self.config.untagged_only,
            asynchronous_commit=self.config.async_claim_commit,
        )
        flow = self.config.flow
        self._emit(claim if flow is None else ClaimLimitedJobs(claim=claim, flow=flow), HOT_STATEMENT_TIMEOUT)

    def _on_insert_notification(self, event: InsertNotification, now: datetime) -> None:
        if event.queue == self.config.queue:
            self._trigger(now)

    def _on_trigger(self, event: TriggerFetch, now: datetime) -> None:
        self._trigger(now)

    def _on_slots_freed(self, event: SlotsFreed, now: datetime) -> None:
        self._trigger(now)
        if self._poll_only or self._flight_of(Notify) is not None:
            return
        if self._announced_at is not None and now - self._announced_at < self.config.fetch_cooldown:
            return
        self._announced_at = now
        self._emit(Notify(topic=TOPIC_INSERT, payloads=(build_insert(self.config.queue),)),
                   HOT_STATEMENT_TIMEOUT)

    def _on_claimed(self, event: IntentSucceeded, now: datetime) -> None:
        self._claim_failures = 0
        self.last_fetched_at = now
        rows = tuple(event.result or ())
        if len(rows) > self._claim_limit:
            raise ProtocolError(f"claim returned {len(rows)} rows for a limit of {self._claim_limit}")
        since: datetime | None = None
        last_ids: list[int] = []
        running = self._running
        for row in rows:  # one pass: checked, marked running, and the latest attempt found
            if row.__class__ is not JobRow and not isinstance(row, JobRow):
                raise ProtocolError(f"ClaimJobs result must hold JobRow values, got {type(row).__name__}")
            if row.id in running:
                raise ProtocolError(f"claim returned job {row.id}, which is already running here")
            running.add(row.id)
            at = row.attempted_at
            if at is not None:
                if since is None or at > since:
                    since, last_ids = at, [row.id]
                elif at == since:
                    last_ids.append(row.id)
        if since is not None:
            self._claimed_since = since
            self._claimed_last_ids = frozenset(last_ids)
        if self.config.poll_only:
            for row in rows:
                earlier = row.metadata.get(CANCEL_ATTEMPTED_AT) if row.metadata else None
                if earlier is not None:
                    self._cancel_at_claim[row.id] = earlier
        # Go starts every claimed row, even when stopping: they are locked as running already.
        self._effects_start.extend(rows)
        if rows and len(rows) == self._claim_limit:
            self._fetch_when_slots_free = True
        self._after_claim(now)

    def _on_claim_failed(self, event: IntentFailed, now: datetime) -> None:
        self._claim_failures += 1
        self._effects_claim_failure = ClaimFailure(event.error, self._claim_failures)
        if not event.fatal:
            # The claim may have committed with its answer lost on the way back (a dropped
            # connection, a timeout): put its rows back now rather than leave them running
            # until the rescuer. After a claim that really rolled back nothing matches.
            self._reconcile_pending = True
            self._reconcile()
            self._release_acks()  # the claim is over; a reconcile starts no job
            return
        self._after_claim(now)

    def _reconcile(self) -> None:
        self._emit(
            ReconcileClaim(
                queue=self.config.queue,
                client_id=self.config.client_id,
                claimed_since=self._claimed_since,
                exclude_ids=tuple(sorted(self._running | self._claimed_last_ids)),
            ),
            HOT_STATEMENT_TIMEOUT,
        )

    def _on_reconciled(self, event: IntentSucceeded, now: datetime) -> None:
        self._reconcile_pending = False
        restored = tuple(event.result or ())
        if any(job_id in self._running for job_id in restored):
            raise ProtocolError(f"reconcile put back jobs running here: {restored}")
        self._effects_reconciled = restored
        if restored:
            self._trigger_pending = True  # they are available again, here or anywhere
        self._after_claim(now)

    def _on_reconcile_failed(self, event: IntentFailed, now: datetime) -> None:
        # Still pending: retried before the next claim. A stopping producer gives up on it.
        if event.fatal:
            self._reconcile_pending = False
        self._after_claim(now)

    def _release_acks(self) -> None:
        self._effects_acks.extend(self._acks_after_claim)
        self._acks_after_claim.clear()

    def _after_claim(self, now: datetime) -> None:
        self._release_acks()
        if self.state is _S.STOPPING:
            self._maybe_finish()
            return
        if self._trigger_pending:
            self._trigger_pending = False
            self._trigger(now)

    def _on_job_finished(self, event: JobFinished, now: datetime) -> None:
        self._jobs_finished((event.job_id,), now)

    def _on_jobs_finished(self, event: JobsFinished, now: datetime) -> None:
        self._jobs_finished(event.job_ids, now)

    def _jobs_finished(self, job_ids: tuple[int, ...], now: datetime) -> None:
        running, released = self._running, self._released
        for job_id in job_ids:
            if job_id not in running:
                raise ProtocolError(f"job {job_id} finished but is not running in this producer")
            running.discard(job_id)
            released.discard(job_id)
        if self.state is _S.STOPPING:
            self._maybe_finish()
            return
        # Under flow control a finished job may free a limit's slot even when the last claim
        # came back short (it held jobs back), so every finish asks again (debounced).
        if self._fetch_when_slots_free or self.config.flow is not None:
            self._fetch_when_slots_free = False
            self._trigger(now)

    def _on_slot_released(self, event: SlotReleased, now: datetime) -> None:
        if event.job_id not in self._running:
            raise ProtocolError(f"job {event.job_id} released a slot but is not running in this producer")
        if event.job_id in self._released:
            return
        self._released.add(event.job_id)
        if self.state is _S.RUNNING:
            self._trigger(now)

    # ---------------------------------------------------------------- control

    def _on_control(self, event: ControlMessage, now: datetime) -> None:
        # A claim in flight may have started before a pause: the pause holds only once it is answered.
        earlier_claim = self.claim_in_flight is not None
        self._apply_control(event.payload, now)
        if event.ack is not None:
            (self._acks_after_claim if earlier_claim else self._effects_acks).append(event.ack)

    def _on_control_starting(self, event: ControlMessage, now: datetime) -> None:
        # No claim yet: the first one comes after the start upsert, which applies this first.
        msg = event.payload
        if msg.applies_to(self.config.queue) and msg.action in (ACTION_PAUSE, ACTION_RESUME):
            self._paused_before_start = msg.action == ACTION_PAUSE
        self._ack_only(event, now)

    def _ack_only(self, event: ControlMessage, now: datetime) -> None:
        if event.ack is not None:
            self._effects_acks.append(event.ack)

    def _apply_control(self, msg: ControlPayload, now: datetime) -> None:
        if not msg.applies_to(self.config.queue):
            return
        if msg.action == ACTION_CANCEL:
            if msg.job_id in self._running:
                self._effects_cancel.append(msg.job_id)
        elif msg.action == ACTION_PAUSE:
            self._set_paused(True, now)
        elif msg.action == ACTION_RESUME:
            self._set_paused(False, now)
        elif msg.action == ACTION_METADATA_CHANGED:
            self._queue_event(QueueEventKind.METADATA_CHANGED, msg.metadata)

    def _set_paused(self, paused: bool, now: datetime) -> None:
        if self.paused == paused:
            return
        self.paused = paused
        kind = QueueEventKind.PAUSED if paused else QueueEventKind.RESUMED
        self._queue_event(kind)
        if not paused:
            # Jobs may have piled up behind the pause.
            self._trigger(now)

    def _queue_event(self, kind: QueueEventKind, metadata: bytes | None = None) -> None:
        self._effects_queue.append(QueueEvent(kind, self.config.queue, metadata))

    def _on_cancel_requested(self, event: IntentSucceeded, now: datetime) -> None:
        # A poll-only producer hears no control notification: a cancel attempt recorded in the
        # metadata of a job it runs, since it claimed it, stands for one (each passed on once).
        self._cancel_seen &= self._running
        for job_id in [j for j in self._cancel_at_claim if j not in self._running]:
            del self._cancel_at_claim[job_id]
        for job_id, requested_at in event.result:
            if job_id not in self._running or job_id in self._cancel_seen:
                continue
            if requested_at == self._cancel_at_claim.get(job_id):
                continue
            self._cancel_seen.add(job_id)
            self._effects_cancel.append(job_id)

    def _on_settings(self, event: IntentSucceeded, now: datetime) -> None:
        row = event.result
        if row is None:
            return
        if not isinstance(row, QueueRow):
            raise ProtocolError(f"GetQueue result must be a QueueRow or None, got {type(row).__name__}")
        paused = row.paused_at is not None
        if paused != self._polled_paused:
            self._polled_paused = paused
            self._set_paused(paused, now)
        if not _metadata_equal(row.metadata, self._polled_metadata):
            self._polled_metadata = row.metadata
            encoded = json.dumps(row.metadata, separators=(",", ":"), ensure_ascii=False).encode()
            self._queue_event(QueueEventKind.METADATA_CHANGED, encoded)
