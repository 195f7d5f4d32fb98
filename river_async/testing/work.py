"""``await work_once(...)`` and ``await work_with_client(...)``: ``river_sync.testing``'s worker runs
for async code (trio or asyncio), with the same ``WorkResult``.

The run is the async client's: an async worker runs as a task inside a cancel
scope whose deadline is the job's timeout (on the loop's clock, so under trio a
``trio.testing.MockClock`` drives it) and which a set token cancels; an
interruption is recorded as the client records it (``WorkCancelled`` with the
token's cause). A sync worker runs in a worker thread and is cooperative: a
timer task sets its token at the timeout. Middleware is the async client's
(``async def mw(ctx, args, call_next)``); an error handler may be sync or async.
Planning, outcomes and the set-state update come from ``river_protocol`` and the
configuration from ``river_sync.testing.work``, so both drivers agree.

As in ``river_sync.testing``, only ``Exception`` is captured: ``NoDatabaseError``,
``KeyboardInterrupt`` and pytest's outcomes reach the test.
"""

from __future__ import annotations

import inspect
import math
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from river_async.context import CancellationToken, WorkContext
from river_async.executor import AsyncExecutor
from river_async.runner import utcnow
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

if TYPE_CHECKING:
    from river_async.client import Client

ErrorHandler = Callable[[Any, BaseException], Any]
CallNext = Callable[[WorkContext, Any], Awaitable[Any]]
Middleware = Callable[[WorkContext, Any, CallNext], Awaitable[Any]]


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


async def _in_thread(fn: Callable[[], Any]) -> Any:
    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=False)


def _call_chain(setup: RunSetup, worker: Any, token: CancellationToken, seconds: float | None) -> CallNext:
    from river_async.client import is_async_worker

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


async def _run(
    setup: RunSetup,
    job: JobRow,
    client: Any,
    *,
    now: datetime | None,
    timeout: timedelta | float | None,
    cancel: CancelCause | None,
) -> Ran:
    """Plan, run and finish ``job`` as the async client's job task does."""
    from river_async.client import is_async_worker

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
    cause = token.cause
    outcome = outcome_from_result(result, error, trace=trace, cancel_cause=cause)
    handler_cancel = False
    if calls_error_handler(setup, outcome, error, cause):
        handler_cancel = bool(await _maybe_await(setup.error_handler(job, error)))
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
    """Run an async or sync worker on one job without a database; what River would record.

    Arguments as ``river_sync.testing.work_once``; ``client`` is a
    ``river_trio.Client`` or ``river_asyncio.Client`` (lending its settings and async
    middleware) or None for an ``OfflineClient``. ``timeout`` is in seconds of the loop's clock.
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
        db = await client._ensure_db()
        async with db.transaction() as ex:
            yield ex
        return
    from river_async.txadapt import executor_for_caller_tx

    yield await executor_for_caller_tx(tx, schema=client.schema, expect=client.dialect_name)


async def _claim(ex: AsyncExecutor, job: JobRow, client_id: str) -> JobRow:
    # The claim is a plan: the executor's runner drives it, in a worker thread on a blocking
    # connection or on the caller's asyncio-native one (psycopg/SQLAlchemy async, asyncpg).
    running: JobRow = await ex.runner.run_plan(claim_plan(ex.dialect, job, client_id))
    return running


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
    """Insert ``args`` through ``client`` (an async ``Client``, not running), claim the job,
    work it, record the outcome with the completer's statement; as ``river_sync.testing``'s.

    ``tx``: the caller's open transaction every step runs in, any kind the client's
    ``insert(..., tx=)`` takes (one adapter decides: ``river_async.txadapt``): a
    blocking psycopg, SQLAlchemy Connection/Session or sqlite connection, and on
    asyncio also psycopg's ``AsyncConnection``, SQLAlchemy's ``AsyncConnection``/
    ``AsyncSession`` and asyncpg's ``Connection``. A ``JobRow`` instead of args works
    that job.
    """
    if isinstance(args_or_job, JobRow):
        job = args_or_job
    else:
        job = (await client.insert(args_or_job, opts, tx=tx)).job
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


__all__ = [
    "NoDatabaseError",
    "OfflineClient",
    "WorkResult",
    "client_transaction",
    "work_once",
    "work_with_client",
]
