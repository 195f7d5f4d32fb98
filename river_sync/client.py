"""The threaded River client: inserting jobs and working them with one thread per job.

This module only does I/O. Configuration, insert planning, notification
routing and every outcome rule come from ``river_protocol.client_core`` and
``river_protocol.work``; the machines (producers, completer) run on
``MachineRunner`` threads. ``river_trio`` mirrors these names.

Threads: one runner per queue producer, one for the completer, the notifier's
own threads, one watchdog for job timeouts, and one thread per running job;
with queues and leader election, one for the elector and, while leading, one
per maintenance service and the periodic enqueuer (``river_sync.leadership``).
``stop()`` joins all of them except job threads whose worker ignores its
cancellation token: Python can't kill a thread, so such a worker keeps its
thread and its queue slot until it returns (and ``stop()`` waits for it). The
client logs a warning at the timeout and again once it is stuck (timeout +
10 s) and counts both in ``stats()``.
"""

from __future__ import annotations

import itertools
import logging
import math
import queue as stdqueue
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from river_db.client_base import ClientBase, queue_still_busy
from river_db.client_support import (
    ClientStats,
)
from river_db.deadline_buckets import DEADLINE_GRAIN as DEADLINE_GRAIN  # the tests' name for it
from river_db.deadline_buckets import EMPTIED as _EMPTIED
from river_db.deadline_buckets import Bucket, DeadlineBuckets
from river_db.insert_middleware import insert_chain
from river_db.job_runs import JobRun
from river_db.waits import job_id_of, timeout_seconds, workflow_id_of
from river_protocol.admin import deliver_control_locally
from river_protocol.client_core import (
    EventKind,
    InsertManyParams,
    InsertPlan,
    MaintenanceConfig,
    QueueConfig,
)
from river_protocol.errors import JobNotFoundError, RiverError, ValidationError
from river_protocol.intents import GetJob, GetQueue, InsertParams, InsertResult, ListWorkflowTasks
from river_protocol.job import JobRow
from river_protocol.leadership import PeriodicJob
from river_protocol.lifecycle import ClientState
from river_protocol.machines.base import Stop
from river_protocol.machines.notifications import TOPIC_CONTROL, TOPIC_INSERT, TOPIC_LEADERSHIP
from river_protocol.machines.producer import JobFinished
from river_protocol.options import InsertOpts
from river_protocol.work import CancelCause, outcome_from_result, wants_error_handler
from river_protocol.workflow import (
    Backoff,
    WaitTimeoutError,
    Workflow,
    WorkflowInsertResult,
    wait_outcome,
    workflow_wait_outcome,
)
from river_sync.admin import JobsAPI, QueuesAPI
from river_sync.context import CancellationToken, WorkContext
from river_sync.database import Database
from river_sync.events import EventHub, Subscription
from river_sync.leadership import LeaderDriver
from river_sync.notifier import NotifierProtocol, NullNotifier, notifier_for
from river_sync.notifier import Subscription as NotifySubscription
from river_sync.resumable import resumable_middleware
from river_sync.runner import MachineRunner, utcnow

log = logging.getLogger(__name__)
# One line per run that does not complete (river_protocol.run_log); docs/guides/client.md, Logging.
job_log = logging.getLogger("river_sync.jobs")

_ACK_RECHECK = 0.05  # seconds between checks that a producer still runs while its ack is awaited

ErrorHandler = Callable[[Any, BaseException], Any]
Middleware = Callable[[WorkContext, Any, Callable[[WorkContext, Any], Any]], Any]
InsertNext = Callable[[Sequence[InsertParams]], list[InsertResult]]
InsertMiddleware = Callable[[Sequence[InsertParams], InsertNext], list[InsertResult]]


# ---------------------------------------------------------------- database argument


def _open_database(database: Any, schema: str | None) -> tuple[Database, bool]:
    """(Database, owned) for any accepted ``database`` argument."""
    if isinstance(database, Database):
        if schema is not None and database.dialect.schema != schema:
            raise ValidationError(
                f"schema {schema!r} differs from the Database's schema {database.dialect.schema!r}"
            )
        return database, False
    if isinstance(database, Path):
        return Database.from_sqlite_path(str(database), schema=schema), True
    if isinstance(database, str):
        return Database.from_url(database, schema=schema), True
    module = type(database).__module__
    if module.startswith("psycopg_pool"):
        return Database.from_pool(database, schema=schema), False
    if module.startswith("sqlalchemy"):
        return Database.from_sqlalchemy_engine(database, schema=schema), False
    raise ValidationError(
        f"unsupported database {type(database).__qualname__}: pass a URL, a SQLite path, a "
        "psycopg_pool.ConnectionPool, a SQLAlchemy Engine or a river_sync.database.Database"
    )


# ---------------------------------------------------------------- watchdog


class _Watchdog(DeadlineBuckets):
    """One thread firing run deadlines (job timeout, then the stuck warning).

    The deadlines are ``river_db.deadline_buckets``' (``add``, ``bucket``, ``drop``: dict
    operations in buckets ``DEADLINE_GRAIN`` wide, an emptied bucket swapped for the
    shared ``_EMPTIED``), called under the client's lock, held anyway when a run starts
    and ends. The thread sleeps on a Condition of that lock until the earliest bucket is
    due, and is notified when a new slot becomes the earliest. Times are
    ``time.monotonic()`` seconds.
    """

    def __init__(self, lock: threading.Lock, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._cond = threading.Condition(lock)
        self._clock = clock
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="river-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _new_earliest(self, slot: int) -> None:
        self._cond.notify()  # the caller holds the lock: the thread wakes once it is released

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _due(self) -> Bucket | None:
        with self._cond:
            while not self._stopping:
                due = self.pop_due(self._clock())
                if due is not None:
                    return due
                wait = self.wake_at() - self._clock()
                self._cond.wait(None if wait == math.inf else wait)
            return None

    def _run(self) -> None:
        while (due := self._due()) is not None:
            for run, action in due.items():
                try:
                    action(run)
                except Exception:
                    log.exception("river-watchdog: a deadline action failed")


# ---------------------------------------------------------------- job threads


class _JobThreads:
    """Long-lived job threads: a run goes to an idle thread; a new one starts only when none is idle.

    Starting a thread costs the caller a wait until the new thread runs (``Thread.start``
    blocks on it), which under load is most of the producer's time; reusing threads
    takes that off the claim path. Threads stay until ``stop()``.

    An idle thread leaves a token in ``_idle`` before it waits for a run, and ``submit``
    takes one for each run it queues, or starts a thread when there is none. Deque
    appends and pops are atomic, so neither side takes a lock: every queued run is
    matched by a token or a new thread, so some thread will take it. (A counter under
    a lock cost the producer and every job thread a contended lock per job.)
    """

    def __init__(self, work: Callable[[Any], None]) -> None:
        self._work = work
        self._jobs: stdqueue.SimpleQueue[Any] = stdqueue.SimpleQueue()
        self._idle: deque[None] = deque()
        self._numbers = itertools.count(1)
        self._threads: list[threading.Thread] = []

    def submit(self, run: Any) -> None:
        try:
            self._idle.pop()
        except IndexError:
            thread = threading.Thread(target=self._loop, name=f"river-job-thread-{next(self._numbers)}",
                                      daemon=True)
            self._threads.append(thread)
            self._jobs.put(run)
            thread.start()
        else:
            self._jobs.put(run)

    def _loop(self) -> None:
        me = threading.current_thread()
        while True:
            run = self._jobs.get()
            if run is None:
                return
            run.thread = me
            try:
                self._work(run)
            finally:
                del run
                self._idle.append(None)

    def stop(self) -> None:
        """One sentinel per thread: idle threads exit now, a still-busy one when it returns."""
        for _ in range(len(self._threads)):
            self._jobs.put(None)


_START_CHUNK = 32  # claimed jobs planned, then registered under one hold of the client lock


# ---------------------------------------------------------------- the client


class Client(ClientBase):
    """A River client on Postgres or SQLite.

    ``database``: a URL (``postgresql://...``, ``sqlite:///path``), a SQLite
    file path, a ``psycopg_pool.ConnectionPool``, a SQLAlchemy ``Engine`` or a
    ``river_sync.database.Database``. Without ``queues`` the client is
    insert-only and needs no ``start()``.

    Workers are called as ``fn(ctx, args)`` (or ``fn(args)`` when they take one
    parameter). Returning completes the job; raising ``JobSnooze``,
    ``JobCancel`` or ``JobDiscard`` (or returning one, or a ``WorkOutcome``)
    requests that outcome; any other exception is retried per the retry
    policy. ``error_handler(job, exc)`` may return True to cancel the job
    instead. ``middleware`` entries are ``mw(ctx, args, call_next)``;
    ``insert_middleware`` entries are ``mw(params, call_next)`` around each
    insert, ``params`` being the rows' ``InsertParams`` (see
    ``river_protocol.middleware`` for what they may change).
    """

    _log = log
    _job_log = job_log
    _clock = utcnow
    _outermost = resumable_middleware
    jobs: JobsAPI
    queues: QueuesAPI
    _leadership: LeaderDriver
    _events: EventHub
    _producers: dict[str, MachineRunner]
    _completer: MachineRunner | None

    def _bind_database(self, database: Any, schema: str | None) -> str:
        self._database_arg = database  # as river_async keeps it: what `river work` reads its URL from
        self._schema_arg = schema
        self._db, self._owns_db = _open_database(database, schema)
        return self._db.dialect.name

    def _unbind_database(self) -> None:
        if self._owns_db:
            self._db.close()

    def _make_leadership(self, periodic_jobs: Sequence[PeriodicJob]) -> LeaderDriver:
        return LeaderDriver(self._core, self._db, periodic_jobs)

    def _init_driver(self) -> None:
        self.jobs = JobsAPI(self)
        self.queues = QueuesAPI(self)
        self._lock = threading.Lock()  # the core, the run table, lifecycle state
        self._guard = self._lock
        self._events = EventHub()
        self._runs_idle = threading.Condition(self._lock)
        self._notifier: NotifierProtocol | None = None
        self._notify_subs: list[NotifySubscription] = []
        self._watchdog: _Watchdog | None = None
        self._job_threads = _JobThreads(self._work)
        self._chains: dict[int, tuple[Any, Callable[[WorkContext, Any], Any]]] = {}
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()  # start, stop and runtime queue changes, one at a time

    # ---------------------------------------------------------------- properties

    @property
    def schema(self) -> str | None:
        return self._db.dialect.schema

    @property
    def database(self) -> Database:
        return self._db

    def wait_leader(self, value: bool = True, timeout: float | None = None) -> bool:
        """Block until ``is_leader == value``; False if ``timeout`` (seconds) passed first."""
        return self._leadership.wait_leader(value, timeout)

    def close(self) -> None:
        """Close a database the client opened itself (for insert-only use without ``start``)."""
        if self._lifecycle.state in (ClientState.NEW, ClientState.STOPPED) and self._owns_db:
            self._db.close()

    # ---------------------------------------------------------------- insert

    def insert(self, args: Any, opts: InsertOpts | None = None, *, tx: Any = None) -> InsertResult:
        """Insert one job; with ``tx`` it exists (and is announced) only if ``tx`` commits."""
        return self._insert((InsertManyParams(args, opts),), tx)[0]

    def insert_many(self, items: Iterable[Any], *, tx: Any = None) -> list[InsertResult]:
        """Insert args / ``InsertManyParams`` atomically; results follow the input order."""
        return self._insert(tuple(items), tx)

    def insert_workflow(self, workflow: Workflow, *, tx: Any = None) -> WorkflowInsertResult:
        """Insert ``workflow``'s tasks in one statement batch (all or none; ``tx`` as for
        ``insert_many``). Tasks with deps wait in ``pending`` until their deps complete."""
        with self._lock:
            workflow_id, tasks, plan = self._core.plan_workflow(workflow, utcnow())
        results = self._insert_planned(plan, tx)
        return WorkflowInsertResult(workflow_id, workflow.name, dict(zip(tasks, results, strict=True)))

    def _insert(self, items: Sequence[Any], tx: Any) -> list[InsertResult]:
        with self._lock:
            plan = self._core.plan_insert(items, utcnow())
        return self._insert_planned(plan, tx)

    def _insert_planned(self, plan: InsertPlan, tx: Any) -> list[InsertResult]:
        if self._insert_middleware:
            return self._insert_through_middleware(plan, tx)
        return self._insert_plan(plan, tx)

    def _insert_through_middleware(self, plan: InsertPlan, tx: Any) -> list[InsertResult]:
        def innermost(jobs: Sequence[InsertParams]) -> list[InsertResult]:
            return self._insert_plan(plan.with_jobs(jobs), tx)

        return list(insert_chain(self._insert_middleware, innermost)(plan.insert.jobs))

    def _insert_plan(self, plan: InsertPlan, tx: Any) -> list[InsertResult]:
        if tx is not None:
            from river_db.caller_tx import executor_for_caller_tx

            executor = executor_for_caller_tx(tx, schema=self.schema, expect=self._db.dialect.name)
            results = self._run_plan(executor, plan.intents)
        else:
            with self._db.transaction() as executor:
                results = self._run_plan(executor, plan.intents)
            # Our own producers hear about it at once, listener or not (§5.4).
            self._poke(plan.available_queues)
        return list(results)

    @staticmethod
    def _run_plan(executor: Any, intents: Sequence[Any]) -> Any:
        # The Notify rides in the insert's transaction: announced only if it commits.
        results = [executor.run(intent) for intent in intents]
        return results[0]

    # ---------------------------------------------------------------- waiting for results

    def wait_job(self, job: JobRow | InsertResult | int, *,
                 timeout: timedelta | float | None = None) -> JobRow:
        """The job's final row (with its recorded output) once it completes.

        Raises ``WorkflowTaskFailedError`` when it ends discarded or cancelled, and
        ``WaitTimeoutError`` (a ``TimeoutError``) when ``timeout`` (seconds or a timedelta;
        None: no limit) passes first. This client's own completions wake the wait at once;
        others are seen by a re-check on a bounded back-off (10 ms doubling to 1 s).
        """
        job_id = job_id_of(job)

        def read(db: Database) -> Any:
            row = db.run(GetJob(job_id), readonly=True)
            return row, wait_outcome(row)

        return self._wait(read, {"job_id": job_id}, timeout, f"job {job_id}")  # type: ignore[no-any-return]

    def wait_workflow(self, workflow: WorkflowInsertResult | str, *,
                      timeout: timedelta | float | None = None) -> tuple[JobRow, ...]:
        """Every task's final row once all completed; ``WorkflowTaskFailedError`` once all are
        final and some failed (``.jobs``: those); ``WaitTimeoutError`` as for ``wait_job``."""
        workflow_id = workflow_id_of(workflow)

        def read(db: Database) -> Any:
            rows = db.run(ListWorkflowTasks(workflow_id), readonly=True)
            if not rows:
                raise JobNotFoundError(f"workflow {workflow_id} has no tasks")
            return None, workflow_wait_outcome(rows)

        return self._wait(read, {"workflow_id": workflow_id}, timeout,  # type: ignore[no-any-return]
                          f"workflow {workflow_id}")

    def _wait(self, read: Callable[[Database], Any], watch: dict[str, Any],
              timeout: timedelta | float | None, what: str) -> Any:
        seconds = timeout_seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        db = self._db
        backoff = Backoff()
        while True:
            woken = threading.Event()
            unwatch = self._waits.watch(woken.set, **watch)  # before the read: no wake-up is missed
            try:
                last, outcome = read(db)
                if isinstance(outcome, BaseException):
                    raise outcome
                if outcome is not None:
                    return outcome
                pause = backoff.next()
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise WaitTimeoutError(f"{what} was not final after {seconds} s", last)
                    pause = min(pause, left)
                woken.wait(pause)
            finally:
                unwatch()

    # ---------------------------------------------------------------- events

    def subscribe(self, kinds: Iterable[EventKind | str] | None = None, maxsize: int = 1000) -> Subscription:
        """Events of ``kinds`` (all when None) in a bounded queue; overflow is counted in ``dropped``."""
        return self._events.subscribe(kinds, maxsize)

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start working the configured queues (a no-op for an insert-only client)."""
        with self._stop_lock:
            with self._lock:
                if self._lifecycle.state is not ClientState.NEW:
                    raise RiverError(f"client cannot start: it is {self._lifecycle.state}")
                self._lifecycle.advance(ClientState.STARTING)
            try:
                if self._core.works_jobs:
                    self._start_runtime()
            except BaseException:
                with self._lock:
                    self._lifecycle.advance(ClientState.STOPPING)
                self._teardown()
                raise
            with self._lock:
                self._lifecycle.advance(ClientState.STARTED)

    def _start_runtime(self) -> None:
        for intent in self._core.flow_control_setup():  # limited queues: refuse without the python line
            self._db.run(intent)
        self._watchdog = _Watchdog(self._lock)
        self._watchdog.start()
        self._completer = MachineRunner(
            self._core.make_completer(), self._db, name="completer", on_output=self._on_completer_output
        )
        self._completer.start()
        self._promoter = MachineRunner(
            self._core.make_workflow_promoter(), self._db, name="workflow-promoter",
            on_output=self._on_promoter_output,
        )
        self._promoter.start()
        for name, producer in self._core.make_producers().items():
            self._producers[name] = MachineRunner(
                producer, self._db, name=f"producer-{name}",
                on_output=self._producer_hook(name),
                readonly=lambda intent: isinstance(intent, GetQueue),
            )
        notifier = notifier_for(self._db, enabled=self._core.config.notifications,
                                listen_url=self._listen_url)
        for topic in (TOPIC_INSERT, TOPIC_CONTROL):
            self._notify_subs.append(notifier.subscribe(topic, self._on_notification))
        if self._leadership.enabled:
            self._notify_subs.append(notifier.subscribe(TOPIC_LEADERSHIP, self._leadership.on_notification))
        notifier.start()
        if not notifier.probe(self.testing_listen_probe_timeout):
            notifier.stop()
            notifier = NullNotifier()
            self._listener_unavailable()
        self._notifier = notifier
        for runner in self._producers.values():
            runner.start(self._core.producer_start())
        self._leadership.start()

    def __enter__(self) -> Client:
        if self._lifecycle.state is ClientState.NEW:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, timeout: timedelta | float | None = None) -> None:
        """Soft stop: stop fetching, let running jobs finish, flush their outcomes.

        Jobs still running after ``timeout`` (default: ``soft_stop_timeout``;
        seconds or a timedelta) get their token set with the stop cause, as
        ``stop_and_cancel`` does. Without either, it waits for every job.
        """
        limit = timeout if timeout is not None else self.soft_stop_timeout
        seconds = limit.total_seconds() if isinstance(limit, timedelta) else limit
        self._stop(escalate_after=seconds)

    def stop_and_cancel(self) -> None:
        """Hard stop: set every running job's token (stop cause), then stop as ``stop()`` does.

        Jobs that give up by raising ``WorkCancelled`` go back to ``available``
        without consuming an attempt (River's "interrupted").
        """
        with self._lock:
            self._hard_stop = True
        self._cancel_all(CancelCause.STOP)
        self._stop(escalate_after=None)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the client has stopped; False on timeout."""
        return self._stopped.wait(timeout)

    def _stop(self, escalate_after: float | None) -> None:
        with self._stop_lock:
            with self._lock:
                if self._lifecycle.state is ClientState.STOPPED:
                    return
                was_new = self._lifecycle.state is ClientState.NEW
                self._lifecycle.advance(ClientState.STOPPING)
            if not was_new and self._core.works_jobs:
                for runner in self._producers.values():
                    runner.post(Stop())
                if not self._wait_producers(escalate_after):
                    log.warning("river: soft stop timed out; cancelling running jobs")
                    self._cancel_all(CancelCause.STOP)
                    self._wait_producers(None)
                with self._lock:
                    # Every outcome must reach the completer before it is told to stop.
                    self._runs_idle.wait_for(lambda: not self._runs)
                if self._completer is not None:
                    self._completer.post(Stop())
                    self._completer.done.wait()
                if self._promoter is not None:  # after the completer: its last completions promote too
                    self._promoter.post(Stop())
            self._teardown()

    def _wait_producers(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else utcnow() + timedelta(seconds=timeout)
        for runner in self._producers.values():
            left = None if deadline is None else max((deadline - utcnow()).total_seconds(), 0.0)
            if not runner.done.wait(left):
                return False
        return True

    def _teardown(self) -> None:
        self._leadership.stop()  # services first, then the resign; needs the database still open
        for sub in self._notify_subs:
            sub.unsubscribe()
        self._notify_subs = []
        if self._notifier is not None:
            self._notifier.stop()
        for runner in self._producers.values():
            runner.finish()
            runner.join()
        if self._completer is not None:
            self._completer.finish()
            self._completer.join()
        if self._promoter is not None:
            self._promoter.finish()
            self._promoter.join()
        if self._watchdog is not None:
            self._watchdog.stop()
        self._job_threads.stop()
        if self._owns_db:
            self._db.close()
        with self._lock:
            self._lifecycle.advance(ClientState.STOPPED)
        self._events.close_all()
        self._stopped.set()

    def _deliver_control(self, payload: str, *, in_caller_tx: bool) -> None:
        """Hand this client's own control message to its producers where ``deliver_control_locally``
        says so; return once each running one applied it (a pause then holds when pause() returns)."""
        if not deliver_control_locally(payload, in_caller_tx=in_caller_tx,
                                       listening=self._core.config.notifications):
            return
        for runner, ack in self._post_own_control(payload, threading.Event):
            # A runner that ended meanwhile will never answer; nothing of it fetches either.
            while not ack.wait(_ACK_RECHECK) and not runner.done.is_set():
                pass

    # ---------------------------------------------------------------- running jobs

    def _start_jobs(self, queue: str, jobs: Sequence[Any]) -> None:
        # A few jobs at a time, each chunk handed to its threads at once: starting the first job
        # threads while the rest are still being planned keeps few of them runnable at the same
        # time (handing a whole claim over at once measured a third more CPU per job), and one
        # lock hold per chunk spares the producer a contended lock per job. Planning reads only
        # what is fixed once the client runs (workers, config), so it needs no lock.
        hook = self.testing_claim_hook
        if hook is not None:
            self._start_held(queue, jobs, hook)
            return
        for first in range(0, len(jobs), _START_CHUNK):
            runs, hard = self._register_runs(queue, jobs[first:first + _START_CHUNK])
            self._launch_runs(runs, hard)

    def _register_runs(self, queue: str, jobs: Sequence[Any]) -> tuple[list[JobRun], bool]:
        """Plan ``jobs`` and record them as running (remote cancels find them from here on)."""
        plans = [self._core.plan_job(job) for job in jobs]
        started = utcnow()
        runs = [JobRun(queue, plan, CancellationToken(), started) for plan in plans]
        add, watchdog, on_timeout = self._runs.add, self._watchdog, self._on_timeout  # once per chunk
        # Jobs without their own timeout share one timedelta (ClientCore.plan_job's): with one base
        # time for the chunk they share one deadline, so its slot is looked up once, not per job.
        slot_timeout: Any = None
        slot = 0
        bucket = _EMPTIED  # never written: the first run with a timeout looks its slot up
        with self._lock:
            hard = self._hard_stop
            deadline_base = time.monotonic()
            for run in runs:
                add(run)
                plan = run.plan
                timeout = plan.timeout
                if plan.immediate is None and timeout is not None and watchdog is not None:
                    if timeout is not slot_timeout:
                        slot, bucket = watchdog.bucket(deadline_base + timeout.total_seconds())
                        slot_timeout = timeout
                    bucket[run] = on_timeout
                    run.deadline_slot = slot
        return runs, hard

    def _launch_runs(self, runs: Sequence[JobRun], hard: bool) -> None:
        for run in runs:
            if hard:
                run.token.cancel(CancelCause.STOP)
            if run.plan.immediate is not None:
                self._finish_run(run, run.plan.immediate, metadata={})
            else:
                self._job_threads.submit(run)

    def _start_held(
        self, queue: str, jobs: Sequence[Any], hook: Callable[[str, Sequence[Any]], None]
    ) -> None:
        """``testing_claim_hook`` is set: register the claim now, start it once the hook returns.

        The hook waits on a thread of its own, so the producer keeps handling notifications
        (a remote cancel sets the registered run's token) while the claim is held.
        """
        runs, _ = self._register_runs(queue, jobs)

        def hold_then_launch() -> None:
            try:
                hook(queue, [run.plan.job for run in runs])
            except Exception:
                log.exception("river: the testing claim hook failed; starting the claim anyway")
            with self._lock:
                hard = self._hard_stop
            self._launch_runs(runs, hard)

        threading.Thread(target=hold_then_launch, name=f"river-claim-hook-{queue}", daemon=True).start()

    def _on_timeout(self, run: JobRun) -> None:
        with self._lock:
            watch = self._runs.timeout_reached(run)
            timeout = run.plan.timeout
            if watch and self._watchdog is not None and timeout is not None:
                # The timeout fired about started + timeout: stuck after the rest of stuck_after.
                later = (self._core.stuck_after(timeout) - timeout).total_seconds()
                run.deadline_slot = self._watchdog.add(run, time.monotonic() + later, self._on_stuck)

    def _on_stuck(self, run: JobRun) -> None:
        with self._lock:
            self._runs.stuck_reached(run)

    def _call_chain(self, run: JobRun) -> Callable[[WorkContext, Any], Any]:
        worker = run.plan.worker
        assert worker is not None
        cached = self._chains.get(id(worker))  # (worker, chain): the id alone could be reused
        if cached is None or cached[0] is not worker:
            cached = self._chains[id(worker)] = (worker, self._with_middleware(worker.ctx_call))
        return cached[1]

    def _work(self, run: JobRun) -> None:
        plan = run.plan
        ctx = WorkContext(plan.job, plan.args, self, run.token)
        run.ctx = ctx
        result: Any = None
        error: BaseException | None = None
        trace = ""
        try:
            result = self._call_chain(run)(ctx, plan.args)
        except BaseException as exc:  # a worker must never take its thread's report down
            error, trace = exc, traceback.format_exc()
        try:
            cause = run.token.cause
            outcome = outcome_from_result(result, error, trace=trace, cancel_cause=cause)
            handler_cancel = False
            if self._error_handler is not None and error is not None and wants_error_handler(outcome, cause):
                try:
                    handler_cancel = bool(self._error_handler(plan.job, error))
                except Exception:
                    log.exception("river: error handler failed for job %d", plan.job.id)
            self._finish_run(run, outcome, ctx.metadata_updates, handler_cancel, error)
        except Exception:
            log.exception("river: could not report the outcome of job %d", plan.job.id)
            self._release(run)

    def _release(self, run: JobRun) -> None:
        """Give the slot back without an outcome (the report itself failed)."""
        self._producers[run.queue].post(JobFinished(run.plan.job.id), urgent=True)
        with self._lock:
            self._forget_held(run)

    def _forget_held(self, run: JobRun) -> None:
        empty = self._runs.forget(run)
        slot = run.deadline_slot
        if slot is not None:
            run.deadline_slot = None
            if self._watchdog is not None:
                self._watchdog.drop(run, slot)
        if empty:  # what the only waiter, _stop, waits for
            self._runs_idle.notify_all()

    # ---------------------------------------------------------------- runtime queues (client.queues)

    def _add_queue(self, name: str, config: QueueConfig) -> None:
        with self._stop_lock:
            with self._lock:
                if self._lifecycle.ending:
                    raise RiverError(f"cannot add queue {name!r}: the client is {self._lifecycle.state}")
                producer = self._core.add_queue(name, config)
                started = self._lifecycle.running
            runner = MachineRunner(
                producer, self._db, name=f"producer-{name}", on_output=self._producer_hook(name),
                readonly=lambda intent: isinstance(intent, GetQueue),
            )
            self._producers[name] = runner
            if started:  # otherwise start() starts it with the others
                runner.start(self._core.producer_start())

    def _remove_queue(self, name: str, timeout: float | None) -> None:
        with self._stop_lock:
            if name not in self._core.queues:
                self._core.remove_queue(name)  # raises the not-added error
            runner = self._producers.get(name)
            if runner is not None and self._lifecycle.running:
                runner.post(Stop())
                if not runner.done.wait(timeout):
                    raise queue_still_busy(name, timeout)
                runner.finish()
                runner.join()
            with self._lock:
                self._core.remove_queue(name)
            self._producers.pop(name, None)


__all__ = ["Client", "ClientStats", "InsertManyParams", "MaintenanceConfig", "QueueConfig"]
