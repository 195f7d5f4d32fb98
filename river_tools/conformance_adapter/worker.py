"""The built-in worker, its barriers and counters, and the worker client's settings.

Every job the adapter inserts is of kind ``conformance_echo`` with the args
``{"behavior", "duration_ms", "message"}``; the worker does what
``behavior`` says (River's ``conformance/protocol`` names each one).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from river_db.resumable import ResumableSteps
from river_protocol.args import arg_field
from river_protocol.client_core import LeaderElectionConfig, MaintenanceConfig, QueueConfig
from river_protocol.job import JobRow
from river_protocol.leadership import PeriodicJob
from river_protocol.options import InsertOpts
from river_protocol.outcomes import Failed
from river_protocol.unique import UniqueOpts
from river_protocol.work import JobCancel, JobSnooze
from river_protocol.workers import Workers
from river_tools.conformance_adapter.jsonrpc import InvalidParams
from river_tools.conformance_adapter.params import StartParams

log = logging.getLogger(__name__)

KIND_ECHO = "conformance_echo"
KIND_ECHO_PEER = "conformance_echo_peer"
KIND_ECHO_RENAMED = "conformance_echo_renamed"
PERIODIC_JOB_ID = "conformance-periodic"
PERIODIC_MARKER_JOB_ID = "conformance-periodic-marker"
ERROR_RETRYABLE = "conformance retryable error"
DEFAULT_MAX_WORKERS = 4
FETCH_COOLDOWN = timedelta(milliseconds=1)  # River's adapter fetches again almost at once
_BARRIER_POLL = 0.01  # seconds between checks of the job's token while it waits on a barrier


@dataclass
class EchoArgs:
    kind: ClassVar[str] = KIND_ECHO
    behavior: str = arg_field(json="behavior", default="")
    duration_ms: int = arg_field(json="duration_ms", default=0)
    message: str = arg_field(json="message", default="")


@dataclass
class PeerArgs(EchoArgs):
    kind: ClassVar[str] = KIND_ECHO_PEER


@dataclass
class RenamedArgs(EchoArgs):
    kind: ClassVar[str] = KIND_ECHO_RENAMED


class Barriers:
    """Named barriers; one exists from its first use, a wait or a release, and stays released."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}

    def _get(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())

    def release(self, name: str) -> None:
        self._get(name).set()

    def wait(self, name: str, token: Any = None) -> bool:
        """Block until ``name`` is released (True) or ``token`` is cancelled (False)."""
        event = self._get(name)
        if token is None:
            event.wait()
            return True
        while not event.wait(_BARRIER_POLL):
            if token.is_set():
                return False
        return True


@dataclass
class Stats:
    """What a running client observed since it started (the ``stats`` result)."""

    cancelled_at_start: int = 0
    error_handler_calls: int = 0
    events: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def event(self, kind: str) -> None:
        with self._lock:
            self.events.append(kind)

    def snapshot(self, periodic_starts: int) -> dict[str, Any]:
        with self._lock:
            return {
                "cancelled_at_start": self.cancelled_at_start,
                "error_handler_calls": self.error_handler_calls,
                "events": list(self.events),
                "periodic_starts": periodic_starts,
            }


class EchoWorker:
    """Follows each job's ``behavior``."""

    def __init__(self, barriers: Barriers, stats: Stats) -> None:
        self._barriers = barriers
        self._stats = stats

    def work(self, ctx: Any, args: EchoArgs) -> Any:
        behavior = args.behavior
        if behavior in ("barrier_wait", "barrier_output"):
            if not self._barriers.wait(args.message, ctx.token):
                ctx.raise_if_cancelled()
            if behavior == "barrier_output":
                ctx.record_output({"race": "worker"})
            return None
        if behavior == "":
            return None
        if behavior == "cancel":
            raise JobCancel("cancelled by conformance worker")
        if behavior == "cooperative_cancel":
            if ctx.cancelled:
                self._stats.count("cancelled_at_start")
            ctx.token.wait()
            ctx.raise_if_cancelled()
            return None
        if behavior == "error":
            # Returned, as a Go worker returns its error: stored as the bare message, no trace.
            return Failed(ERROR_RETRYABLE)
        if behavior == "output":
            ctx.record_output({"message": args.message})
            return None
        if behavior == "resumable_cursor":
            return self._resumable_cursor(ctx)
        if behavior == "sleep":
            ctx.token.wait(args.duration_ms / 1000)
            ctx.raise_if_cancelled()
            return None
        if behavior == "snooze_once":
            if "snoozes" in ctx.job.metadata:
                return None
            raise JobSnooze(timedelta(milliseconds=max(args.duration_ms, 1)))
        raise ValueError(f"unknown behavior {behavior!r}")

    @staticmethod
    def _resumable_cursor(ctx: ResumableSteps) -> None:
        attempt = ctx.job.attempt

        @ctx.step("first")
        def _first() -> None:
            ctx.metadata_updates["first_attempt"] = attempt

        @ctx.step("second")
        def _second(cursor: Any) -> None:
            if attempt == 1:
                ctx.set_cursor("second", 7)
                raise RuntimeError("retry with cursor")
            if cursor != 7:
                raise RuntimeError(f"expected cursor 7, got {cursor!r}")
            ctx.metadata_updates["cursor_observed"] = cursor

        @ctx.step("third")
        def _third() -> None:
            if attempt == 2:
                raise RuntimeError("retry after consuming cursor")


@dataclass(frozen=True)
class FixedRetryPolicy:
    """Every failed attempt retried after ``delay``."""

    delay: timedelta

    def next_retry(self, job: JobRow, now: datetime, rand: float) -> datetime:
        return now + self.delay


def _ms(value: int) -> timedelta:
    return timedelta(milliseconds=value)


def _periodic_job(periodic_id: str, message: str, unique: UniqueOpts | None) -> PeriodicJob:
    opts = InsertOpts(metadata=b'{"periodic":true}', unique_opts=unique)
    return PeriodicJob(timedelta(hours=1), lambda: (EchoArgs(message=message), opts),
                       run_on_start=True, id=periodic_id)


_KIND_ARGS: dict[str, tuple[type[EchoArgs], ...]] = {
    KIND_ECHO: (EchoArgs,),
    KIND_ECHO_PEER: (PeerArgs,),
    # Renamed, keeping the old kind as an alias: registered under both.
    KIND_ECHO_RENAMED: (RenamedArgs, EchoArgs),
}


def workers_for(kinds: Sequence[str], worker: EchoWorker) -> Workers:
    workers = Workers()
    registered: set[type] = set()
    for kind in kinds or (KIND_ECHO,):
        if kind not in _KIND_ARGS:
            raise InvalidParams(f"unknown worker kind {kind!r}")
        for args_type in _KIND_ARGS[kind]:
            if args_type not in registered:
                registered.add(args_type)
                workers.job(args_type)(worker.work)
    return workers


def client_settings(params: StartParams, worker: EchoWorker, stats: Stats) -> dict[str, Any]:
    """Keyword arguments of ``river_sync.Client`` for ``start``'s params (database aside)."""
    if params.periodic_unique and not params.periodic_run_on_start:
        raise InvalidParams("periodic_unique requires periodic_run_on_start")
    tuning = params.tuning
    poll = _ms(params.fetch_poll_interval_ms) if params.fetch_poll_interval_ms > 0 else None
    poll_setting: dict[str, Any] = {"fetch_poll_interval": poll} if poll is not None else {}
    queue_config = QueueConfig(max_workers=params.max_workers or DEFAULT_MAX_WORKERS,
                               fetch_cooldown=FETCH_COOLDOWN, **poll_setting)
    maintenance: dict[str, Any] = {}
    if params.rescue_after_ms > 0:
        maintenance["rescue_after"] = _ms(params.rescue_after_ms)
    if tuning is not None and tuning.rescuer_interval_ms > 0:
        maintenance["rescuer_interval"] = _ms(tuning.rescuer_interval_ms)
    if tuning is not None and tuning.scheduler_interval_ms > 0:
        maintenance["scheduler_interval"] = _ms(tuning.scheduler_interval_ms)
    # With leader_election_disabled the client itself refuses periodic jobs
    # (LeaderElectionDisabledError, answered as rejected), as River Go does.
    election: bool | LeaderElectionConfig = True
    if not params.leader_election_disabled and tuning is not None and tuning.elect_interval_ms > 0:
        interval = _ms(tuning.elect_interval_ms)
        election = LeaderElectionConfig(interval=interval, jitter=min(interval, timedelta(milliseconds=10)))
    periodic: list[PeriodicJob] = []
    if params.periodic_run_on_start:
        unique = UniqueOpts(by_args=True, by_queue=True) if params.periodic_unique else None
        periodic.append(_periodic_job(PERIODIC_JOB_ID, "periodic run on start", unique))
        if params.periodic_unique:
            # After the unique one: its insertion shows the unique job's was attempted.
            periodic.append(_periodic_job(PERIODIC_MARKER_JOB_ID, "periodic marker", None))

    def cancelling_error_handler(job: JobRow, exc: BaseException) -> bool:
        stats.count("error_handler_calls")
        return True

    settings: dict[str, Any] = {
        "queues": {name: queue_config for name in (params.queues or ("default",))},
        "workers": workers_for(params.worker_kinds, worker),
        "client_id": params.client_id or None,
        "leader_election": election,
        "leader_election_disabled": params.leader_election_disabled,
        "fetch_only_known_kinds": params.fetch_only_known_kinds,
        "periodic_jobs": periodic,
        "maintenance": MaintenanceConfig(**maintenance),
        "notifications": not params.poll_only,
        "fetch_cooldown": FETCH_COOLDOWN,
        "skip_unknown_job_check": True,
    }
    if params.job_timeout_ms:
        settings["job_timeout"] = _ms(params.job_timeout_ms)
    if params.error_handler_cancel:
        settings["error_handler"] = cancelling_error_handler
    if params.retry_delay_ms > 0:
        settings["retry_policy"] = FixedRetryPolicy(_ms(params.retry_delay_ms))
    return settings
