"""What ``river_sync.Client`` and ``river_anyio``'s client do alike, written once.

The constructor (one signature for both), the properties, configuration before
start, the routing of notifications and machine outputs, the hand-off of a
finished run and the middleware chain: none of it waits. A driver subclasses
``ClientBase`` and supplies how it waits: the database it binds, its runners,
its locks (``_guard``: the sync client's lock; nothing under trio, where one
thread runs the client), its job runs and its stop.

Driver hooks: ``_bind_database``, ``_unbind_database``, ``_make_leadership``,
``_init_driver``, ``_start_jobs``, ``_forget_held``, ``_reconfigured``; the class
attributes ``_log``, ``_clock``, ``_outermost`` (the resumable-steps middleware).

``testing_claim_hook`` (see ``ClaimHook``) is a seam for cross-implementation
tests only; production code leaves it ``None``. ``testing_completer_backoff_unit``
(set before ``start``) shortens the completer's retry back-off for tests of its
retry paths; production code leaves it at one second. ``testing_settings_poll_interval``
(set before ``start``) shortens the producers' settings poll (2 s) for tests that wait one out.
``testing_listen_probe_timeout`` (seconds, set before ``start``) shortens the wait of the
listener's probe (``river_db.listen_probe``, 2 s) for tests behind a transaction pooler.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from river_db.client_support import (
    ClientStats,
    accepts_triggers,
    election_config,
    producer_stats,
    report_completer_output,
    report_producer_output,
)
from river_db.job_runs import JobRun, RunTable
from river_db.listen_probe import notifications_setting, warn_unavailable
from river_db.notify_settings import PROBE_TIMEOUT
from river_db.periodic_jobs import PeriodicJobs
from river_db.waits import WaitRegistry
from river_protocol.claim_filters import TagFilter
from river_protocol.client_core import (
    ClientConfig,
    ClientCore,
    LeaderElectionConfig,
    MaintenanceConfig,
    QueueConfig,
    default_client_id,
)
from river_protocol.constants import FETCH_COOLDOWN_DEFAULT, JOB_TIMEOUT_DEFAULT, MAX_ATTEMPTS_DEFAULT
from river_protocol.errors import DatabaseNotFoundError, RiverError
from river_protocol.leadership import PeriodicJob
from river_protocol.lifecycle import ClientState, Lifecycle
from river_protocol.machines.base import Event as MachineEvent
from river_protocol.machines.completer import CompleterOutput
from river_protocol.machines.notifications import parse_finished
from river_protocol.machines.producer import JobFinished, ProducerOutput, SlotsFreed, TriggerFetch
from river_protocol.machines.workflow_promoter import PromoterOutput, TasksFinalized, finalized_tasks
from river_protocol.outcomes import Completed, Outcome
from river_protocol.retry import RetryPolicy
from river_protocol.run_log import JobLogLevels, RunLogLine, parse_job_log_levels
from river_protocol.unique import UniqueKeyRules, parse_unique_key_rules
from river_protocol.work import CancelCause
from river_protocol.workers import Workers

ClaimHook = Callable[[str, Sequence[Any]], None]
"""TESTING ONLY: ``hook(queue, jobs)``, called once per claim that returned jobs.

It runs after the claim committed and after the claimed jobs were registered as
this client's running jobs, and before any of them starts: a remote cancellation
that arrives meanwhile reaches them, and they start already cancelled. It may
block (on a thread of its own on the threaded client); the client keeps fetching
other queues and handling notifications, and the claim's jobs start once it
returns. River's conformance adapter (``river_tools.conformance_adapter``) uses
it to hold a client's first claim on a barrier. It decides nothing about jobs.
"""


class ClientBase:
    """The shared half of a River client; see the driver's ``Client`` for how it runs."""

    _log: ClassVar[logging.Logger]
    # Where the line of each run that does not complete goes (river_protocol.run_log): the
    # driver package's ``.jobs`` logger, documented in docs/guides/client.md.
    _job_log: ClassVar[logging.Logger]
    _clock: ClassVar[Callable[[], datetime]]  # the driver's "now" (trio's follows its clock)
    _outermost: ClassVar[Callable[..., Any]]  # resumable steps: around every other middleware

    _leadership: Any
    _events: Any
    _producers: dict[str, Any]
    _completer: Any
    _promoter: Any

    def __init__(
        self,
        database: Any,
        *,
        queues: dict[str, QueueConfig] | None = None,
        workers: Workers | None = None,
        client_id: str | None = None,
        job_timeout: timedelta = JOB_TIMEOUT_DEFAULT,
        soft_stop_timeout: timedelta | None = None,
        leader_election: bool | LeaderElectionConfig = True,
        leader_election_disabled: bool = False,
        fetch_only_known_kinds: bool = False,
        periodic_jobs: Sequence[PeriodicJob] = (),
        maintenance: MaintenanceConfig | None = None,
        error_handler: Callable[[Any, BaseException], Any] | None = None,
        middleware: Sequence[Callable[..., Any]] = (),
        insert_middleware: Sequence[Callable[..., Any]] = (),
        notifications: bool | str = True,
        retry_policy: RetryPolicy | None = None,
        schema: str | None = None,
        max_attempts: int = MAX_ATTEMPTS_DEFAULT,
        fetch_cooldown: timedelta = FETCH_COOLDOWN_DEFAULT,
        skip_unknown_job_check: bool = False,
        tag_filter: TagFilter | None = None,
        group_commit: bool = True,
        unique_key_rules: UniqueKeyRules | str = UniqueKeyRules.V0_43,
        job_log_levels: JobLogLevels | None = None,
    ) -> None:
        missing: DatabaseNotFoundError | None = None
        try:
            dialect = self._bind_database(database, schema)
        except DatabaseNotFoundError as exc:
            # A SQLite file that is not there (river_db.start_checks): the other arguments are
            # still checked first, so a bad one is reported as such whatever the path.
            missing, dialect = exc, "sqlite"
        try:
            listening, self._listen_url = notifications_setting(notifications, dialect)
            config = ClientConfig(
                client_id=client_id or default_client_id(socket.gethostname(), datetime.now(UTC)),
                dialect=dialect,
                queues=dict(queues or {}),
                job_timeout=job_timeout,
                max_attempts=max_attempts,
                fetch_cooldown=fetch_cooldown,
                notifications=listening,
                retry_policy=retry_policy,
                skip_unknown_job_check=skip_unknown_job_check,
                fetch_only_known_kinds=fetch_only_known_kinds,
                tag_filter=tag_filter,
                group_commit=group_commit,
                unique_key_rules=parse_unique_key_rules(unique_key_rules),
                maintenance=maintenance or MaintenanceConfig(),
                leader_election=election_config(leader_election, leader_election_disabled),
                job_log_levels=parse_job_log_levels(job_log_levels),
            )
            self._rng = random.Random()
            self._core = ClientCore(config, workers, self._rng)
            if missing is not None:
                raise missing
            self._leadership = self._make_leadership(periodic_jobs)
        except BaseException:
            if missing is None:
                self._unbind_database()
            raise
        self.soft_stop_timeout = soft_stop_timeout
        self.periodic_jobs: PeriodicJobs = self._leadership.periodic_jobs
        self._error_handler = error_handler
        self._middleware: tuple[Callable[..., Any], ...] = (type(self)._outermost, *middleware)
        self._insert_middleware: tuple[Callable[..., Any], ...] = tuple(insert_middleware)
        self._leadership.insert_middleware = self._insert_middleware
        # Held around every use of the core and the run table; a no-op where one thread runs it all.
        self._guard: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        self._runs = RunTable(self._log)
        self._producers = {}
        self._completer = None
        self._promoter: Any = None  # the workflow promoter's runner, while the client works jobs
        self._waits = WaitRegistry()  # wait_job / wait_workflow callers, woken by our own completions
        self._lifecycle = Lifecycle()
        self._hard_stop = False
        self.testing_claim_hook: ClaimHook | None = None  # TESTING ONLY: see ClaimHook
        # TESTING ONLY: seconds the listener's probe waits at start (PROBE_TIMEOUT, 2 s);
        # tests behind a transaction pooler, where every probe waits it out, shorten it.
        self.testing_listen_probe_timeout: float = PROBE_TIMEOUT
        self._init_driver()

    @property
    def testing_completer_backoff_unit(self) -> timedelta:
        """TESTING ONLY: the unit of the completer's retry back-off (1 s; waits are 1, 2, 4
        units). Tests of the retry paths shorten it before ``start`` to run the same steps faster."""
        return self._core.completer_backoff_unit

    @testing_completer_backoff_unit.setter
    def testing_completer_backoff_unit(self, unit: timedelta) -> None:
        if unit <= timedelta(0):
            raise ValueError(f"testing_completer_backoff_unit must be positive, got {unit}")
        self._core.completer_backoff_unit = unit

    @property
    def testing_settings_poll_interval(self) -> timedelta:
        """TESTING ONLY: how often this client's producers poll their queue's settings (2 s, as
        River; poll-only clients learn of pauses and cancels this way). Tests that wait out a
        poll shorten it before ``start``."""
        return self._core.settings_poll_interval

    @testing_settings_poll_interval.setter
    def testing_settings_poll_interval(self, interval: timedelta) -> None:
        if interval <= timedelta(0):
            raise ValueError(f"testing_settings_poll_interval must be positive, got {interval}")
        self._core.settings_poll_interval = interval

    # ---------------------------------------------------------------- driver hooks

    def _bind_database(self, database: Any, schema: str | None) -> str:
        """Take the ``database`` argument; return its dialect name."""
        raise NotImplementedError

    def _unbind_database(self) -> None:
        """Undo ``_bind_database`` after a constructor error."""

    def _make_leadership(self, periodic_jobs: Sequence[PeriodicJob]) -> Any:
        raise NotImplementedError

    def _init_driver(self) -> None:
        """The driver's own state: APIs, event hub, runners, locks."""

    def _start_jobs(self, queue: str, jobs: Sequence[Any]) -> None:
        """Start a claim's jobs, in order."""
        raise NotImplementedError

    def _forget_held(self, run: JobRun) -> None:
        """Drop a run that has been handed on (called with ``_guard`` held)."""
        raise NotImplementedError

    def _reconfigured(self) -> None:
        """After ``configure()`` changed the core (under ``_guard``)."""

    def _listener_unavailable(self) -> None:
        """The started listener failed its probe (``river_db.listen_probe``): say so once and
        poll. Call before the producers start (they start with ``core.producer_start()``) and
        before leadership is made."""
        warn_unavailable(self._log, self.testing_listen_probe_timeout)
        self._core.listener_unavailable()

    # ---------------------------------------------------------------- properties

    @property
    def client_id(self) -> str:
        return self._core.config.client_id

    @property
    def dialect_name(self) -> str:
        """'postgres' or 'sqlite'."""
        return self._core.config.dialect

    @property
    def state(self) -> ClientState:
        """Where the client is in its lifecycle (``river_protocol.lifecycle``)."""
        return self._lifecycle.state

    @property
    def is_leader(self) -> bool:
        """Whether this client currently leads (runs maintenance and periodic jobs)."""
        return bool(self._leadership.is_leader)

    @property
    def leadership_terms(self) -> int:
        """Terms this client has won; each started its maintenance services and periodic enqueuer."""
        return int(self._leadership.terms)

    def stats(self) -> ClientStats:
        """Runs in progress, those that passed their timeout or got stuck (``river_db.job_runs``),
        and each queue's producer: alive or not, and when it last fetched (``ProducerStats``).

        Safe to call from another thread than the client's (a health endpoint's).
        """
        with self._guard:
            stats = self._runs.stats()
            # A copy: a queue may be added meanwhile.
            runners = sorted(list(self._producers.items()), key=_first)
        stats.producers = tuple(producer_stats(queue, runner) for queue, runner in runners)
        return stats

    @property
    def middleware(self) -> tuple[Callable[..., Any], ...]:
        """The work middleware given (``middleware=`` or ``configure``), outermost first."""
        return self._middleware[1:]

    @property
    def insert_middleware(self) -> tuple[Callable[..., Any], ...]:
        """The insert middleware given (``insert_middleware=`` or ``configure``), outermost first."""
        return self._insert_middleware

    def configure(
        self,
        *,
        queues: Mapping[str, QueueConfig] | None = None,
        tag_filter: TagFilter | None = None,
        middleware: Sequence[Callable[..., Any]] | None = None,
        insert_middleware: Sequence[Callable[..., Any]] | None = None,
    ) -> None:
        """Change the queues this client works, its claim tag filter, or its work and insert
        middleware (replacing those given), before it starts (no I/O)."""
        with self._guard:
            if self._lifecycle.state is not ClientState.NEW:
                raise RiverError(f"a client can only be configured before it starts; it is {self.state}")
            if queues is not None or tag_filter is not None:
                self._core.reconfigure(queues=queues, tag_filter=tag_filter)
                self._reconfigured()
            if middleware is not None:
                self._middleware = (type(self)._outermost, *middleware)
            if insert_middleware is not None:
                self._insert_middleware = tuple(insert_middleware)
                self._leadership.insert_middleware = self._insert_middleware

    # ---------------------------------------------------------------- routing

    def _poke(self, queues: Iterable[str]) -> None:
        for queue in queues:
            runner = self._producers.get(queue)
            if runner is not None and self._lifecycle.running:
                runner.post(TriggerFetch())

    def _on_notification(self, topic: str, payload: str) -> None:
        with self._guard:
            routes = self._core.route_notification(topic, payload)
        for queue, event in routes:
            self._post_to_producer(queue, event)

    def _post_to_producer(self, queue: str, event: MachineEvent) -> None:
        runner = self._producers.get(queue)
        if runner is not None and accepts_triggers(runner):
            runner.post(event)

    def _producer_hook(self, queue: str) -> Callable[[Any], None]:
        return lambda out: self._on_producer_output(queue, out)

    def _on_producer_output(self, queue: str, out: ProducerOutput) -> None:
        if out.start_jobs:
            self._start_jobs(queue, out.start_jobs)
        if out.cancel_job_ids:
            with self._guard:
                runs = [r for r in map(self._runs.get, out.cancel_job_ids) if r is not None]
            for run in runs:
                run.token.cancel(CancelCause.REMOTE_CANCEL)
        report_producer_output(queue, out, self._events.publish, self._log)
        if out.stopped:
            self._producers[queue].finish()

    def _on_completer_output(self, out: CompleterOutput) -> None:
        report_completer_output(out, self._events.publish_all, self._log)
        if out.completions:
            self._waits.finished(c.job for c in out.completions)
            for queue in self._core.limited_queues_freed(out.completions):
                producer = self._producers.get(queue)
                if producer is not None:
                    producer.post(SlotsFreed())
        if out.completions and self._promoter is not None:
            tasks = finalized_tasks(c.job for c in out.completions)
            if tasks:
                self._promoter.post(TasksFinalized(tasks=tasks))
        if out.stopped and self._completer is not None:
            self._completer.finish()

    def _grown(self, workflow: Any, workflow_id: str, tx: Any) -> None:
        """Tasks added to a workflow that already has rows may depend on tasks already final:
        promote now rather than at the workflow sweeper's next sweep (a caller's ``tx`` may not have
        committed yet: then the sweep, or the running task's own completion, does it)."""
        if workflow.existing and tx is None:
            self._grown_ids((workflow_id,))

    def _grown_ids(self, workflow_ids: tuple[str, ...]) -> None:
        if self._promoter is not None:
            self._promoter.post(TasksFinalized(workflow_ids=workflow_ids))

    def _on_finished(self, topic: str, payload: str) -> None:
        """``river_py_finished`` heard: wake the waits on those workflows (they read again)."""
        self._waits.finished_ids((), parse_finished(payload))

    def _on_promoter_output(self, out: PromoterOutput) -> None:
        if out.error is not None:
            self._log.info("river: promoting workflow tasks failed (the sweeper will): %s", out.error)
        if out.result is not None and out.result.cancelled:
            cancelled = out.result.cancelled
            self._waits.finished_ids((i for i, _ in cancelled), {w for _, w in cancelled})
        self._poke(out.promoted_queues)

    def _post_own_control(self, payload: str, new_ack: Callable[[], Any]) -> list[tuple[Any, Any]]:
        """A control message this client sent (``client.jobs`` / ``client.queues``), posted to each
        of its own producers it applies to with a fresh ack (``new_ack()``); returns the
        (runner, ack) pairs of the started runners, whose acks the driver waits for (a runner not
        started yet sees it after its Start and has not fetched)."""
        with self._guard:
            routes = self._core.route_own_control(payload, new_ack)
        waiting: list[tuple[Any, Any]] = []
        for queue, event in routes:
            runner = self._producers.get(queue)
            if runner is None:
                continue
            # Queued behind any Start not yet handled, so no producer sees it before starting.
            runner.post(event)
            if runner.started:
                waiting.append((runner, event.ack))
        return waiting

    def _cancel_all(self, cause: CancelCause) -> None:
        with self._guard:
            runs = list(self._runs)
        for run in runs:
            run.token.cancel(cause)

    # ---------------------------------------------------------------- runs

    def _with_middleware(self, call: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """``call`` wrapped in every middleware, the first listed outermost."""
        for mw in reversed(self._middleware):
            call = (lambda m, nxt: lambda ctx, args: m(ctx, args, nxt))(mw, call)
        return call

    def _finish_run(
        self, run: JobRun, outcome: Outcome, metadata: dict[str, Any], handler_cancel: bool = False,
        error: BaseException | None = None,
    ) -> None:
        """Hand a finished run's outcome to the completer; ``error``: the worker's exception, if it
        raised one (its traceback goes with the run's log line)."""
        # One acquisition of _guard for the whole hand-off: every job thread passes here.
        # Posting never blocks (a runner's queue append), so holding it meanwhile is cheap.
        line: RunLogLine | None = None
        with self._guard:
            plan = run.plan
            cause = run.token.cause
            submit = self._core.finish_submit(
                plan, outcome, now=type(self)._clock(), started_at=run.started_at,
                cancel_cause=cause, error_handler_cancel=handler_cancel, metadata_updates=metadata,
                context=run,
            )
            if outcome.__class__ is not Completed:  # a success has no line: most runs skip this
                line = self._core.run_log_line(
                    plan, outcome, submit, cancel_cause=cause, error_handler_cancel=handler_cancel,
                    has_exception=error is not None,
                )
            # Slot first: once the completer commits, a claim may return this job again (see runner).
            self._producers[run.queue].post(JobFinished(plan.job.id), urgent=True)
            if self._completer is not None:
                self._completer.post(submit)
            # Last: a stop waits for no run to be left before it stops the completer.
            self._forget_held(run)
        if line is not None:  # outside the guard: a handler may be slow (a network one)
            log_run_line(type(self)._job_log, line, error)


def log_run_line(logger: logging.Logger, line: RunLogLine, error: BaseException | None) -> None:
    """Hand a run's log line to ``logging``: the only thing a client does with it."""
    logger.log(line.level, line.message, *line.args, extra=line.extra,
               exc_info=error if line.traceback else None)


def _first(item: tuple[str, Any]) -> str:
    return item[0]


def queue_still_busy(name: str, timeout: float | None) -> TimeoutError:
    """``client.queues.remove`` gave up waiting for the queue's running jobs."""
    return TimeoutError(
        f"queue {name!r} is stopping but still has running jobs after {timeout}s; "
        "call remove again to wait for them"
    )
