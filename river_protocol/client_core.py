"""The sans-IO half of a client: configuration, machines, inserts, routing, bookkeeping.

A driver (threads in ``river_sync``, tasks in ``river_anyio``) owns one
``ClientCore`` and does only I/O around it: it runs the machines the core
builds, executes the intents the core plans, runs workers, and hands every
finished run back through ``finish_job``. Every rule about jobs lives here or
in the modules this one calls, so both drivers record identical rows.

The core is not thread-safe; a threaded driver serializes calls with a lock
(they are short and never block).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol.args import kind_of
from river_protocol.claim_filters import TagFilter, claim_filter
from river_protocol.constants import (
    CANCELLED_RETENTION_DEFAULT,
    CLIENT_ID_MAX_LEN,
    COMPLETED_RETENTION_DEFAULT,
    COMPLETER_BACKOFF_UNIT,
    DISCARDED_RETENTION_DEFAULT,
    ELECT_INTERVAL,
    ELECT_INTERVAL_JITTER,
    FETCH_COOLDOWN_DEFAULT,
    FETCH_POLL_INTERVAL_DEFAULT,
    JOB_CLEANER_INTERVAL,
    JOB_TIMEOUT_DEFAULT,
    LEADER_TRUST_MARGIN,
    LEADER_TTL,
    MAX_ATTEMPTS_DEFAULT,
    NOTIFICATION_CLEANER_INTERVAL,
    NOTIFICATION_RETENTION,
    QUEUE_CLEANER_INTERVAL,
    QUEUE_RETENTION,
    QUEUE_SETTINGS_POLL_INTERVAL,
    REINDEX_DEFAULT_INDEXES,
    RESCUER_INTERVAL,
    SCHEDULER_INTERVAL,
    STUCK_THRESHOLD,
    WORKFLOW_PROMOTER_INTERVAL,
)
from river_protocol.cron import Schedule
from river_protocol.errors import LeaderElectionDisabledError, ValidationError
from river_protocol.flow_control import ConcurrencyConfig, FlowControl, RateLimit
from river_protocol.flow_intents import SetQueueLimits
from river_protocol.frozen import quick_init
from river_protocol.golang.encoding_json import decode_args, encode_args
from river_protocol.intents import InsertJobs, InsertParams, Intent, Notify
from river_protocol.job import JobRow
from river_protocol.leadership import Leadership, PeriodicJob, constructed_args, to_schedule
from river_protocol.machines import maintenance as mnt
from river_protocol.machines import periodic as periodic_machine
from river_protocol.machines.base import Event, Rng
from river_protocol.machines.completer import Completer, Completion, CompletionReason, Submit
from river_protocol.machines.elector import Elector
from river_protocol.machines.notifications import (
    TOPIC_CONTROL,
    TOPIC_INSERT,
    parse_control,
    parse_insert,
)
from river_protocol.machines.producer import (
    ControlMessage,
    InsertNotification,
    Producer,
    ProducerConfig,
    QueueEventKind,
    Start,
)
from river_protocol.machines.throttle import InsertNotifyThrottle
from river_protocol.machines.workflow_promoter import WorkflowPromoter
from river_protocol.machines.workflow_sweeper import WorkflowSweeper, workflow_sweeper
from river_protocol.middleware import replace_insert_jobs
from river_protocol.options import (
    InsertOpts,
    resolve_insert_params,
    validate_max_attempts,
    validate_queue_name,
)
from river_protocol.outcomes import Failed, Outcome, undecodable_failure, unknown_kind_failure
from river_protocol.retry import DefaultRetryPolicy, RetryPolicy
from river_protocol.run_log import JobLogLevels, RunLogLine, run_log_line
from river_protocol.states import JobState
from river_protocol.unique import UniqueKeyRules, parse_unique_key_rules, unique_fields_of
from river_protocol.work import (
    CancelCause,
    Finish,
    effective_timeout,
    error_text,
    finish_job,
    plain_success,
    plain_success_update,
)
from river_protocol.workers import WorkerEntry, Workers
from river_protocol.workflow import Workflow, workflow_items

# ---------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """One queue this client works (Go's ``QueueConfig``)."""

    max_workers: int = 100
    fetch_cooldown: timedelta = FETCH_COOLDOWN_DEFAULT
    fetch_poll_interval: timedelta = FETCH_POLL_INTERVAL_DEFAULT
    # Postgres: claims commit without waiting for their WAL flush (ClaimJobs.asynchronous_commit);
    # off, as River. See docs/guides/client.md, Low latency.
    async_claim_commit: bool = False
    # Flow control (docs/guides/flow-control.md): limits exact across every client on the
    # database, and sequences; any of them switches the queue to the limited claim.
    concurrency: ConcurrencyConfig | None = None
    rate_limit: RateLimit | None = None
    sequences: bool = False

    def __post_init__(self) -> None:
        if self.concurrency is not None and not isinstance(self.concurrency, ConcurrencyConfig):
            raise ValidationError(f"concurrency must be a ConcurrencyConfig, got {self.concurrency!r}")
        if self.rate_limit is not None and not isinstance(self.rate_limit, RateLimit):
            raise ValidationError(f"rate_limit must be a RateLimit, got {self.rate_limit!r}")
        if not isinstance(self.sequences, bool):
            raise ValidationError(f"sequences must be a bool, got {self.sequences!r}")

    @property
    def flow(self) -> FlowControl | None:
        """The queue's flow control, None when it has none (today's claim, unchanged)."""
        flow = FlowControl(self.concurrency, self.rate_limit, self.sequences)
        return flow if flow.enabled else None


Retention = timedelta | int | None


def _disabled(retention: Retention) -> bool:
    return retention is None or (isinstance(retention, int) and retention < 0) or (
        isinstance(retention, timedelta) and retention < timedelta(0)
    )


@dataclass(frozen=True, slots=True)
class MaintenanceConfig:
    """Leader-run maintenance settings (§11).

    A retention of ``-1`` (Go's value), any negative timedelta or ``None``
    keeps that state's jobs forever. ``rescue_after=None`` is River's default:
    1 h, or job timeout + 1 h when the client's job timeout differs from the
    default. Intervals are River's; tests shorten them. ``stagger_start``
    spreads service starts over U[0, 1 s] as River does.
    ``workflow_promoter_interval`` is the workflow sweeper's, this project's
    service run by whichever Python client holds its lease, whoever leads River
    (``river_protocol.machines.workflow_sweeper``).
    """

    cancelled_retention: Retention = CANCELLED_RETENTION_DEFAULT
    completed_retention: Retention = COMPLETED_RETENTION_DEFAULT
    discarded_retention: Retention = DISCARDED_RETENTION_DEFAULT
    rescue_after: timedelta | None = None
    job_cleaner_interval: timedelta = JOB_CLEANER_INTERVAL
    rescuer_interval: timedelta = RESCUER_INTERVAL
    scheduler_interval: timedelta = SCHEDULER_INTERVAL
    queue_cleaner_interval: timedelta = QUEUE_CLEANER_INTERVAL
    queue_retention: timedelta = QUEUE_RETENTION
    notification_cleaner_interval: timedelta = NOTIFICATION_CLEANER_INTERVAL
    notification_retention: timedelta = NOTIFICATION_RETENTION
    workflow_promoter_interval: timedelta = WORKFLOW_PROMOTER_INTERVAL
    reindexer: bool = True
    reindexer_schedule: Schedule | str | None = None  # None: daily at 00:00 UTC
    reindexer_indexes: tuple[str, ...] = REINDEX_DEFAULT_INDEXES
    stagger_start: bool = True

    def __post_init__(self) -> None:
        for name in ("cancelled_retention", "completed_retention", "discarded_retention"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (value is None or isinstance(value, timedelta | int)):
                raise ValidationError(f"{name} must be a timedelta, -1 or None, got {value!r}")
            if isinstance(value, int) and value != -1:
                raise ValidationError(f"{name}: the only integer accepted is -1 (keep forever), got {value}")
        for name in ("job_cleaner_interval", "rescuer_interval", "scheduler_interval",
                     "queue_cleaner_interval", "notification_cleaner_interval", "workflow_promoter_interval"):
            if getattr(self, name) <= timedelta(0):
                raise ValidationError(f"{name} must be positive, got {getattr(self, name)}")
        if self.rescue_after is not None and self.rescue_after <= timedelta(0):
            raise ValidationError(f"rescue_after must be positive, got {self.rescue_after}")
        if isinstance(self.reindexer_schedule, str):
            object.__setattr__(self, "reindexer_schedule", to_schedule(self.reindexer_schedule))

    def retention(self, name: str) -> timedelta:
        """The job cleaner's value for one state: negative = keep forever."""
        value: Retention = getattr(self, f"{name}_retention")
        if _disabled(value) or not isinstance(value, timedelta):
            return timedelta(microseconds=-1)
        return value


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    """Election timing (§10); ``ttl=None`` is River's interval + 10 s (15 s by default)."""

    interval: timedelta = ELECT_INTERVAL
    jitter: timedelta = ELECT_INTERVAL_JITTER
    ttl: timedelta | None = None

    def __post_init__(self) -> None:
        if self.interval <= timedelta(0) or self.jitter < timedelta(0):
            raise ValidationError(
                f"elect interval must be positive and jitter >= 0, got {self.interval}/{self.jitter}"
            )
        if self.effective_ttl <= self.interval + LEADER_TRUST_MARGIN:
            raise ValidationError(
                f"leader TTL {self.effective_ttl} must exceed the elect interval plus {LEADER_TRUST_MARGIN}"
            )

    @property
    def effective_ttl(self) -> timedelta:
        if self.ttl is not None:
            return self.ttl
        return self.interval + (LEADER_TTL - ELECT_INTERVAL)


@dataclass(frozen=True, slots=True)
class ClientConfig:
    client_id: str
    dialect: str  # "postgres" | "sqlite"
    queues: Mapping[str, QueueConfig] = field(default_factory=dict)
    job_timeout: timedelta = JOB_TIMEOUT_DEFAULT
    max_attempts: int = MAX_ATTEMPTS_DEFAULT
    fetch_cooldown: timedelta = FETCH_COOLDOWN_DEFAULT  # the insert-notification throttle window
    notifications: bool = True
    retry_policy: RetryPolicy | None = None
    skip_unknown_job_check: bool = False
    stuck_threshold: timedelta = STUCK_THRESHOLD
    maintenance: MaintenanceConfig = field(default_factory=MaintenanceConfig)
    leader_election: LeaderElectionConfig | None = field(default_factory=LeaderElectionConfig)
    fetch_only_known_kinds: bool = False
    tag_filter: TagFilter | None = None
    # Write completions as soon as the completer is idle (group commit) instead of Go's
    # 50 ms tick batching; rows are identical, latency at low load drops from ~250 ms.
    group_commit: bool = True
    # The River release whose unique keys inserts reproduce; keep v0.43 while
    # v0.43 Go clients insert unique jobs into the same database.
    unique_key_rules: UniqueKeyRules = UniqueKeyRules.V0_43
    # The level of the log line of each run that does not complete (river_protocol.run_log).
    job_log_levels: JobLogLevels = field(default_factory=JobLogLevels)

    def __post_init__(self) -> None:
        if not self.client_id or len(self.client_id) > CLIENT_ID_MAX_LEN:
            raise ValidationError(
                f"client_id must be 1 to {CLIENT_ID_MAX_LEN} characters, got {self.client_id!r}"
            )
        if self.dialect not in ("postgres", "sqlite"):
            raise ValidationError(f"dialect must be 'postgres' or 'sqlite', got {self.dialect!r}")
        object.__setattr__(self, "unique_key_rules", parse_unique_key_rules(self.unique_key_rules))
        validate_max_attempts(self.max_attempts)
        if self.fetch_cooldown <= timedelta(0):
            raise ValidationError(f"fetch_cooldown must be positive, got {self.fetch_cooldown}")
        for name, queue in self.queues.items():
            validate_queue_name(name)
            if not isinstance(queue, QueueConfig):
                raise ValidationError(f"queue {name!r}: expected a QueueConfig, got {type(queue).__name__}")


_HOST_MAX_BYTES = 60


def default_client_id(hostname: str, now: datetime) -> str:
    """Go's generated ID: host (dots → ``_``, ≤ 60 bytes) + ``_`` + UTC start time (§15)."""
    host = (hostname or "unknown_host").replace(".", "_")
    host = host.encode()[:_HOST_MAX_BYTES].decode(errors="ignore")
    return f"{host}_{now.astimezone(UTC).strftime('%Y_%m_%dT%H_%M_%S_%f')}"


# ---------------------------------------------------------------- public values


@dataclass(frozen=True, slots=True)
class InsertManyParams:
    """One item of ``insert_many``: args plus their own options."""

    args: Any
    opts: InsertOpts | None = None


class EventKind(enum.Enum):
    """Client events, named as River names them."""

    JOB_COMPLETED = "job_completed"
    JOB_FAILED = "job_failed"
    JOB_CANCELLED = "job_cancelled"
    JOB_SNOOZED = "job_snoozed"
    JOB_INTERRUPTED = "job_interrupted"
    QUEUE_PAUSED = "queue_paused"
    QUEUE_RESUMED = "queue_resumed"
    QUEUE_METADATA_CHANGED = "queue_metadata_changed"


EVENT_FOR_REASON = {
    CompletionReason.COMPLETED: EventKind.JOB_COMPLETED,
    CompletionReason.FAILED: EventKind.JOB_FAILED,
    CompletionReason.CANCELLED: EventKind.JOB_CANCELLED,
    CompletionReason.SNOOZED: EventKind.JOB_SNOOZED,
    CompletionReason.INTERRUPTED: EventKind.JOB_INTERRUPTED,
}
# Persisted states that say what happened whatever the worker asked for (River 0.44.0):
# a job completed in the worker's own transaction, or cancelled remotely meanwhile.
_EVENT_FOR_PERSISTED_STATE = {
    JobState.COMPLETED: EventKind.JOB_COMPLETED,
    JobState.CANCELLED: EventKind.JOB_CANCELLED,
}


def event_kind_for(reason: CompletionReason, persisted: JobState) -> EventKind:
    """The event for a recorded outcome: the persisted state when it is unambiguous, else the reason.

    A worker that returns an error after ``complete_in_tx`` committed leaves a
    completed row (``job_completed``, not ``job_failed``); a retry or snooze
    of a job cancelled remotely leaves a cancelled row (``job_cancelled``).
    Other states (available, retryable, scheduled, discarded) can follow
    several reasons, so the reason decides.
    """
    return _EVENT_FOR_PERSISTED_STATE.get(persisted, EVENT_FOR_REASON[reason])


# A finalized row someone else wrote while this client's worker ran (an operator, another
# client): the event names what the row now says, as River Go's does (a discard is a failure).
_EVENT_FOR_FINALIZED_ELSEWHERE = {
    JobState.COMPLETED: EventKind.JOB_COMPLETED,
    JobState.CANCELLED: EventKind.JOB_CANCELLED,
    JobState.DISCARDED: EventKind.JOB_FAILED,
}


def event_kind_for_completion(persisted: CompletionReason | None, stored: JobState) -> EventKind | None:
    """The event of one completion: the recorded outcome's, or, when this client's outcome was
    not recorded, the finalized state the row was given meanwhile; None (no event) when the row
    was moved elsewhere and is not finalized (rescued, retried), since nothing ended."""
    if persisted is not None:
        return _EVENT_FOR_REASON_VALUE[persisted._value_]
    return _EVENT_FOR_FINALIZED_ELSEWHERE.get(stored)


# EVENT_FOR_REASON by the reasons' values: a str hashes in C, an Enum member's __hash__ is Python
# code, run for every completion's event.
_EVENT_FOR_REASON_VALUE = {reason._value_: kind for reason, kind in EVENT_FOR_REASON.items()}


EVENT_FOR_QUEUE = {
    QueueEventKind.PAUSED: EventKind.QUEUE_PAUSED,
    QueueEventKind.RESUMED: EventKind.QUEUE_RESUMED,
    QueueEventKind.METADATA_CHANGED: EventKind.QUEUE_METADATA_CHANGED,
}


def parse_event_kinds(kinds: Iterable[EventKind | str] | None) -> frozenset[EventKind]:
    """Subscription filter: ``None`` = every kind; names may be given as strings."""
    if kinds is None:
        return frozenset(EventKind)
    if isinstance(kinds, str | EventKind):
        kinds = (kinds,)
    out: set[EventKind] = set()
    for kind in kinds:
        try:
            out.add(kind if isinstance(kind, EventKind) else EventKind(kind))
        except ValueError:
            known = ", ".join(k.value for k in EventKind)
            raise ValidationError(f"unknown event kind {kind!r}; known kinds: {known}") from None
    if not out:
        raise ValidationError("subscribe needs at least one event kind (or None for all)")
    return frozenset(out)


# ---------------------------------------------------------------- plans handed to the driver


@dataclass(frozen=True, slots=True)
class InsertPlan:
    """Intents to run in ONE transaction, in order, and the queues to poke after commit."""

    insert: InsertJobs
    notify: Notify | None
    available_queues: tuple[str, ...]

    @property
    def intents(self) -> tuple[Intent, ...]:
        return (self.insert,) if self.notify is None else (self.insert, self.notify)

    def with_jobs(self, jobs: Sequence[InsertParams]) -> InsertPlan:
        """This plan with the rows insert middleware passed on (checked by ``replace_insert_jobs``)."""
        return dataclasses.replace(self, insert=replace_insert_jobs(self.insert, jobs))


@quick_init
@dataclass(frozen=True, slots=True)
class JobPlan:
    """How to run one claimed job: its worker and args, or the outcome to record without running."""

    job: JobRow
    worker: WorkerEntry | None
    args: Any
    timeout: timedelta | None
    immediate: Outcome | None  # unknown kind or undecodable args: record this, run nothing
    args_decoded: bool


_NONCE_BITS = 64


# ---------------------------------------------------------------- the core


class ClientCore:
    def __init__(self, config: ClientConfig, workers: Workers | None, rng: Rng) -> None:
        self.config = config
        self.workers = workers if workers is not None else Workers()
        self._rng = rng
        self._live_queues: dict[str, QueueConfig] = dict(config.queues)
        self._throttle = InsertNotifyThrottle(config.fetch_cooldown)
        self._breakers: dict[str, mnt.BatchSizeBreaker] = {}
        # (the config it was worked out for, the timeout of a job whose worker sets none)
        self._default_timeout: tuple[ClientConfig | None, timedelta | None] = (None, None)
        # TESTING ONLY: the unit of the completer's retry back-off (``Completer(backoff_unit=)``),
        # shortened by tests of the retry paths; read when the completer is made (at start).
        self.completer_backoff_unit = COMPLETER_BACKOFF_UNIT
        # TESTING ONLY: how often producers poll their queue's settings (and, poll-only, the
        # control messages); 2 s as River, shortened by tests that wait out a poll.
        self.settings_poll_interval = QUEUE_SETTINGS_POLL_INTERVAL
        if config.queues and not len(self.workers):
            raise ValidationError("a client that works queues needs workers (pass workers=Workers(...))")

    # -- machines ---------------------------------------------------------

    @property
    def works_jobs(self) -> bool:
        return bool(self.config.queues)

    def make_producers(self) -> dict[str, Producer]:
        return {name: self.make_producer(name, q) for name, q in self._live_queues.items()}

    def reconfigure(
        self,
        *,
        queues: Mapping[str, QueueConfig] | None = None,
        tag_filter: TagFilter | None = None,
    ) -> None:
        """Change what a client that has not started yet works (``river work`` overrides).

        The new configuration is validated like the original one.
        """
        changes: dict[str, Any] = {}
        if queues is not None:
            changes["queues"] = dict(queues)
        if tag_filter is not None:
            changes["tag_filter"] = tag_filter
        config = dataclasses.replace(self.config, **changes)
        if config.queues and not len(self.workers):
            raise ValidationError("a client that works queues needs workers (pass workers=Workers(...))")
        self.config = config
        self._live_queues = dict(config.queues)

    @property
    def queues(self) -> Mapping[str, QueueConfig]:
        """The queues worked now: the configured ones plus runtime additions, minus removals."""
        return self._live_queues

    def add_queue(self, name: str, q: QueueConfig) -> Producer:
        """Start working ``name`` at runtime (Go's ``QueueBundle.Add``): its new producer."""
        from river_protocol.admin import QueueAlreadyAddedError

        if not self.works_jobs:
            raise ValidationError("client is not configured to execute jobs (no queues): cannot add a queue")
        if not isinstance(q, QueueConfig):
            raise ValidationError(f"queue {name!r}: expected a QueueConfig, got {type(q).__name__}")
        if name in self.queues:
            raise QueueAlreadyAddedError(f"queue {name!r} is already worked by this client")
        producer = self.make_producer(name, q)
        self._live_queues[name] = q
        return producer

    def remove_queue(self, name: str) -> None:
        """Stop routing notifications to ``name`` (its producer is stopped by the driver)."""
        from river_protocol.admin import QueueNotAddedError

        if not self.works_jobs:
            raise ValidationError(
                "client is not configured to execute jobs (no queues): cannot remove a queue"
            )
        if name not in self.queues:
            raise QueueNotAddedError(f"queue {name!r} is not worked by this client")
        del self._live_queues[name]

    def make_producer(self, name: str, q: QueueConfig) -> Producer:
        """A producer for queue ``name`` (also for queues added to a running client)."""
        validate_queue_name(name)
        claim = claim_filter(
            known_kinds=self.workers.kinds, fetch_only_known_kinds=self.config.fetch_only_known_kinds,
            tag_filter=self.config.tag_filter,
        )
        return Producer(
            ProducerConfig(
                queue=name, client_id=self.config.client_id, max_workers=q.max_workers,
                fetch_cooldown=q.fetch_cooldown, fetch_poll_interval=q.fetch_poll_interval,
                poll_only=not self.config.notifications, kinds=claim.kinds, tags_any=claim.tags_any,
                untagged_only=claim.untagged_only, async_claim_commit=q.async_claim_commit,
                settings_poll_interval=self.settings_poll_interval, flow=q.flow,
            ),
            self._rng,
        )

    def flow_control_setup(
        self, queues: Mapping[str, QueueConfig] | None = None
    ) -> tuple[SetQueueLimits, ...]:
        """What a client runs before its producers start: each limited queue's configured limits,
        written where every client's claim reads them. It fails with a ``MigrationError`` naming
        the command when the ``python`` migration line is not applied."""
        out = []
        for name, q in (self.queues if queues is None else queues).items():
            flow = q.flow
            if flow is not None:
                out.append(SetQueueLimits(
                    name, flow.limits, concurrency_partition=flow.concurrency_partition,
                    rate_partition=flow.rate_partition))
        return tuple(out)

    def limited_queues_freed(self, completions: Iterable[Completion]) -> tuple[str, ...]:
        """Queues with flow control among those of ``completions`` (just written): a slot of
        their limits is free now, on every client, so this client's producer fetches again (the
        fetch when the job ended may have run before its completion committed)."""
        limited = {name for name, q in self._live_queues.items()
                   if q.concurrency is not None or q.rate_limit is not None or q.sequences}
        if not limited:
            return ()
        return tuple(dict.fromkeys(c.job.queue for c in completions if c.job.queue in limited))

    def listener_unavailable(self) -> None:
        """The listener was probed and hears nothing (LISTEN behind a transaction pooler): from
        now on this client runs as a poll-only one. Producers made earlier learn it from
        ``producer_start()``, leadership made later from the configuration; a client's own
        control messages and resign requests are then delivered locally."""
        self.config = dataclasses.replace(self.config, notifications=False)

    def producer_start(self) -> Start:
        """The event that starts a producer, poll-only once ``listener_unavailable``."""
        return Start(poll_only=not self.config.notifications)

    def make_completer(self) -> Completer:
        # Under flow control a finished job holds its partition's slot, on every client, until
        # its completion is written: completions then go out as soon as the completer is idle
        # (group commit) rather than on River's 250 ms batching timer.
        limited = any(q.flow is not None for q in self.queues.values())
        return Completer(self._rng, flush_when_idle=self.config.group_commit or limited,
                         backoff_unit=self.completer_backoff_unit)

    # -- leadership and leader-only machines -------------------------------

    @property
    def runs_elector(self) -> bool:
        """Only clients that work jobs elect (§10); insert-only clients never touch river_leader."""
        return self.works_jobs and self.config.leader_election is not None

    def make_leadership(self) -> Leadership:
        election = self.config.leader_election
        if election is None:
            raise ValidationError("leader election is disabled for this client")
        elector = Elector(
            self.config.client_id, self._rng, ttl=election.effective_ttl,
            elect_interval=election.interval, elect_jitter=election.jitter,
        )
        return Leadership(elector, self._rng, deliver_request_locally=not self.config.notifications)

    def rescue_after(self) -> timedelta:
        explicit_timeout = None if self.config.job_timeout == JOB_TIMEOUT_DEFAULT else self.config.job_timeout
        return mnt.rescue_after_for(explicit_timeout, self.config.maintenance.rescue_after)

    def _rescue_workers(self) -> dict[str, mnt.WorkerInfo]:
        def valid(entry: WorkerEntry) -> Any:
            def check(job: JobRow) -> bool:
                try:
                    entry.decode(job)
                except (ValidationError, TypeError, ValueError):
                    return False
                return True
            return check

        return {
            kind: mnt.WorkerInfo(timeout_for=entry.timeout_for, next_retry=entry.next_retry_for,
                                 args_valid=valid(entry))
            for kind in self.workers
            if (entry := self.workers.get(kind)) is not None
        }

    def make_maintenance_services(self) -> dict[str, mnt.MaintenanceService]:
        """Fresh service machines for one term; each keeps its batch-size breaker for the client's life."""
        m = self.config.maintenance
        throttle = InsertNotifyThrottle(self.config.fetch_cooldown)
        policy = self.config.retry_policy or DefaultRetryPolicy()
        cleaner = mnt.JobCleanerJob(
            cancelled_retention=m.retention("cancelled"), completed_retention=m.retention("completed"),
            discarded_retention=m.retention("discarded"),
        )
        stagger = m.stagger_start
        services = [
            mnt.job_cleaner(self._rng, cleaner, interval=m.job_cleaner_interval, stagger=stagger),
            mnt.job_rescuer(self._rng, self._rescue_workers(), policy, job_timeout=self.config.job_timeout,
                            rescue_after=self.rescue_after(), interval=m.rescuer_interval, stagger=stagger),
            mnt.job_scheduler(self._rng, throttle, interval=m.scheduler_interval, stagger=stagger),
            mnt.queue_cleaner(self._rng, m.queue_retention, interval=m.queue_cleaner_interval,
                              stagger=stagger),
        ]
        if self.config.dialect == "sqlite":
            services.append(mnt.notification_cleaner(
                self._rng, m.notification_retention, interval=m.notification_cleaner_interval,
                stagger=stagger,
            ))
        if m.reindexer:
            schedule = m.reindexer_schedule
            assert schedule is None or not isinstance(schedule, str)  # parsed in __post_init__
            services.append(mnt.reindexer(self._rng, m.reindexer_indexes, schedule))
        for service in services:
            service.breaker = self._breakers.setdefault(service.name, service.breaker)
        return {service.name: service for service in services}

    @property
    def runs_workflow_sweeper(self) -> bool:
        """Every client that works jobs runs the workflow sweeper, leader election or not: which
        one sweeps is decided by its own lease (``river_protocol.machines.workflow_sweeper``)."""
        return self.works_jobs

    def make_workflow_sweeper(self) -> WorkflowSweeper:
        """The service that promotes dependents of tasks finalized by any client, Go included,
        while this client holds the sweeper's lease (its breaker kept for the client's life)."""
        sweeper = workflow_sweeper(
            self._rng, self.config.client_id, elects=self.config.leader_election is not None,
            throttle=InsertNotifyThrottle(self.config.fetch_cooldown),
            interval=self.config.maintenance.workflow_promoter_interval,
            stagger=self.config.maintenance.stagger_start,
        )
        sweeper.breaker = self._breakers.setdefault(sweeper.name, sweeper.breaker)
        return sweeper

    def make_workflow_promoter(self) -> WorkflowPromoter:
        """The machine that promotes dependents right after this client's own completions."""
        announce = self.config.dialect == "postgres" and self.config.notifications
        return WorkflowPromoter(self.config.fetch_cooldown, announce=announce)

    def make_periodic_enqueuer(
        self, definitions: tuple[periodic_machine.PeriodicJob, ...]
    ) -> periodic_machine.PeriodicEnqueuer:
        throttle = InsertNotifyThrottle(self.config.fetch_cooldown)
        return periodic_machine.PeriodicEnqueuer(self._rng, throttle, definitions)

    def periodic_definition(self, job: PeriodicJob) -> periodic_machine.PeriodicJob:
        """The enqueuer's definition for a user's job: its constructor resolved like ``insert``.

        A bad return value (unknown kind, wrong type) raises inside the constructor, which the
        enqueuer reports and skips for that run only. A client that never leads refuses periodic
        jobs at once (``LeaderElectionDisabledError``): only a leader enqueues them.
        """
        if self.config.leader_election is None:
            raise LeaderElectionDisabledError(
                f"periodic job {job.id or ''!r} needs leader election, which is disabled on "
                "this client: only the leader enqueues periodic jobs, so it would never run (enable "
                "leader election here, or register it on a client that takes part in elections)"
            )

        def build(now: datetime) -> InsertParams | None:
            produced = constructed_args(job)
            if produced is None:
                return None
            return self._resolve(InsertManyParams(*produced), now)

        return periodic_machine.PeriodicJob(
            schedule=job.schedule, constructor=build, id=job.id or "", run_on_start=job.run_on_start,
            pass_now=True,
        )

    # -- insert -------------------------------------------------------------

    def plan_insert(self, items: Sequence[Any], now: datetime) -> InsertPlan:
        """Resolve ``items`` (args or ``InsertManyParams``) into one insert with its notification."""
        if not items:
            raise ValidationError("no jobs to insert")
        params = tuple(self._resolve(item, now) for item in items)
        nonce = self._nonce() if self.config.dialect == "sqlite" else ""
        notify = self._throttle.notify_for_insert(params, now)
        available = tuple(dict.fromkeys(p.queue for p in params if p.state is JobState.AVAILABLE))
        return InsertPlan(InsertJobs(jobs=params, nonce=nonce), notify, available)

    def plan_workflow(self, wf: Workflow, now: datetime) -> tuple[str, tuple[str, ...], InsertPlan]:
        """``wf`` validated into one insert: (its id, task names in insert order, the plan)."""
        if not isinstance(wf, Workflow):
            raise ValidationError(f"insert_workflow takes a Workflow, got {type(wf).__name__}")
        workflow_id = wf.id or self.new_workflow_id(now)
        items = workflow_items(wf, workflow_id)
        plan = self.plan_insert([InsertManyParams(i.args, i.opts) for i in items], now)
        return workflow_id, tuple(i.task for i in items), plan

    def new_workflow_id(self, now: datetime) -> str:
        """A fresh workflow id: the UTC time (so ids sort by creation) and 64 random bits."""
        return f"{now.astimezone(UTC):%Y%m%dT%H%M%S}_{self._nonce()}"

    def _resolve(self, item: Any, now: datetime) -> InsertParams:
        args, opts = (item.args, item.opts) if isinstance(item, InsertManyParams) else (item, None)
        if opts is not None and not isinstance(opts, InsertOpts):
            raise ValidationError(f"insert options must be InsertOpts, got {type(opts).__name__}")
        kind = kind_of(args)
        if len(self.workers) and not self.config.skip_unknown_job_check and kind not in self.workers:
            raise ValidationError(f"job kind {kind!r} is not registered in the client's Workers bundle")
        args_opts_fn = getattr(args, "insert_opts", None)
        args_opts = args_opts_fn() if callable(args_opts_fn) else None
        if args_opts is not None and not isinstance(args_opts, InsertOpts):
            raise ValidationError(f"{type(args).__qualname__}.insert_opts() must return InsertOpts")
        return resolve_insert_params(
            kind, encode_args(args), insert_opts=opts, args_opts=args_opts,
            client_max_attempts=self.config.max_attempts,
            unique_fields=unique_fields_of(type(args)), now=now,
            unique_key_rules=self.config.unique_key_rules,
        )

    def _nonce(self) -> str:
        # Two draws: a float carries only 53 random bits.
        high = int(self._rng.random() * (1 << 32))
        low = int(self._rng.random() * (1 << 32))
        return f"{(high << 32) | low:0{_NONCE_BITS // 4}x}"

    # -- notifications ------------------------------------------------------

    def route_notification(self, topic: str, payload: str) -> tuple[tuple[str, Event], ...]:
        """The (queue, producer event) pairs a notification turns into; bad payloads give none."""
        if topic == TOPIC_INSERT:
            insert = parse_insert(payload)
            if insert is None or insert.queue not in self.queues:
                return ()
            return ((insert.queue, InsertNotification(insert.queue)),)
        if topic == TOPIC_CONTROL:
            control = parse_control(payload)
            if control is None:
                return ()
            return tuple((q, ControlMessage(control)) for q in self.queues if control.applies_to(q))
        return ()

    def route_own_control(
        self, payload: str, new_ack: Callable[[], Any]
    ) -> tuple[tuple[str, ControlMessage], ...]:
        """This client's own control message for each producer it applies to, with a fresh ack
        each (``new_ack()``) that the producer hands back once it has applied the message."""
        return tuple(
            (queue, ControlMessage(event.payload, new_ack()))
            for queue, event in self.route_notification(TOPIC_CONTROL, payload)
            if isinstance(event, ControlMessage)
        )

    # -- running jobs -------------------------------------------------------

    def plan_job(self, job: JobRow) -> JobPlan:
        """What to do with a claimed job (§7.1 steps 2-4)."""
        worker = self.workers.get(job.kind)
        if job.undecodable is not None:
            # Failed like args that don't decode: an errors[] entry, retries, then discard.
            return JobPlan(job, worker, None, None, undecodable_failure(job.undecodable), False)
        if worker is None:
            return JobPlan(job, None, None, None, unknown_kind_failure(job.kind), False)
        try:
            args: Any = decode_args(worker.args_type, job.encoded_args)  # worker.decode inlined
        except (ValidationError, TypeError, ValueError) as exc:
            return JobPlan(job, worker, None, None, Failed(error_text(exc) or ""), False)
        if worker.timeout_for is None:  # the client's timeout, the same for every such job
            config, timeout = self._default_timeout
            if config is not self.config:
                timeout = effective_timeout(None, self.config.job_timeout)
                self._default_timeout = (self.config, timeout)
        else:
            timeout = effective_timeout(worker.timeout(job), self.config.job_timeout)
        return JobPlan(job, worker, args, timeout, None, True)

    def finish_job(
        self,
        plan: JobPlan,
        outcome: Outcome,
        *,
        now: datetime,
        started_at: datetime,
        cancel_cause: CancelCause | None = None,
        error_handler_cancel: bool = False,
        metadata_updates: Mapping[str, Any] | None = None,
    ) -> Finish:
        """The completer request for a finished run; draws the retry jitter from the core's rng."""
        rand = self._rng.random()  # drawn for every run, successes too, as it always was
        quick = plain_success(plan.job, outcome, now, metadata_updates)
        if quick is not None:
            return quick
        next_retry = None
        if plan.args_decoded and plan.worker is not None:
            next_retry = plan.worker.next_retry(plan.job)
        return finish_job(
            plan.job, outcome, now=now, started_at=started_at, cancel_cause=cancel_cause,
            retry_policy=self.config.retry_policy, rand=rand,
            worker_next_retry=next_retry, error_handler_cancel=error_handler_cancel,
            metadata_updates=metadata_updates,
        )

    def finish_submit(
        self,
        plan: JobPlan,
        outcome: Outcome,
        *,
        now: datetime,
        started_at: datetime,
        cancel_cause: CancelCause | None = None,
        error_handler_cancel: bool = False,
        metadata_updates: Mapping[str, Any] | None = None,
        context: Any = None,
    ) -> Submit:
        """``finish_job``'s request as the completer's ``Submit`` (``context`` handed back with its
        completion). A plain success, most runs, builds its update and the Submit and nothing else
        (no ``Finish`` only to be unpacked); the rng draw and every answer are ``finish_job``'s."""
        update = plain_success_update(plan.job, outcome, now, metadata_updates)
        if update is not None:
            self._rng.random()  # drawn for every run, successes too, as finish_job draws it
            return Submit(update, CompletionReason.COMPLETED, context)
        finish = self.finish_job(
            plan, outcome, now=now, started_at=started_at, cancel_cause=cancel_cause,
            error_handler_cancel=error_handler_cancel, metadata_updates=metadata_updates,
        )
        return Submit(finish.update, finish.reason, context)

    def run_log_line(
        self,
        plan: JobPlan,
        outcome: Outcome,
        submit: Submit,
        *,
        cancel_cause: CancelCause | None,
        error_handler_cancel: bool,
        has_exception: bool,
    ) -> RunLogLine | None:
        """The log line of a run that did not complete (``river_protocol.run_log``), from the
        completer request ``finish_submit`` made of it; None for a success."""
        update = submit.update
        return run_log_line(
            plan.job, outcome, reason=submit.reason, state=update.state, scheduled_at=update.scheduled_at,
            worker_known=plan.worker is not None, args_decoded=plan.args_decoded,
            cancel_cause=cancel_cause, error_handler_cancel=error_handler_cancel,
            has_exception=has_exception, levels=self.config.job_log_levels,
        )

    def stuck_after(self, timeout: timedelta) -> timedelta:
        """When a job still running past its timeout counts as stuck (Go: timeout + 10 s)."""
        return timeout + self.config.stuck_threshold

