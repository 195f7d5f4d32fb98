"""The client's calls that are the same on tasks and on threads: the database it opens, inserting,
waiting for results, events, stopping. ``Client`` (``client``) adds its runtime: job tasks and
deadline buckets under an event loop, job threads and a watchdog on threads.

The threaded client's copy of this module is generated from the async one
(``tools/async_to_sync.py``). Where the two differ only in a primitive (an event, a lock,
waiting with a timeout, the clock) the call goes through ``_backend``, which has the same
names on both sides; where they differ more, an ``if True:  # ASYNC`` branch says how.

Every rule comes from ``river_protocol`` and ``river_db.client_base.ClientBase``; this module
only runs I/O. Nothing here is on the claim-run-complete path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from river_anyio import _backend
from river_anyio.admin import JobsAPI, QueuesAPI, WorkflowsAPI
from river_anyio.database import AsyncDatabase
from river_anyio.events import EventHub, Subscription
from river_anyio.leadership import LeaderDriver
from river_anyio.notifier import NotifierProtocol, NullNotifier, notifier_for
from river_anyio.notifier import Subscription as NotifySubscription
from river_anyio.resumable import resumable_middleware
from river_anyio.runner import MachineRunner, utcnow
from river_db.client_base import ClientBase
from river_db.insert_middleware import insert_chain
from river_db.start_checks import APPLIED_VERSIONS, check_schema, refuse_missing_sqlite_file
from river_db.waits import job_id_of, timeout_seconds, widened, workflow_id_of
from river_protocol.admin import deliver_control_locally
from river_protocol.client_core import EventKind, InsertManyParams, InsertPlan
from river_protocol.errors import RiverError, ValidationError
from river_protocol.intents import GetJob, GetQueue, InsertParams, InsertResult, ListWorkflowTasks
from river_protocol.job import JobRow
from river_protocol.leadership import PeriodicJob
from river_protocol.lifecycle import ClientState
from river_protocol.machines.base import Event
from river_protocol.machines.notifications import (
    TOPIC_CONTROL,
    TOPIC_FINISHED,
    TOPIC_INSERT,
    TOPIC_LEADERSHIP,
)
from river_protocol.options import InsertOpts
from river_protocol.work import CancelCause
from river_protocol.workflow import (
    Backoff,
    WaitTimeoutError,
    Workflow,
    WorkflowInsertResult,
    wait_outcome,
    workflow_wait_outcome,
)

if True:  # ASYNC
    import anyio
    import anyio.abc

    from river_db.connect import sqlalchemy_kind
    from river_db.urls import dialect_of_url

if TYPE_CHECKING:
    from river_anyio.client import Client

# A wait's read of the database, which gives (the last row or None, the outcome or None to wait on).
Read = Callable[[AsyncDatabase], Any]

# The client's loggers, which ``client`` uses and re-exports. Named outright, not from
# ``__name__`` (this module's is ``client_api``), since docs/guides/client.md (Logging) documents
# these names. ``job_log`` gets one line per run that does not complete (river_protocol.run_log).
if True:  # ASYNC
    log = logging.getLogger("river_anyio.client")
    job_log = logging.getLogger("river_anyio.jobs")
else:
    log = logging.getLogger("river_sync.client")
    job_log = logging.getLogger("river_sync.jobs")

# The shape of the client's ``error_handler`` (re-exported by ``client``; on the async clients it
# may return an awaitable). Its middleware shapes differ by that awaitable, so each client.py has them.
ErrorHandler = Callable[[Any, BaseException], Any]


# ---------------------------------------------------------------- database argument


if True:  # ASYNC
    def _dialect_of(database: Any) -> str:
        """'postgres' or 'sqlite' for any accepted ``database`` argument, without connecting."""
        if isinstance(database, AsyncDatabase):
            return database.dialect.name
        if isinstance(database, Path):
            return "sqlite"
        if isinstance(database, str):
            return dialect_of_url(database)
        module = type(database).__module__
        if module.startswith("psycopg_pool"):
            return "postgres"
        if module.startswith("sqlalchemy"):
            return sqlalchemy_kind(database)
        raise _unsupported(database)


def _unsupported(database: Any) -> ValidationError:
    handle = AsyncDatabase
    return ValidationError(
        f"unsupported database {type(database).__qualname__}: pass a URL, a SQLite path, a "
        f"psycopg_pool.ConnectionPool, a SQLAlchemy Engine or a {handle.__module__}.{handle.__qualname__}"
    )


def _refuse_other_schema(database: AsyncDatabase, schema: str | None) -> None:
    if schema is not None and database.dialect.schema != schema:
        raise ValidationError(
            f"schema {schema!r} differs from the database handle's schema {database.dialect.schema!r}"
        )


async def _open_database(database: Any, schema: str | None) -> tuple[AsyncDatabase, bool]:
    """(AsyncDatabase, owned) for any accepted ``database`` argument."""
    if isinstance(database, AsyncDatabase):
        _refuse_other_schema(database, schema)
        return database, False
    if isinstance(database, Path):
        refuse_missing_sqlite_file(database)
        return await AsyncDatabase.from_sqlite_path(str(database), schema=schema), True
    if isinstance(database, str):
        refuse_missing_sqlite_file(database)
        return await AsyncDatabase.from_url(database, schema=schema), True
    module = type(database).__module__
    if module.startswith("psycopg_pool"):
        return AsyncDatabase.from_pool(database, schema=schema), False
    if module.startswith("sqlalchemy"):
        return AsyncDatabase.from_sqlalchemy_engine(database, schema=schema), False
    raise _unsupported(database)


# ---------------------------------------------------------------- the calls


class ClientAPI(ClientBase):
    """What ``Client`` does the same way on tasks and on threads (see the module docstring)."""

    _clock = utcnow
    _outermost = resumable_middleware
    jobs: JobsAPI
    queues: QueuesAPI
    workflows: WorkflowsAPI
    _leadership: LeaderDriver
    _events: EventHub
    _producers: dict[str, MachineRunner]
    _completer: MachineRunner | None
    _db: AsyncDatabase | None
    if True:  # ASYNC
        _nursery: anyio.abc.TaskGroup | None  # run()'s, while the client runs

    def _bind_database(self, database: Any, schema: str | None) -> str:
        self._database_arg = database  # what `river work` reads its URL from
        self._schema_arg = schema
        if True:  # ASYNC
            # Opened when the client starts or at the first call that needs it: no I/O here.
            dialect = _dialect_of(database)
            if isinstance(database, AsyncDatabase):
                _refuse_other_schema(database, schema)
            self._db = database if isinstance(database, AsyncDatabase) else None
            self._owns_db = False
            return dialect
        else:
            self._db, self._owns_db = _open_database(database, schema)
            return self._db.dialect.name

    def _make_leadership(self, periodic_jobs: Sequence[PeriodicJob]) -> LeaderDriver:
        return LeaderDriver(self._core, self._db, periodic_jobs)

    def _init_driver(self) -> None:
        client = cast("Client", self)  # Client is the one subclass
        self.jobs = JobsAPI(client)
        self.queues = QueuesAPI(client)
        self.workflows = WorkflowsAPI(client)
        self._events = EventHub()
        self._stopped = _backend.Event()  # the client has stopped (run() has returned)
        self._open_lock = _backend.Lock()
        self._notifier: NotifierProtocol | None = None
        self._notify_subs: list[NotifySubscription] = []
        self._init_runtime()

    def _init_runtime(self) -> None:
        """The runtime's own state (``Client``'s)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- properties

    @property
    def schema(self) -> str | None:
        if self._db is not None:
            return self._db.dialect.schema
        return self._schema_arg

    @property
    def database(self) -> AsyncDatabase:
        """The open ``AsyncDatabase`` (a URL or path is opened at the start or the first call needing it)."""
        if self._db is None:
            raise RiverError("the client's database is not open yet: start the client or await a call first")
        return self._db

    async def wait_leader(self, value: bool = True, timeout: float | None = None) -> bool:
        """Wait until ``is_leader == value``; False if ``timeout`` (seconds) passed first."""
        if True:  # ASYNC
            with anyio.move_on_after(timeout):
                await self._leadership.wait_leader(value)
                return True
            return False
        else:
            return self._leadership.wait_leader(value, timeout)

    async def _ensure_db(self) -> AsyncDatabase:
        db = self._db
        if db is not None:
            return db
        async with self._open_lock:
            if self._db is None:
                if self._lifecycle.state is ClientState.STOPPED:
                    raise RiverError("the client is stopped")
                self._db, self._owns_db = await _open_database(self._database_arg, self._schema_arg)
                self._leadership._db = self._db
            return self._db

    async def aclose(self) -> None:
        """Close a database the client opened itself (for insert-only use, never started)."""
        if self._lifecycle.state in (ClientState.NEW, ClientState.STOPPED):
            await self._close_owned_db()

    async def _close_owned_db(self) -> None:
        if self._owns_db and self._db is not None:
            if True:  # ASYNC
                with anyio.CancelScope(shield=True):
                    await self._db.aclose()
            else:
                self._db.close()

    async def _check_schema(self, db: AsyncDatabase) -> None:
        """Refuse a database without River's tables, or with an older schema, before anything runs."""
        applied = await db.run(APPLIED_VERSIONS, readonly=True)
        check_schema(db.dialect.name, applied, self._database_arg, self.schema)

    # ---------------------------------------------------------------- insert

    async def insert(self, args: Any, opts: InsertOpts | None = None, *, tx: Any = None) -> InsertResult:
        """Insert one job; with ``tx`` it exists (and is announced) only if ``tx`` commits."""
        return (await self._insert((InsertManyParams(args, opts),), tx))[0]

    async def insert_many(self, items: Iterable[Any], *, tx: Any = None) -> list[InsertResult]:
        """Insert args / ``InsertManyParams`` atomically; results follow the input order."""
        return await self._insert(tuple(items), tx)

    async def insert_workflow(self, workflow: Workflow, *, tx: Any = None) -> WorkflowInsertResult:
        """Insert ``workflow``'s tasks in one statement batch (all or none; ``tx`` as for
        ``insert_many``). Tasks with deps wait in ``pending`` until their deps complete."""
        with self._guard:
            workflow_id, tasks, plan = self._core.plan_workflow(workflow, type(self)._clock())
        results = await self._insert_planned(plan, tx)
        self._grown(workflow, workflow_id, tx)
        return WorkflowInsertResult(workflow_id, workflow.name, dict(zip(tasks, results, strict=True)))

    async def _insert(self, items: Sequence[Any], tx: Any) -> list[InsertResult]:
        with self._guard:
            plan = self._core.plan_insert(items, type(self)._clock())
        return await self._insert_planned(plan, tx)

    async def _insert_planned(self, plan: InsertPlan, tx: Any) -> list[InsertResult]:
        if self._insert_middleware:
            return await self._insert_through_middleware(plan, tx)
        return await self._insert_plan(plan, tx)

    async def _insert_through_middleware(self, plan: InsertPlan, tx: Any) -> list[InsertResult]:
        async def innermost(jobs: Sequence[InsertParams]) -> list[InsertResult]:
            return await self._insert_plan(plan.with_jobs(jobs), tx)

        return list(await insert_chain(self._insert_middleware, innermost)(plan.insert.jobs))

    async def _insert_plan(self, plan: InsertPlan, tx: Any) -> list[InsertResult]:
        if tx is not None:
            from river_anyio.caller_tx import executor_for_caller_tx

            executor = await executor_for_caller_tx(tx, schema=self.schema, expect=self.dialect_name)
            # The Notify rides in the insert's transaction: announced only if it commits.
            results = [await executor.run(intent) for intent in plan.intents]
            return list(results[0])
        db = await self._ensure_db()
        async with db.transaction() as ex:
            results = [await ex.run(intent) for intent in plan.intents]
        # Our own producers hear about it at once, listener or not (§5.4).
        self._poke(plan.available_queues)
        return list(results[0])

    # ---------------------------------------------------------------- waiting for results

    async def wait_job(self, job: JobRow | InsertResult | int, *,
                       timeout: timedelta | float | None = None) -> JobRow:
        """The job's final row (with its recorded output) once it completes.

        Raises ``WorkflowTaskFailedError`` when it ends discarded or cancelled, and
        ``WaitTimeoutError`` (a ``TimeoutError``) when ``timeout`` (seconds or a timedelta;
        None: no limit) passes first. This client's own completions wake the wait at once;
        others are seen by a re-check on a bounded back-off (10 ms doubling to 1 s).
        """
        job_id = job_id_of(job)

        async def read(db: AsyncDatabase) -> tuple[Any, Any]:
            row = await db.run(GetJob(job_id), readonly=True)
            return row, wait_outcome(row)

        return await self._wait(read, {"job_id": job_id}, timeout, f"job {job_id}")  # type: ignore[no-any-return]

    async def wait_workflow(self, workflow: WorkflowInsertResult | str, *,
                            timeout: timedelta | float | None = None) -> tuple[JobRow, ...]:
        """Every task's final row once all completed; ``WorkflowTaskFailedError`` once all are
        final and some failed (``.jobs``: those); ``WaitTimeoutError`` as for ``wait_job``."""
        workflow_id = workflow_id_of(workflow)

        async def read(db: AsyncDatabase) -> tuple[Any, Any]:
            rows = await db.run(ListWorkflowTasks(workflow_id), readonly=True)
            return None, workflow_wait_outcome(rows, workflow_id)

        return await self._wait(read, {"workflow_id": workflow_id}, timeout,  # type: ignore[no-any-return]
                                f"workflow {workflow_id}")

    async def _wait(self, read: Read, watch: dict[str, Any], timeout: timedelta | float | None,
                    what: str) -> Any:
        seconds = timeout_seconds(timeout)
        deadline = None if seconds is None else _backend.current_time() + seconds
        db = await self._ensure_db()
        backoff = Backoff()
        while True:
            woken = _backend.Event()
            unwatch = self._waits.watch(woken.set, **watch)  # before the read: no wake-up is missed
            try:
                last, outcome = await read(db)
                watch = widened(watch, last)
                if isinstance(outcome, BaseException):
                    raise outcome
                if outcome is not None:
                    return outcome
                pause = backoff.next()
                if deadline is not None:
                    left = deadline - _backend.current_time()
                    if left <= 0:
                        raise WaitTimeoutError(f"{what} was not final after {seconds} s", last)
                    pause = min(pause, left)
                await _backend.wait_event(woken, pause)
            finally:
                unwatch()

    # ---------------------------------------------------------------- events

    def subscribe(self, kinds: Iterable[EventKind | str] | None = None, maxsize: int = 1000) -> Subscription:
        """Events of ``kinds`` (all when None) in a bounded buffer; overflow is counted in ``dropped``."""
        return self._events.subscribe(kinds, maxsize)

    # ---------------------------------------------------------------- stopping

    async def stop(self, timeout: timedelta | float | None = None) -> None:
        """Soft stop: stop fetching, let running jobs finish, flush their outcomes, then return
        once the client has stopped.

        Jobs still running after ``timeout`` (default: ``soft_stop_timeout``; seconds, or a
        timedelta) are cancelled as by ``stop_and_cancel``. Without either, it waits for every job.
        """
        limit = timeout if timeout is not None else self.soft_stop_timeout
        seconds = limit.total_seconds() if isinstance(limit, timedelta) else limit
        await self._stop(hard=False, escalate_after=seconds)

    async def stop_and_cancel(self) -> None:
        """Hard stop: cancel every running job (stop cause), then stop as ``stop()`` does.

        Each job's cancellation token is set; an async worker is also interrupted at its
        next checkpoint. Jobs so interrupted, and those whose worker gives up with
        ``WorkCancelled``, go back to ``available`` without consuming an attempt (River's
        "interrupted").
        """
        await self._stop(hard=True, escalate_after=None)

    async def _stop(self, *, hard: bool, escalate_after: float | None) -> None:
        raise NotImplementedError

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until the client has stopped; False if ``timeout`` (seconds) passed first."""
        return await _backend.wait_event(self._stopped, timeout)

    def _cancel_for_stop(self) -> None:
        """A hard stop: every running job's token is set, and jobs started from now on start cancelled."""
        with self._guard:
            self._hard_stop = True
        self._cancel_all(CancelCause.STOP)

    async def _wait_producers(self, timeout: float | None) -> bool:
        """Whether every started producer ended within ``timeout`` seconds (None: no limit)."""
        deadline = None if timeout is None else _backend.current_time() + timeout
        for runner in list(self._producers.values()):
            if runner.started:
                left = None if deadline is None else max(deadline - _backend.current_time(), 0.0)
                if not await _backend.wait_event(runner.done, left):
                    return False
        return True

    # ---------------------------------------------------------------- starting

    async def _start_machines(self) -> None:
        """Start the completer, the workflow promoter, the notifier, a producer a queue and
        leadership: each runner as ``_start_runner`` starts one (a task in run()'s nursery, a thread)."""
        db = self.database
        self._completer = MachineRunner(
            self._core.make_completer(), db, name="completer", on_output=self._on_completer_output
        )
        await self._start_runner(self._completer)
        self._promoter = MachineRunner(
            self._core.make_workflow_promoter(), db, name="workflow-promoter",
            on_output=self._on_promoter_output,
        )
        await self._start_runner(self._promoter)
        # Queues added before the start are in the core's queues: made here with the others.
        for name, producer in self._core.make_producers().items():
            self._producers[name] = self._producer_runner(name, producer)
        notifier = notifier_for(db, enabled=self._core.config.notifications, listen_url=self._listen_url)
        targets = {TOPIC_INSERT: self._on_notification, TOPIC_CONTROL: self._on_notification,
                   TOPIC_FINISHED: self._on_finished}  # one listener for every wait (river_db.waits)
        if self._leadership.enabled:
            targets[TOPIC_LEADERSHIP] = self._leadership.on_notification
        for topic, target in targets.items():
            self._notify_subs.append(await notifier.subscribe(topic, target))
        if True:  # ASYNC
            await self._task_group().start(notifier.run)
        else:
            notifier.start()
        if not await notifier.probe(self.testing_listen_probe_timeout):
            if True:  # ASYNC
                pass  # its task ends with run()'s nursery
            else:
                notifier.stop()
            notifier = NullNotifier()
            self._listener_unavailable()
        self._notifier = notifier
        for runner in self._producers.values():
            await self._start_runner(runner, self._core.producer_start())
        if True:  # ASYNC
            await self._leadership.start(self._task_group(), db)
        else:
            self._leadership.start()

    async def _start_runner(self, runner: MachineRunner, *initial: Event) -> None:
        if True:  # ASYNC
            await self._task_group().start(runner.run, *initial)
        else:
            runner.start(*initial)

    if True:  # ASYNC
        def _task_group(self) -> anyio.abc.TaskGroup:
            assert self._nursery is not None
            return self._nursery

    # ---------------------------------------------------------------- control and producers

    async def _deliver_control(self, payload: str, *, in_caller_tx: bool) -> None:
        """Hand this client's own control message to its producers where ``deliver_control_locally``
        says so; return once each running one applied it (a pause then holds when pause() returns)."""
        if not deliver_control_locally(payload, in_caller_tx=in_caller_tx,
                                       listening=self._core.config.notifications):
            return
        for runner, ack in self._post_own_control(payload, _backend.Event):
            # A runner that ended meanwhile will never answer; nothing of it fetches either.
            await _backend.wait_either(ack, runner.done)

    def _producer_runner(self, name: str, producer: Any) -> MachineRunner:
        return MachineRunner(
            producer, self.database, name=f"producer-{name}", on_output=self._producer_hook(name),
            readonly=lambda intent: isinstance(intent, GetQueue),
        )


__all__ = ["ClientAPI"]
