"""Run a worker on one job and see what River would record: ``work_once`` and ``work_with_client``.

Both go through the code the client itself uses: ``ClientCore.plan_job``
(unknown kinds, args decoding, the job timeout), ``outcome_from_result``,
``wants_error_handler`` and ``ClientCore.finish_job`` (retry policy, snoozes,
metadata), so the ``SetStateUpdate`` in a ``WorkResult`` is the one a running
client would hand its completer.

``work_once`` needs no database: the worker's ``ctx.client`` is an
``OfflineClient`` that raises on use, unless a real client is passed.
``work_with_client`` inserts through a real (not started) client, claims the
job, runs it with that client in its context and records the outcome with the
real set-state statement (River's ``rivertest.Worker.Work``).

The run is the client's. On the threaded client a worker runs in the calling
thread and a timer sets its token at the job's timeout. On the async clients
an async worker runs as a task inside a cancel scope whose deadline is the
job's timeout (on the loop's clock, so under trio a ``trio.testing.MockClock``
drives it) and which a set token cancels; an interruption is recorded as the
client records it (``WorkCancelled`` with the token's cause). A sync worker
runs in a worker thread and is cooperative: a timer task sets its token at the
timeout. Middleware is the client's (``async def mw(ctx, args, call_next)`` on
the async clients); an error handler may be sync or async there.

Differences from a running client, on purpose: only ``Exception`` is captured,
so ``NoDatabaseError``, ``KeyboardInterrupt``, ``SystemExit`` and pytest's own
outcomes (``pytest.fail``, ``pytest.skip``) propagate to the test instead of
failing the job.
"""

from __future__ import annotations

import inspect
import math
import traceback
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from river_anyio.context import CancellationToken, WorkContext
from river_anyio.executor import AsyncExecutor
from river_anyio.runner import utcnow
from river_db.testing.offline import NoDatabaseError, OfflineClient, claim_plan
from river_db.testing.runs import (
    Ran,
    RunSetup,
    WorkResult,
    calls_error_handler,
    finished_run,
    job_to_work,
    run_seconds,
    setup_run,
    skipped_run,
    work_result,
)
from river_protocol.errors import RiverError
from river_protocol.intents import SetStateIfRunning
from river_protocol.job import JobRow
from river_protocol.options import InsertOpts
from river_protocol.outcomes import apply_set_state
from river_protocol.retry import RetryPolicy
from river_protocol.work import (
    CancelCause,
    WorkCancelled,
    outcome_from_result,
)

if True:  # ASYNC
    import anyio
    import anyio.to_thread
else:
    import threading
    from collections.abc import Iterator
    from contextlib import contextmanager

    from river_db.testing.offline import claim_job
    from river_db.testing.runs import client_settings

if TYPE_CHECKING:
    from river_anyio.client import Client

ErrorHandler = Callable[[Any, BaseException], Any]
CallNext = Callable[[WorkContext, Any], Any]  # on the async clients, returns an awaitable
Middleware = Callable[[WorkContext, Any, CallNext], Any]


# ---------------------------------------------------------------- running

if True:  # ASYNC
    async def _maybe_await(value: Any) -> Any:
        if inspect.isawaitable(value):
            return await value
        return value

    async def _in_thread(fn: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=False)

    def _call_chain(
        setup: RunSetup, worker: Any, token: CancellationToken, seconds: float | None
    ) -> CallNext:
        from river_anyio.client import is_async_worker

        call: CallNext
        if is_async_worker(worker):
            async def call(ctx: WorkContext, args: Any) -> Any:
                return await _maybe_await(worker.call(ctx, args))
        else:
            async def call(ctx: WorkContext, args: Any) -> Any:
                async def set_token_at_deadline() -> None:
                    await anyio.sleep(math.inf if seconds is None else seconds)
                    token.cancel(CancelCause.TIMEOUT)

                result: Any = None
                error: Exception | None = None
                async with anyio.create_task_group() as nursery:
                    nursery.start_soon(set_token_at_deadline)
                    # Captured, then raised outside the task group: the worker's error must not come
                    # back wrapped in an exception group.
                    try:
                        result = await _in_thread(lambda: worker.call(ctx, args))
                    except Exception as exc:
                        error = exc
                    nursery.cancel_scope.cancel()
                if error is not None:
                    raise error
                return await _maybe_await(result)

        for mw in reversed(setup.middleware):
            call = (lambda m, nxt: lambda c, a: m(c, a, nxt))(mw, call)
        return call
else:
    @contextmanager
    def _deadline(token: CancellationToken, seconds: float | None) -> Iterator[None]:
        """Set ``token`` with the timeout cause after ``seconds``, as the client's watchdog does."""
        if seconds is None:
            yield
            return
        timer = threading.Timer(seconds, lambda: token.cancel(CancelCause.TIMEOUT))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()


async def _run(
    setup: RunSetup,
    job: JobRow,
    client: Any,
    *,
    now: datetime | None,
    timeout: timedelta | float | None,
    cancel: CancelCause | None,
) -> Ran:
    """Plan, run and finish ``job`` as the client's job thread or task does, in the caller."""
    core = setup.core
    plan = core.plan_job(job)
    started_at = now or utcnow()
    token = CancellationToken()
    if cancel is not None:
        token.cancel(cancel)
    if plan.immediate is not None:
        return skipped_run(core, plan, started_at=started_at, finished_at=now or utcnow(), cause=token.cause)

    seconds = run_seconds(plan, timeout)
    worker = plan.worker
    assert worker is not None
    ctx = WorkContext(job, plan.args, client, token)
    result: Any = None
    error: Exception | None = None
    trace = ""
    if True:  # ASYNC
        from river_anyio.client import is_async_worker

        scope = anyio.CancelScope()
        if is_async_worker(worker):
            if seconds is not None:
                scope.deadline = anyio.current_time() + seconds
            token.scope = scope
            if token.cause is not None:
                scope.cancel()
        try:
            with scope:
                result = await _call_chain(setup, worker, token, seconds)(ctx, plan.args)
        except NoDatabaseError:
            raise  # a test set-up mistake, not the job's failure
        except Exception as exc:
            error, trace = exc, traceback.format_exc()
        token.scope = None
        if scope.cancelled_caught:
            token.cancel(CancelCause.TIMEOUT)  # no-op when a cause was already set
            assert token.cause is not None
            result, error, trace = None, WorkCancelled(token.cause), ""
    else:
        call: Callable[[WorkContext, Any], Any] = worker.call
        for mw in reversed(setup.middleware):
            call = (lambda m, nxt: lambda c, a: m(c, a, nxt))(mw, call)
        with _deadline(token, seconds):
            try:
                result = call(ctx, plan.args)
            except NoDatabaseError:
                raise  # a test set-up mistake, not the job's failure
            except Exception as exc:
                error, trace = exc, traceback.format_exc()
    cause = token.cause
    outcome = outcome_from_result(result, error, trace=trace, cancel_cause=cause)
    handler_cancel = False
    if calls_error_handler(setup, outcome, error, cause):
        if True:  # ASYNC
            handler_cancel = bool(await _maybe_await(setup.error_handler(job, error)))
        else:
            handler_cancel = bool(setup.error_handler(job, error))
    return finished_run(core, plan, outcome, result=result, error=error, trace=trace, cause=cause,
                        handler_cancel=handler_cancel, metadata=dict(ctx.metadata_updates),
                        started_at=started_at, finished_at=now or utcnow(),
                        completed_in_tx=ctx.completed_in_tx)


# ---------------------------------------------------------------- work_once


async def work_once(
    workers_or_callable: Any,
    args_or_job: Any,
    *,
    opts: InsertOpts | None = None,
    client: Any = None,
    now: datetime | None = None,
    timeout: timedelta | float | None = None,
    cancel: CancelCause | None = None,
    attempt: int = 1,
    args_type: type | None = None,
    job_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    max_attempts: int | None = None,
    middleware: Sequence[Middleware] | None = None,
    error_handler: ErrorHandler | None = None,
    rand: float | None = None,
) -> WorkResult:
    """Run a worker on one job without a database and return what River would record.

    ``workers_or_callable``: a ``Workers`` bundle, a worker object with
    ``work(ctx, args)`` or a function ``fn(ctx, args)`` / ``fn(args)`` (on the
    async clients also ``async def``). ``args_or_job``: an args value (a running
    job is built for it with ``build_job(args, opts, attempt=attempt, now=now)``)
    or a ``JobRow``, used as the claimed row exactly as given.

    ``client``: the ``ctx.client`` the worker sees (default: an
    ``OfflineClient`` that raises); a ``Client`` of this driver also lends its
    job timeout, retry policy, max attempts, middleware and error handler, which
    the keyword arguments override. ``now`` fixes the clock of the run (start
    and finish), making retry and snooze times exact; ``rand`` (in [0, 1))
    fixes the retry jitter. ``timeout``: the job's deadline (seconds or a
    timedelta; 0 = none; on the loop's clock on the async clients), default the
    worker's or client's as in production; ``cancel`` sets the token before the
    run (a remote cancel, a stop).
    """
    job, workers = job_to_work(workers_or_callable, args_or_job, opts=opts, client=client,
                               now=now or utcnow(), attempt=attempt, args_type=args_type,
                               max_attempts=max_attempts)
    setup = setup_run(workers, client, job_timeout=job_timeout, retry_policy=retry_policy,
                      max_attempts=max_attempts, middleware=middleware, error_handler=error_handler,
                      rand=rand)
    ctx_client = client if client is not None else OfflineClient(setup.core.config.client_id)
    ran = await _run(setup, job, ctx_client, now=now, timeout=timeout, cancel=cancel)
    return work_result(ran, apply_set_state(job, ran.update, ran.finished_at))


# ---------------------------------------------------------------- work_with_client


@asynccontextmanager
async def client_transaction(client: Client, tx: Any) -> AsyncIterator[AsyncExecutor]:
    """An executor in ``tx`` (the caller's transaction) or in a new transaction of the client's."""
    if tx is None:
        if True:  # ASYNC
            db = await client._ensure_db()
        else:
            db = client.database
        async with db.transaction() as ex:
            yield ex
        return
    from river_anyio.caller_tx import executor_for_caller_tx

    if True:  # ASYNC  # noqa: SIM108 (one line each side)
        expect = client.dialect_name
    else:
        expect = client.database.dialect.name
    yield await executor_for_caller_tx(tx, schema=client.schema, expect=expect)


async def _claim(ex: AsyncExecutor, job: JobRow, client_id: str) -> JobRow:
    if True:  # ASYNC
        # The claim is a plan: the executor's runner drives it, in a worker thread on a blocking
        # connection or on the caller's asyncio-native one (psycopg/SQLAlchemy async, asyncpg).
        running: JobRow = await ex.runner.run_plan(claim_plan(ex.dialect, job, client_id))
        return running
    else:
        return claim_job(ex, job, client_id)


async def work_with_client(
    client: Client,
    args_or_job: Any,
    opts: InsertOpts | None = None,
    *,
    tx: Any = None,
    timeout: timedelta | float | None = None,
    cancel: CancelCause | None = None,
    rand: float | None = None,
) -> WorkResult:
    """Insert ``args`` through ``client`` (not started), claim the job, work it, record the outcome.

    The worker comes from the client's ``Workers`` and gets the client as
    ``ctx.client``; the client's middleware, error handler, retry policy and
    job timeout apply. The outcome goes through the completer's set-state
    statement, and ``WorkResult.job`` is the row read back afterwards.

    With ``tx`` every step runs in that transaction, as River's
    ``rivertest.Worker.Work`` does, so rolling it back leaves nothing behind:
    any kind the client's ``insert(..., tx=)`` takes (one adapter decides,
    ``river_anyio.caller_tx``): a psycopg, SQLAlchemy Connection/Session or sqlite
    connection, and on asyncio also psycopg's ``AsyncConnection``, SQLAlchemy's
    ``AsyncConnection``/``AsyncSession`` and asyncpg's ``Connection``. A
    ``JobRow`` instead of args works that existing job.
    """
    if isinstance(args_or_job, JobRow):
        job = args_or_job
    else:
        inserted = await client.insert(args_or_job, opts, tx=tx)
        job = inserted.job
    setup = setup_run(None, client, job_timeout=None, retry_policy=None, max_attempts=None,
                      middleware=None, error_handler=None, rand=rand)
    async with client_transaction(client, tx) as ex:
        running = await _claim(ex, job, client.client_id)
    ran = await _run(setup, running, client, now=None, timeout=timeout, cancel=cancel)
    async with client_transaction(client, tx) as ex:
        rows = await ex.run(SetStateIfRunning(updates=(ran.update,)))
        final: JobRow | None = rows[0] if rows else None
    if final is None:
        raise RiverError(f"job {running.id} was deleted while it ran; its outcome could not be recorded")
    return work_result(ran, final)


if True:  # ASYNC
    __all__ = [
        "NoDatabaseError",
        "OfflineClient",
        "WorkResult",
        "client_transaction",
        "work_once",
        "work_with_client",
    ]
else:
    __all__ = [
        "NoDatabaseError",
        "OfflineClient",
        "WorkResult",
        "claim_job",
        "client_settings",
        "work_once",
        "work_with_client",
    ]
