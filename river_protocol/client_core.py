"""The sans-IO half of a client: configuration, machines, inserts, routing, bookkeeping.

A driver (threads in ``river_sync``, tasks in ``river_trio``) owns one
``ClientCore`` and does only I/O around it: it runs the machines the core
builds, executes the intents the core plans, runs workers, and hands every
finished run back through ``finish_job``. Every rule about jobs lives here or
in the modules this one calls, so both drivers record identical rows.

The core is not thread-safe; a threaded driver serializes calls with a lock
(they are short and never block).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol.args import kind_of
from river_protocol.constants import (
    CANCELLED_RETENTION_DEFAULT,
    CLIENT_ID_MAX_LEN,
    COMPLETED_RETENTION_DEFAULT,
    DISCARDED_RETENTION_DEFAULT,
    FETCH_COOLDOWN_DEFAULT,
    FETCH_POLL_INTERVAL_DEFAULT,
    JOB_CLEANER_INTERVAL,
    JOB_TIMEOUT_DEFAULT,
    MAX_ATTEMPTS_DEFAULT,
    RESCUE_AFTER_DEFAULT,
    RESCUER_INTERVAL,
    SCHEDULER_INTERVAL,
    STUCK_THRESHOLD,
)
from river_protocol.errors import ValidationError
from river_protocol.gojson import encode_args
from river_protocol.intents import InsertJobs, InsertParams, Intent, Notify
from river_protocol.job import JobRow
from river_protocol.machines.base import Event, Rng
from river_protocol.machines.completer import Completer, CompletionReason
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
)
from river_protocol.machines.throttle import InsertNotifyThrottle
from river_protocol.options import (
    InsertOpts,
    resolve_insert_params,
    validate_max_attempts,
    validate_queue_name,
)
from river_protocol.outcomes import Failed, Outcome, unknown_kind_failure
from river_protocol.retry import RetryPolicy
from river_protocol.states import JobState
from river_protocol.unique import unique_fields_of
from river_protocol.work import CancelCause, Finish, effective_timeout, error_text, finish_job
from river_protocol.workers import WorkerEntry, Workers

# ---------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """One queue this client works (Go's ``QueueConfig``)."""

    max_workers: int = 100
    fetch_cooldown: timedelta = FETCH_COOLDOWN_DEFAULT
    fetch_poll_interval: timedelta = FETCH_POLL_INTERVAL_DEFAULT


@dataclass(frozen=True, slots=True)
class MaintenanceConfig:
    """Leader-run maintenance settings (§11); ``None`` retention keeps those jobs forever."""

    cancelled_retention: timedelta | None = CANCELLED_RETENTION_DEFAULT
    completed_retention: timedelta | None = COMPLETED_RETENTION_DEFAULT
    discarded_retention: timedelta | None = DISCARDED_RETENTION_DEFAULT
    rescue_after: timedelta = RESCUE_AFTER_DEFAULT
    job_cleaner_interval: timedelta = JOB_CLEANER_INTERVAL
    rescuer_interval: timedelta = RESCUER_INTERVAL
    scheduler_interval: timedelta = SCHEDULER_INTERVAL


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

    def __post_init__(self) -> None:
        if not self.client_id or len(self.client_id) > CLIENT_ID_MAX_LEN:
            raise ValidationError(
                f"client_id must be 1 to {CLIENT_ID_MAX_LEN} characters, got {self.client_id!r}"
            )
        if self.dialect not in ("postgres", "sqlite"):
            raise ValidationError(f"dialect must be 'postgres' or 'sqlite', got {self.dialect!r}")
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
        self._throttle = InsertNotifyThrottle(config.fetch_cooldown)
        if config.queues and not len(self.workers):
            raise ValidationError("a client that works queues needs workers (pass workers=Workers(...))")

    # -- machines ---------------------------------------------------------

    @property
    def works_jobs(self) -> bool:
        return bool(self.config.queues)

    def make_producers(self) -> dict[str, Producer]:
        return {
            name: Producer(
                ProducerConfig(
                    queue=name, client_id=self.config.client_id, max_workers=q.max_workers,
                    fetch_cooldown=q.fetch_cooldown, fetch_poll_interval=q.fetch_poll_interval,
                    poll_only=not self.config.notifications,
                ),
                self._rng,
            )
            for name, q in self.config.queues.items()
        }

    def make_completer(self) -> Completer:
        return Completer(self._rng)

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
            if insert is None or insert.queue not in self.config.queues:
                return ()
            return ((insert.queue, InsertNotification(insert.queue)),)
        if topic == TOPIC_CONTROL:
            control = parse_control(payload)
            if control is None:
                return ()
            return tuple((q, ControlMessage(control)) for q in self.config.queues if control.applies_to(q))
        return ()

    # -- running jobs -------------------------------------------------------

    def plan_job(self, job: JobRow) -> JobPlan:
        """What to do with a claimed job (§7.1 steps 2-4)."""
        worker = self.workers.get(job.kind)
        if worker is None:
            return JobPlan(job, None, None, None, unknown_kind_failure(job.kind), False)
        try:
            args = worker.decode(job)
        except (ValidationError, TypeError, ValueError) as exc:
            return JobPlan(job, worker, None, None, Failed(error_text(exc) or ""), False)
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
        next_retry = None
        if plan.args_decoded and plan.worker is not None:
            next_retry = plan.worker.next_retry(plan.job)
        return finish_job(
            plan.job, outcome, now=now, started_at=started_at, cancel_cause=cancel_cause,
            retry_policy=self.config.retry_policy, rand=self._rng.random(),
            worker_next_retry=next_retry, error_handler_cancel=error_handler_cancel,
            metadata_updates=metadata_updates,
        )

    def stuck_after(self, timeout: timedelta) -> timedelta:
        """When a job still running past its timeout counts as stuck (Go: timeout + 10 s)."""
        return timeout + self.config.stuck_threshold

