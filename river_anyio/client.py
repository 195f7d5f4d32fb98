"""The async River client, on trio or asyncio (AnyIO): inserting jobs and working them as tasks.

Same capabilities and names as ``river_sync.Client``; every rule comes from
``river_protocol`` (``client_core``, ``work``, the machines), so every driver
records identical rows. This module only does I/O and structured concurrency,
with trio's rules on both event loops (AnyIO task groups and cancel scopes).
``river_trio.Client`` and ``river_asyncio.Client`` are this class, bound to
their event loop (``ANYIO_BACKEND``).

Running it::

    async with river_trio.Client(url, queues=..., workers=...) as client:
        await client.insert(MyArgs(...))
    # leaving the block soft-stops (stop()); an exception in the block cancels
    # the client as a hard stop would and comes out in an ExceptionGroup

    async with anyio.create_task_group() as tg:   # or trio.open_nursery()
        client = river_asyncio.Client(url, ...)
        await tg.start(client.run)        # returns once producers are running
        ...
        await client.stop()               # or stop_and_cancel()

Everything the client starts (machine runners, notifier, leader services, job
tasks) lives in a nursery inside ``run``; nothing outlives it, and a crash in
any of them (a bug: machines never raise for database errors) ends the client
with that exception in an ``ExceptionGroup``. If ``run`` itself is cancelled
from outside, the client makes a hard stop first, shielded and bounded by
``CANCEL_GRACE`` seconds: running jobs are interrupted (back to ``available``
without consuming an attempt), outcomes are flushed and the leader resigns.

Async workers run inside a cancel scope (see ``river_anyio.context``); sync
workers run in threads and are cooperative only. Middleware entries are
``async def mw(ctx, args, call_next)`` with ``await call_next(ctx, args)``;
insert middleware entries are ``async def mw(params, call_next)`` around each
insert, with ``await call_next(params)`` (see ``river_protocol.middleware``).
"""

from __future__ import annotations

import inspect
import math
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import anyio
import anyio.abc
import anyio.to_thread

from river_anyio import _backend
from river_anyio.client_api import ClientAPI
from river_anyio.client_api import ErrorHandler as ErrorHandler
from river_anyio.client_api import job_log as job_log
from river_anyio.client_api import log as log
from river_anyio.context import CancellationToken, WorkContext
from river_anyio.resumable import resumable_middleware
from river_anyio.runner import MachineRunner
from river_db.client_base import queue_still_busy
from river_db.client_support import (
    ClientStats,
)
from river_db.deadline_buckets import DEADLINE_GRAIN as DEADLINE_GRAIN  # river_trio.client's, the tests'
from river_db.deadline_buckets import EMPTIED as _EMPTIED
from river_db.deadline_buckets import DeadlineBuckets, fire
from river_db.job_runs import JobRun
from river_db.resumable import ResumableAttempt, raised, returned
from river_protocol.client_core import (
    InsertManyParams,
    MaintenanceConfig,
    QueueConfig,
)
from river_protocol.errors import RiverError
from river_protocol.intents import InsertParams, InsertResult
from river_protocol.lifecycle import ClientState
from river_protocol.machines.base import Stop
from river_protocol.work import (
    CancelCause,
    WorkCancelled,
    not_run_error,
    outcome_from_result,
    wants_error_handler,
)
from river_protocol.workers import WorkerEntry

# The middleware shapes, awaitable here and plain in river_sync.client (the rest is client_api's).
CallNext = Callable[[WorkContext, Any], Awaitable[Any]]
Middleware = Callable[[WorkContext, Any, CallNext], Awaitable[Any]]
InsertNext = Callable[[Sequence[InsertParams]], Awaitable[list[InsertResult]]]
InsertMiddleware = Callable[[Sequence[InsertParams], InsertNext], Awaitable[list[InsertResult]]]

CANCEL_GRACE = 10.0  # seconds a cancelled run() may spend on its hard stop


# ---------------------------------------------------------------- deadlines


class _Deadlines(DeadlineBuckets):
    """One task firing run timeouts, in loop time (under trio a MockClock drives it in tests).

    A timer task per job, with its own cancel scope and sleep, was a third of a
    no-op job's cost; here a deadline is a dict entry in a bucket ``DEADLINE_GRAIN``
    wide (``river_db.deadline_buckets``: ``add``, ``bucket`` for a claim's runs sharing
    a deadline, ``drop`` when the run ends, an emptied bucket swapped for ``_EMPTIED``).
    The task sleeps in a cancel scope whose deadline is the earliest bucket's; only a
    new earliest slot moves it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._scope: Any = None

    def _new_earliest(self, slot: int) -> None:
        if self._scope is not None:
            self._scope.deadline = slot * DEADLINE_GRAIN

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        backend = _backend.current()
        task_status.started()
        while True:
            with backend.CancelScope(deadline=self.wake_at()) as scope:
                self._scope = scope
                await anyio.sleep_forever()
            self._scope = None
            now = backend.current_time()
            while (due := self.pop_due(now)) is not None:  # emptied buckets are skipped
                fire(due, log)


# ---------------------------------------------------------------- job tasks


class _JobTasks:
    """Runs waiting for a job task, and the job tasks parked waiting for a run.

    At most one task is being woken (or started, by ``spawn``) at a time: the
    one that takes a run wakes the next if runs are left. A claim of no-op jobs
    then costs one wake-up, not one per job, while jobs that wait still each
    get a task of their own at the next scheduling round. Tasks never exceed
    the most runs in progress at once; parked ones stay until the client's
    task group ends. The parking lot is the backend's (trio's own under trio).
    """

    def __init__(self, spawn: Callable[[], None], backend: _backend.Backend | None = None) -> None:
        self._spawn = spawn  # starts a new task, which calls arrived() first
        self._runs: deque[JobRun] = deque()
        self._parked = (backend or _backend.current()).ParkingLot()
        self._waking = 0  # tasks woken or started that have not looked for a run yet

    def submit(self, run: JobRun) -> None:
        self._runs.append(run)
        self._wake()

    def _wake(self) -> None:
        if self._runs and not self._waking:
            self._waking = 1
            if self._parked:
                self._parked.unpark()
            else:
                self._spawn()

    def arrived(self) -> None:
        """A task ``spawn`` started is running: the next submit may wake or start another."""
        self._waking -= 1

    def poll(self) -> JobRun | None:
        """The next run if one is waiting, without a coroutine (most takes, under load)."""
        if not self._runs:
            return None
        run = self._runs.popleft()
        self._wake()
        return run

    async def take(self) -> JobRun:
        """The next run, parking until one comes."""
        while not self._runs:
            await self._parked.park()
            self._waking -= 1
        run = self._runs.popleft()
        self._wake()
        return run


def _holds_cancelled(exc: BaseException, cancelled: type[BaseException]) -> bool:
    """The loop's cancellation, or a group holding one (a worker's own task group, cancelled)."""
    if isinstance(exc, cancelled):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.subgroup(cancelled) is not None


_Ended = tuple[Any, BaseException | None, str]  # a worker's result, error and traceback text


def _interrupted(run: JobRun, tb: Any = None) -> _Ended:
    """The ending of a run its token's cancellation interrupted; ``tb``, the cancellation's
    traceback, says where the worker was (its log line shows it, as a sync worker's does)."""
    cause = run.token.cause
    assert cause is not None
    return None, WorkCancelled(cause).with_traceback(tb), ""


def is_async_worker(entry: WorkerEntry) -> bool:
    """Async workers run as tasks (interruptible); anything else runs in a thread (cooperative)."""
    fn = entry.fn
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _returns_coroutine(fn: Any) -> bool:
    """``fn`` is an ``async def`` function or method (its code says so, not a marker): calling it
    always returns a coroutine."""
    return bool(getattr(getattr(fn, "__code__", None), "co_flags", 0) & inspect.CO_COROUTINE)


async def _maybe_await(value: Any) -> Any:
    if value is not None and inspect.isawaitable(value):  # None first: most jobs return it
        return await value
    return value


async def _resumable_only(ctx: WorkContext, args: Any) -> Any:
    """Stands for the chain ``resumable_middleware`` around an ``async def`` worker (no other
    middleware): ``Client._call_worker`` runs that itself, a coroutine less per job."""
    raise AssertionError("_resumable_only is a marker, never called")


# ---------------------------------------------------------------- the client


class Client(ClientAPI):
    """A River client on Postgres or SQLite, run under trio or asyncio.

    ``database``: a URL (``postgresql://...``, ``sqlite:///path``), a SQLite
    file path, a ``psycopg_pool.ConnectionPool``, a SQLAlchemy ``Engine`` or an
    ``AsyncDatabase``. The constructor does no I/O; a URL or path is
    opened when the client starts (or at the first call needing it) and closed
    when it stops. Without ``queues`` the client is insert-only.

    Workers are ``async def fn(ctx, args)`` (or ``fn(args)``), or plain
    functions that run in a thread. Outcomes as in ``river_sync``: returning
    completes; raising or returning ``JobSnooze``/``JobCancel``/``JobDiscard``
    (or a ``WorkOutcome``) requests that outcome; other exceptions are retried.
    ``error_handler(job, exc)`` (sync or async) may return True to cancel.
    """

    # The event loop this class runs on ('trio', 'asyncio'); None: whichever runs it.
    ANYIO_BACKEND: ClassVar[str | None] = None
    _log = log
    _job_log = job_log

    def _init_runtime(self) -> None:
        self._runs_empty = anyio.Event()
        self._runs_empty.set()
        # Sync workers' threads: bounded by the queues' max_workers already, so not by AnyIO's default 40.
        self._worker_threads = anyio.CapacityLimiter(math.inf)
        self._nursery: anyio.abc.TaskGroup | None = None
        self._runtime_scope: anyio.CancelScope | None = None
        self._stop_begun = False
        self._finished = anyio.Event()  # the stop sequence is done: run() may return
        self._runtime_exited = False
        self._deadlines = _Deadlines()
        self._backend: _backend.Backend | None = None  # the loop's primitives, once run() starts
        self._job_tasks: _JobTasks | None = None
        self._chains: dict[int, tuple[WorkerEntry, CallNext | None]] = {}
        self._cm_nursery: Any = None

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Client:
        cm = anyio.create_task_group()
        nursery = await cm.__aenter__()
        try:
            await nursery.start(self.run)
        except BaseException as exc:
            try:
                if not await cm.__aexit__(type(exc), exc, exc.__traceback__):
                    raise
            except BaseExceptionGroup as group:
                # run() failed before it started (a refused start): nothing else ran in this
                # nursery, so its error is raised as itself, as a sync client's start() raises it.
                if len(group.exceptions) == 1 and group.exceptions[0] is exc:
                    raise exc from None
                raise
        self._cm_nursery = cm
        return self

    async def __aexit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        cm, self._cm_nursery = self._cm_nursery, None
        if exc is None:
            try:
                await self.stop()
            except BaseException as stop_exc:
                return bool(await cm.__aexit__(type(stop_exc), stop_exc, stop_exc.__traceback__))
        # An exception in the block cancels the nursery: run() makes its shielded hard stop.
        return bool(await cm.__aexit__(typ, exc, tb))

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run the client until it is stopped; ``await nursery.start(client.run)`` returns once it works."""
        if self._lifecycle.state is not ClientState.NEW:
            raise RiverError(f"client cannot start: it is {self._lifecycle.state}")
        backend = self._backend = self._running_backend()
        self._job_tasks = _JobTasks(self._spawn_job_task, backend)
        self._lifecycle.advance(ClientState.STARTING)
        try:
            await self._check_schema(await self._ensure_db())
            if self._core.works_jobs:
                for intent in self._core.flow_control_setup():  # limited queues need the python line
                    await self.database.run(intent)
            async with anyio.create_task_group() as outer:
                await outer.start(self._runtime)
                task_status.started()
                try:
                    await self._finished.wait()
                except backend.cancelled:
                    if not self._runtime_exited:
                        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_GRACE):
                            await self._stop_sequence(hard=True, escalate_after=None)
                    raise
                finally:
                    if self._runtime_scope is not None:
                        self._runtime_scope.cancel()
        except BaseExceptionGroup as group:
            # The inner nursery's group is what callers see, not one wrapped in ours.
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], BaseExceptionGroup):
                raise group.exceptions[0] from None
            raise
        finally:
            self._lifecycle.end()
            self._events.close_all()
            await self._close_owned_db()
            self._finished.set()
            self._stopped.set()

    def _running_backend(self) -> _backend.Backend:
        backend = _backend.current()
        wanted = self.ANYIO_BACKEND
        if wanted is not None and backend.name != wanted:
            raise RiverError(
                f"{type(self).__module__}.{type(self).__qualname__} runs under {wanted}, not "
                f"{backend.name}: use river_{backend.name}.Client"
            )
        return backend

    async def _runtime(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # Shielded: an outside cancel of run() must leave producers and the completer up for
        # its hard stop; the scope is cancelled explicitly once run() is done with them.
        self._runtime_scope = anyio.CancelScope(shield=True)
        try:
            with self._runtime_scope:
                async with anyio.create_task_group() as nursery:
                    self._nursery = nursery
                    if self._core.works_jobs:
                        await self._start_runtime(nursery)
                    if self._lifecycle.state is ClientState.STARTING:  # else a stop came first
                        self._lifecycle.advance(ClientState.STARTED)
                    task_status.started()
                    await anyio.sleep_forever()
        finally:
            self._runtime_exited = True
            self._nursery = None

    async def _start_runtime(self, nursery: anyio.abc.TaskGroup) -> None:
        await nursery.start(self._deadlines.run)
        await self._start_machines()

    async def _stop(self, *, hard: bool, escalate_after: float | None) -> None:
        if self._lifecycle.state is ClientState.NEW:
            self._lifecycle.advance(ClientState.STOPPED)
            await self._close_owned_db()
            self._finished.set()
            self._stopped.set()
            return
        if not self._stop_begun:  # the sequence makes a hard stop's cancel itself
            await self._stop_sequence(hard=hard, escalate_after=escalate_after)
        elif hard:  # a hard stop during a soft one
            self._cancel_for_stop()
        await self._stopped.wait()

    async def _stop_sequence(self, *, hard: bool, escalate_after: float | None) -> None:
        if self._stop_begun:
            return
        self._stop_begun = True
        if hard:
            self._cancel_for_stop()
        self._lifecycle.advance(ClientState.STOPPING)
        try:
            if self._core.works_jobs and self._completer is not None:
                for runner in self._producers.values():
                    runner.post(Stop())
                if not await self._wait_producers(escalate_after):
                    log.warning("river: soft stop timed out; cancelling running jobs")
                    self._cancel_for_stop()
                    await self._wait_producers(None)
                # Every outcome must reach the completer before it is told to stop.
                while self._runs:
                    await self._runs_empty.wait()
                self._completer.post(Stop())
                await self._completer.done.wait()
                if self._promoter is not None:  # after the completer: its last completions promote too
                    self._promoter.post(Stop())
                    self._promoter.finish()
                    await self._promoter.done.wait()
            await self._leadership.stop()
        finally:
            self._finished.set()

    # ---------------------------------------------------------------- running jobs

    def _start_jobs(self, queue: str, jobs: Sequence[Any]) -> None:
        clock = type(self)._clock
        job_tasks, backend = self._job_tasks, self._backend
        assert job_tasks is not None and backend is not None
        new_event = backend.Event
        hook = self.testing_claim_hook  # TESTING ONLY (river_db.client_base.ClaimHook)
        held: list[JobRun] = []
        started = clock()  # once per claim, as river_sync reads it once per chunk: they start together
        # The timeout counts from the claim, as the threaded client's: jobs without their own
        # timeout share one timedelta (ClientCore.plan_job's), so with one base time for the
        # claim they share one deadline, and its slot is looked up once, not per job.
        deadlines, on_timeout = self._deadlines, self._on_timeout
        deadline_base = backend.current_time()
        slot_timeout: Any = None
        slot = 0
        bucket = _EMPTIED  # never written: the first run with a timeout looks its slot up
        for job in jobs:
            plan = self._core.plan_job(job)
            run = JobRun(queue, plan, CancellationToken(), started)
            self._runs.add(run)
            if self._runs_empty.is_set():
                self._runs_empty = new_event()
            if plan.immediate is not None:
                if self._error_handler is not None and self._nursery is not None:
                    self._nursery.start_soon(self._end_not_run, run)
                else:
                    self._finish_run(run, plan.immediate, metadata={})
                continue
            timeout = plan.timeout
            if timeout is not None:
                if timeout is not slot_timeout:
                    slot, bucket = deadlines.bucket(deadline_base + timeout.total_seconds())
                    slot_timeout = timeout
                bucket[run] = on_timeout
                run.deadline_slot = slot
            if hook is not None:
                held.append(run)
                continue
            job_tasks.submit(run)
        if held and hook is not None and self._nursery is not None:
            self._nursery.start_soon(self._start_after_hook, held, hook)

    async def _start_after_hook(self, runs: list[JobRun], hook: Any) -> None:
        """The claim is registered (remote cancels reach it); its jobs start once the hook returns."""
        queue = runs[0].queue
        try:
            jobs = [run.plan.job for run in runs]
            await anyio.to_thread.run_sync(hook, queue, jobs, abandon_on_cancel=True)
        finally:
            job_tasks = self._job_tasks
            if job_tasks is not None:
                for run in runs:
                    job_tasks.submit(run)

    def _async_chain(self, worker: WorkerEntry) -> CallNext | None:
        """The middleware chain around an async worker, built once per worker; None for a sync one."""
        cached = self._chains.get(id(worker))
        if cached is not None and cached[0] is worker:
            return cached[1]
        chain: CallNext | None = None
        if _returns_coroutine(worker.fn):
            # An ``async def``: its call is the coroutine to await, with no coroutine around it;
            # with no middleware but the resumable steps', _call_worker runs those itself.
            if len(self._middleware) == 1 and self._middleware[0] is resumable_middleware:
                chain = _resumable_only
            else:
                chain = self._with_middleware(worker.ctx_call)
        elif is_async_worker(worker):
            async def call(ctx: WorkContext, args: Any) -> Any:
                # _maybe_await inlined: a coroutine less per job.
                result = worker.call(ctx, args)
                if result is not None and inspect.isawaitable(result):
                    return await result
                return result

            chain = self._with_middleware(call)
        self._chains[id(worker)] = (worker, chain)
        return chain

    def _sync_chain(self, worker: WorkerEntry) -> CallNext:
        """The middleware chain around a sync worker, which runs in a thread."""
        async def call(ctx: WorkContext, args: Any) -> Any:
            result = await self._in_thread(lambda: worker.call(ctx, args))
            return await _maybe_await(result)

        return self._with_middleware(call)

    def _unwatch(self, run: JobRun) -> None:
        """The run ended: forget its deadline (``_start_jobs`` set it at the claim).

        At its timeout ``_on_timeout`` sets the run's token, not a deadline on the run's
        scope, so an async worker sees ``ctx.cancel_cause == TIMEOUT`` while it unwinds, as
        a sync worker does; then the run is watched for being stuck (``river_db.job_runs``).
        A sync worker's thread can't be interrupted: it keeps its slot until it returns, and
        the stuck check is what reports it.
        """
        if run.deadline_slot is not None:
            self._deadlines.drop(run, run.deadline_slot)
            run.deadline_slot = None

    def _on_timeout(self, run: JobRun) -> None:
        run.deadline_slot = None
        timeout = run.plan.timeout
        if self._runs.timeout_reached(run) and timeout is not None:
            # The timeout fired about start + timeout: stuck after the rest of stuck_after.
            later = (self._core.stuck_after(timeout) - timeout).total_seconds()
            assert self._backend is not None
            run.deadline_slot = self._deadlines.add(run, self._backend.current_time() + later, self._on_stuck)

    def _on_stuck(self, run: JobRun) -> None:
        run.deadline_slot = None
        self._runs.stuck_reached(run)

    async def _in_thread(self, fn: Callable[[], Any]) -> Any:
        """A sync worker: its thread can't be interrupted, so the timer only sets its token."""
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=False, limiter=self._worker_threads)

    def _spawn_job_task(self) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._job_task, name="river-job-task")

    async def _job_task(self) -> None:
        """A long-lived job task: works runs from ``_job_tasks`` until the client's nursery ends.

        Its runs share one cancel scope, which their tokens cancel; a scope can't be
        reopened, so once one is cancelled the rest of that run's ending happens outside
        it and the task goes on in a new one. A scope and a task per job were most of
        what trio spent on a no-op job. The scope is the backend's (trio's own under trio).
        """
        assert self._backend is not None and self._job_tasks is not None
        new_scope, job_tasks = self._backend.CancelScope, self._job_tasks
        job_tasks.arrived()
        while True:
            with new_scope() as scope:
                while True:
                    run = job_tasks.poll()
                    if run is None:
                        run = await job_tasks.take()
                    ended = await self._call_worker(run, scope)
                    # Only this run's token can have cancelled the scope (a token holds it only
                    # while its run runs), so an unset token skips trio's cancel_called, which
                    # reads the clock.
                    if run.token.cause is not None and scope.cancel_called:
                        break
                    if ended[1] is None:
                        self._end_returned(run, ended[0])
                    else:
                        await self._end_run(run, *ended)
            await self._end_run(run, *ended)

    async def _call_worker(self, run: JobRun, scope: Any) -> _Ended:
        """Run the worker and its middleware; (result, error, traceback text).

        An async worker's token cancels ``scope`` (its task's, shared by its runs). The
        token, not a deadline on the scope, carries the timeout, so an async worker sees
        ``ctx.cancel_cause == TIMEOUT`` while it unwinds, as a sync worker does.
        """
        worker = run.plan.worker
        assert worker is not None
        ctx = WorkContext(run.plan.job, run.plan.args, self, run.token)
        run.ctx = ctx
        chain = self._async_chain(worker)
        if chain is not None:
            run.token.scope = scope
            if run.token.cause is not None:
                scope.cancel()
        if self._hard_stop:
            run.token.cancel(CancelCause.STOP)
        try:
            if chain is _resumable_only:
                if not ResumableAttempt.quick(ctx):
                    return await resumable_middleware(ctx, run.plan.args, worker.call), None, ""
                # resumable_middleware's common case, inlined: one coroutine fewer per job.
                try:
                    result = await worker.call(ctx, run.plan.args)
                except BaseException:
                    if ctx._resumable_state is not None:
                        raised(ctx)
                    raise
                return returned(ctx, result), None, ""
            return await (chain or self._sync_chain(worker))(ctx, run.plan.args), None, ""
        except Exception as exc:
            return None, exc, traceback.format_exc()
        except BaseException as exc:
            # Ours only when this scope was cancelled; an outer cancellation ends the task.
            assert self._backend is not None
            if scope.cancel_called and _holds_cancelled(exc, self._backend.cancelled):
                return _interrupted(run, exc.__traceback__)
            raise
        finally:
            run.token.scope = None
            self._unwatch(run)

    async def _end_run(self, run: JobRun, result: Any, error: BaseException | None, trace: str) -> None:
        cause = run.token.cause
        outcome = outcome_from_result(result, error, trace=trace, cancel_cause=cause)
        handler_cancel = False
        if self._error_handler is not None and error is not None and wants_error_handler(outcome, cause):
            handler_cancel = await self._handler_cancels(run.plan.job, error)
        self._finish_run(run, outcome, run.ctx.metadata_updates, handler_cancel, error)

    async def _end_not_run(self, run: JobRun) -> None:
        """A job failed without running (unknown kind, undecodable args or row): the error handler
        sees it, as River Go's does, and may cancel it instead of its retry."""
        outcome = run.plan.immediate
        assert outcome is not None
        handler_cancel = False
        error = not_run_error(outcome)
        cause = run.token.cause
        if self._error_handler is not None and error is not None and wants_error_handler(outcome, cause):
            handler_cancel = await self._handler_cancels(run.plan.job, error)
        self._finish_run(run, outcome, {}, handler_cancel)

    async def _handler_cancels(self, job: Any, error: BaseException) -> bool:
        """Whether the (set) error handler, sync or async, asks to cancel ``job`` instead of its
        outcome; one that raises is logged and cancels nothing."""
        assert self._error_handler is not None
        try:
            return bool(await _maybe_await(self._error_handler(job, error)))
        except Exception:
            log.exception("river: error handler failed for job %d", job.id)
            return False

    def _end_returned(self, run: JobRun, result: Any) -> None:
        """``_end_run`` for a worker that returned: no error handler to await, so no coroutine."""
        outcome = outcome_from_result(result, None, trace="", cancel_cause=run.token.cause)
        self._finish_run(run, outcome, run.ctx.metadata_updates)

    def _forget_held(self, run: JobRun) -> None:
        self._runs.forget(run)
        if not self._runs:
            self._runs_empty.set()

    # ---------------------------------------------------------------- runtime queues (client.queues)

    def _add_queue(self, name: str, config: QueueConfig) -> None:
        if self._lifecycle.ending:
            raise RiverError(f"cannot add queue {name!r}: the client is {self._lifecycle.state}")
        producer = self._core.add_queue(name, config)
        if not self._lifecycle.running or self._nursery is None:
            return  # run() makes and starts its producer with the others
        runner = self._producer_runner(name, producer)
        self._producers[name] = runner
        setup = self._core.flow_control_setup({name: config})
        if setup:
            self._nursery.start_soon(self._run_limited_producer, name, runner, setup)
        else:
            self._nursery.start_soon(runner.run, self._core.producer_start())

    async def _run_limited_producer(self, name: str, runner: MachineRunner, setup: Sequence[Any]) -> None:
        """A queue with flow control added to a running client: its limits first, as at start."""
        try:
            for intent in setup:
                await self.database.run(intent)
        except RiverError as exc:
            log.error("river: queue %r was not started: %s", name, exc)
            if self._producers.get(name) is runner:  # not worked: as if never added
                del self._producers[name]
                self._core.remove_queue(name)
            return
        await runner.run(self._core.producer_start())

    async def _remove_queue(self, name: str, timeout: float | None) -> None:
        if name not in self._core.queues:
            self._core.remove_queue(name)  # raises the not-added error
        runner = self._producers.get(name)
        if runner is not None and self._lifecycle.running and runner.started:
            runner.post(Stop())
            with anyio.move_on_after(timeout):
                await runner.done.wait()
            if not runner.done.is_set():
                raise queue_still_busy(name, timeout)
            runner.finish()
        self._core.remove_queue(name)
        self._producers.pop(name, None)


__all__ = ["Client", "ClientStats", "InsertManyParams", "MaintenanceConfig", "QueueConfig"]
