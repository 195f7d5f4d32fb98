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

Differences from a running client, on purpose: the worker runs in the calling
thread; only ``Exception`` is captured, so ``KeyboardInterrupt``, ``SystemExit``
and pytest's own outcomes (``pytest.fail``, ``pytest.skip``) propagate to the
test instead of failing the job.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from river_db.executor import Executor
from river_db.testing.offline import NoDatabaseError, OfflineClient, claim_job
from river_db.testing.runs import (
    Ran,
    RunSetup,
    WorkResult,
    calls_error_handler,
    client_settings,
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
from river_protocol.work import CancelCause, outcome_from_result
from river_sync.context import CancellationToken, WorkContext

if TYPE_CHECKING:
    from river_sync.client import Client

ErrorHandler = Callable[[Any, BaseException], Any]
Middleware = Callable[[WorkContext, Any, Callable[[WorkContext, Any], Any]], Any]


# ---------------------------------------------------------------- running


def _utcnow() -> datetime:
    return datetime.now(UTC)


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


def _run(
    setup: RunSetup,
    job: JobRow,
    client: Any,
    *,
    now: datetime | None,
    timeout: timedelta | float | None,
    cancel: CancelCause | None,
) -> Ran:
    """Plan, run and finish ``job`` as the client's job thread does, in the calling thread."""
    core = setup.core
    plan = core.plan_job(job)
    started_at = now or _utcnow()
    token = CancellationToken()
    if cancel is not None:
        token.cancel(cancel)
    if plan.immediate is not None:
        return skipped_run(core, plan, started_at=started_at, finished_at=now or _utcnow(), cause=token.cause)

    seconds = run_seconds(plan, timeout)
    ctx = WorkContext(job, plan.args, client, token)
    worker = plan.worker
    assert worker is not None
    call: Callable[[WorkContext, Any], Any] = worker.call
    for mw in reversed(setup.middleware):
        call = (lambda m, nxt: lambda c, a: m(c, a, nxt))(mw, call)
    result: Any = None
    error: Exception | None = None
    trace = ""
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
        handler_cancel = bool(setup.error_handler(job, error))
    return finished_run(core, plan, outcome, result=result, error=error, trace=trace, cause=cause,
                        handler_cancel=handler_cancel, metadata=dict(ctx.metadata_updates),
                        started_at=started_at, finished_at=now or _utcnow(),
                        completed_in_tx=ctx.completed_in_tx)


# ---------------------------------------------------------------- work_once


def work_once(
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
    ``work(ctx, args)`` or a function ``fn(ctx, args)`` / ``fn(args)``.
    ``args_or_job``: an args value (a running job is built for it with
    ``build_job(args, opts, attempt=attempt, now=now)``) or a ``JobRow``, used
    as the claimed row exactly as given.

    ``client``: the ``ctx.client`` the worker sees (default: an
    ``OfflineClient`` that raises); a ``river_sync.Client`` also lends its job
    timeout, retry policy, max attempts, middleware and error handler, which
    the keyword arguments override. ``now`` fixes the clock of the run (start
    and finish), making retry and snooze times exact; ``rand`` (in [0, 1))
    fixes the retry jitter. ``timeout``: the job's deadline (seconds or a
    timedelta; 0 = none), default the worker's or client's as in production;
    ``cancel`` sets the token before the run (a remote cancel, a stop).
    """
    job, workers = job_to_work(workers_or_callable, args_or_job, opts=opts, client=client, now=now,
                               attempt=attempt, args_type=args_type, max_attempts=max_attempts)
    setup = setup_run(workers, client, job_timeout=job_timeout, retry_policy=retry_policy,
                      max_attempts=max_attempts, middleware=middleware, error_handler=error_handler,
                      rand=rand)
    ctx_client = client if client is not None else OfflineClient(setup.core.config.client_id)
    ran = _run(setup, job, ctx_client, now=now, timeout=timeout, cancel=cancel)
    final = apply_set_state(job, ran.update, ran.finished_at)
    return work_result(ran, final)


# ---------------------------------------------------------------- work_with_client

@contextmanager
def client_transaction(client: Client, tx: Any) -> Iterator[Executor]:
    """An executor in ``tx`` (the caller's transaction) or in a new transaction of the client's."""
    if tx is None:
        with client.database.transaction() as ex:
            yield ex
        return
    from river_db.caller_tx import executor_for_caller_tx

    yield executor_for_caller_tx(tx, schema=client.schema, expect=client.database.dialect.name)


def work_with_client(
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

    With ``tx`` (a psycopg connection, SQLAlchemy Connection/Session or sqlite
    connection) every step runs in that transaction, as River's
    ``rivertest.Worker.Work`` does, so rolling it back leaves nothing behind.
    A ``JobRow`` instead of args works that existing job.
    """
    if isinstance(args_or_job, JobRow):
        job = args_or_job
    else:
        inserted = client.insert(args_or_job, opts, tx=tx)
        job = inserted.job
    setup = setup_run(None, client, job_timeout=None, retry_policy=None, max_attempts=None,
                   middleware=None, error_handler=None, rand=rand)
    with client_transaction(client, tx) as ex:
        running = claim_job(ex, job, client.client_id)
    ran = _run(setup, running, client, now=None, timeout=timeout, cancel=cancel)
    with client_transaction(client, tx) as ex:
        rows = ex.run(SetStateIfRunning(updates=(ran.update,)))
        final: JobRow | None = rows[0] if rows else None
    if final is None:
        raise RiverError(f"job {running.id} was deleted while it ran; its outcome could not be recorded")
    return work_result(ran, final)


__all__ = [
    "NoDatabaseError",
    "OfflineClient",
    "WorkResult",
    "claim_job",
    "client_settings",
    "work_once",
    "work_with_client",
]
