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

import random
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from river_protocol.client_core import EVENT_FOR_REASON, ClientConfig, ClientCore, EventKind
from river_protocol.constants import MAX_ATTEMPTS_DEFAULT
from river_protocol.errors import RiverError, ValidationError
from river_protocol.intents import ClaimJobs, GetJob, SetStateIfRunning, SetStateUpdate, Statement
from river_protocol.job import JobRow
from river_protocol.machines.completer import CompletionReason
from river_protocol.options import InsertOpts
from river_protocol.outcomes import OUTPUT_KEY, Outcome, Snooze, apply_set_state
from river_protocol.retry import RetryPolicy
from river_protocol.states import JobState
from river_protocol.work import (
    CancelCause,
    JobCancel,
    JobDiscard,
    JobSnooze,
    outcome_from_result,
    wants_error_handler,
)
from river_protocol.workers import Workers
from river_sync.context import CancellationToken, WorkContext
from river_sync.executor import Executor
from river_sync.testing.builder import TEST_CLIENT_ID, build_job

if TYPE_CHECKING:
    from river_sync.client import Client

ErrorHandler = Callable[[Any, BaseException], Any]
Middleware = Callable[[WorkContext, Any, Callable[[WorkContext, Any], Any]], Any]


class NoDatabaseError(RiverError):
    """A worker run by ``work_once`` used ``ctx.client`` although no client was given."""


class OfflineClient:
    """``ctx.client`` for a run without a database: anything beyond its identity raises
    ``NoDatabaseError``, which ``work_once`` lets through to the test instead of failing the job.

    ``schema`` and ``client_id`` are answered so that code which only reads them
    (``ctx.complete_in(tx)`` reads the schema) still works.
    """

    schema: str | None = None

    def __init__(self, client_id: str = TEST_CLIENT_ID) -> None:
        self.client_id = client_id

    def __getattr__(self, name: str) -> Any:
        raise NoDatabaseError(
            f"ctx.client.{name}: this worker ran without a database (work_once); pass "
            "client=Client(...) to work_once, or use work_with_client, to give it one"
        )


@dataclass(frozen=True, slots=True)
class WorkResult:
    """What one run of a worker produced and what River records for it.

    ``job`` is the row after the outcome: read back from the database by
    ``work_with_client``, and computed with the completer's row model
    (``apply_set_state``, Postgres semantics) by ``work_once``. ``error`` is a
    real failure only: snooze, cancel and discard requests are outcomes, not
    errors (as in River's ``rivertest``).
    """

    job: JobRow
    outcome: Outcome
    reason: CompletionReason
    update: SetStateUpdate
    args: Any
    result: Any = None
    error: BaseException | None = None
    trace: str = ""
    metadata_updates: Mapping[str, Any] = field(default_factory=dict)
    ran: bool = True  # False: finished without running (unknown kind, args that don't decode)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    cancel_cause: CancelCause | None = None
    completed_in_tx: bool = False

    @property
    def event_kind(self) -> EventKind:
        """The client event this run would publish (``job_completed``, ``job_failed``, ...)."""
        return EVENT_FOR_REASON[self.reason]

    @property
    def state(self) -> JobState:
        return self.job.state

    @property
    def output(self) -> Any:
        """The value recorded with ``ctx.record_output`` (None when nothing was recorded)."""
        return self.metadata_updates.get(OUTPUT_KEY)

    @property
    def has_output(self) -> bool:
        return OUTPUT_KEY in self.metadata_updates

    @property
    def snoozed_for(self) -> timedelta | None:
        """The snooze delay when the run snoozed the job, else None."""
        if self.reason is CompletionReason.SNOOZED and isinstance(self.outcome, Snooze):
            return self.outcome.delay
        return None

    def raise_error(self) -> None:
        """Re-raise the worker's real error, if any (handy as a one-line test guard)."""
        if self.error is not None:
            raise self.error


# ---------------------------------------------------------------- configuration of a run


class _FixedRandom:
    """An ``Rng`` that always answers ``value``: a deterministic retry jitter."""

    def __init__(self, value: float) -> None:
        if not 0.0 <= value < 1.0:
            raise ValidationError(f"rand must be in [0, 1), got {value}")
        self.value = value

    def random(self) -> float:
        return self.value


@dataclass(frozen=True, slots=True)
class _RunSetup:
    core: ClientCore
    middleware: tuple[Middleware, ...]
    error_handler: ErrorHandler | None


def _annotated_args_type(fn: Any) -> type | None:
    """The annotated type of a worker function's last positional parameter (its args), if any."""
    import inspect
    import typing

    target = getattr(fn, "work", fn)
    try:
        params = [p for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        hints = typing.get_type_hints(target)
    except (TypeError, ValueError, NameError):
        return None
    hint = hints.get(params[-1].name) if params else None
    return hint if isinstance(hint, type) else None


def _as_workers(workers_or_callable: Any, args_type: type | None) -> Workers:
    """A ``Workers`` bundle for a bundle, a worker object or a plain function."""
    if isinstance(workers_or_callable, Workers):
        return workers_or_callable
    workers = Workers()
    target_type = args_type or getattr(workers_or_callable, "args_type", None) or _annotated_args_type(
        workers_or_callable
    )
    if not isinstance(target_type, type) or not isinstance(getattr(target_type, "kind", None), str):
        raise ValidationError(
            "cannot tell which args type this worker handles: pass args (not a JobRow), "
            "args_type=..., or a worker with an args_type attribute"
        )
    if callable(getattr(workers_or_callable, "work", None)):
        workers.add(workers_or_callable, target_type)
    elif callable(workers_or_callable):
        workers.job(target_type)(workers_or_callable)
    else:
        raise ValidationError(
            f"expected Workers, a worker object with work(ctx, args) or a function, "
            f"got {type(workers_or_callable).__qualname__}"
        )
    return workers


def client_settings(client: Any) -> tuple[ClientConfig | None, Workers | None, tuple[Any, ...], Any]:
    """(config, workers, middleware, error handler) of a ``river_sync.Client``.

    The client keeps these private; a client without them (another
    implementation, a stub) yields Nones and the caller's defaults apply.
    """
    core = getattr(client, "_core", None)
    config = getattr(core, "config", None)
    workers = getattr(core, "workers", None)
    return (
        config if isinstance(config, ClientConfig) else None,
        workers if isinstance(workers, Workers) else None,
        tuple(getattr(client, "_middleware", ()) or ()),
        getattr(client, "_error_handler", None),
    )


def _setup(
    workers: Workers | None,
    client: Any,
    *,
    job_timeout: timedelta | None,
    retry_policy: RetryPolicy | None,
    max_attempts: int | None,
    middleware: Sequence[Middleware] | None,
    error_handler: ErrorHandler | None,
    rand: float | None,
) -> _RunSetup:
    config, client_workers, client_mw, client_handler = client_settings(client)
    if config is None:
        config = ClientConfig(client_id=TEST_CLIENT_ID, dialect="sqlite")
    overrides: dict[str, Any] = {}
    if job_timeout is not None:
        overrides["job_timeout"] = job_timeout
    if retry_policy is not None:
        overrides["retry_policy"] = retry_policy
    if max_attempts is not None:
        overrides["max_attempts"] = max_attempts
    # The core only plans and finishes runs here; queues would demand workers for nothing.
    config = ClientConfig(
        client_id=config.client_id, dialect=config.dialect,
        job_timeout=overrides.get("job_timeout", config.job_timeout),
        max_attempts=overrides.get("max_attempts", config.max_attempts),
        retry_policy=overrides.get("retry_policy", config.retry_policy),
        skip_unknown_job_check=config.skip_unknown_job_check,
    )
    bundle = workers if workers is not None else client_workers
    rng: Any = random.Random() if rand is None else _FixedRandom(rand)
    return _RunSetup(
        core=ClientCore(config, bundle, rng),
        middleware=tuple(client_mw if middleware is None else middleware),
        error_handler=client_handler if error_handler is None else error_handler,
    )


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _timeout_seconds(value: timedelta | float) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


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


@dataclass(slots=True)
class _Ran:
    outcome: Outcome
    update: SetStateUpdate
    reason: CompletionReason
    args: Any
    result: Any
    error: BaseException | None
    trace: str
    metadata: dict[str, Any]
    ran: bool
    started_at: datetime
    finished_at: datetime
    cause: CancelCause | None
    completed_in_tx: bool


def _run(
    setup: _RunSetup,
    job: JobRow,
    client: Any,
    *,
    now: datetime | None,
    timeout: timedelta | float | None,
    cancel: CancelCause | None,
) -> _Ran:
    """Plan, run and finish ``job`` as the client's job thread does, in the calling thread."""
    core = setup.core
    plan = core.plan_job(job)
    started_at = now or _utcnow()
    token = CancellationToken()
    if cancel is not None:
        token.cancel(cancel)
    if plan.immediate is not None:
        finished_at = now or _utcnow()
        finish = core.finish_job(plan, plan.immediate, now=finished_at, started_at=started_at,
                                 cancel_cause=token.cause, metadata_updates={})
        return _Ran(plan.immediate, finish.update, finish.reason, None, None, None, "", {}, False,
                    started_at, finished_at, token.cause, False)

    if timeout is None:
        seconds = None if plan.timeout is None else plan.timeout.total_seconds()
    else:
        given = _timeout_seconds(timeout)
        seconds = given if given > 0 else None
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
    if setup.error_handler is not None and error is not None and wants_error_handler(outcome, cause):
        handler_cancel = bool(setup.error_handler(job, error))
    finished_at = now or _utcnow()
    metadata = dict(ctx.metadata_updates)
    finish = core.finish_job(plan, outcome, now=finished_at, started_at=started_at, cancel_cause=cause,
                             error_handler_cancel=handler_cancel, metadata_updates=metadata)
    real_error = None if isinstance(error, JobSnooze | JobCancel | JobDiscard) else error
    return _Ran(outcome, finish.update, finish.reason, plan.args, result, real_error, trace, metadata, True,
                started_at, finished_at, cause, ctx.completed_in_tx)


def _result(ran: _Ran, job: JobRow) -> WorkResult:
    return WorkResult(
        job=job, outcome=ran.outcome, reason=ran.reason, update=ran.update, args=ran.args,
        result=ran.result, error=ran.error, trace=ran.trace, metadata_updates=ran.metadata, ran=ran.ran,
        started_at=ran.started_at, finished_at=ran.finished_at, cancel_cause=ran.cause,
        completed_in_tx=ran.completed_in_tx,
    )


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
    if isinstance(args_or_job, JobRow):
        job = args_or_job
        workers = _as_workers(workers_or_callable, args_type) if workers_or_callable is not None else None
    else:
        workers = (
            _as_workers(workers_or_callable, args_type or type(args_or_job))
            if workers_or_callable is not None else None
        )
        config, _, _, _ = client_settings(client)
        job = build_job(
            args_or_job, opts, attempt=attempt, now=now,
            client_id=config.client_id if config is not None else TEST_CLIENT_ID,
            client_max_attempts=max_attempts or (config.max_attempts if config else MAX_ATTEMPTS_DEFAULT),
        )
    setup = _setup(workers, client, job_timeout=job_timeout, retry_policy=retry_policy,
                   max_attempts=max_attempts, middleware=middleware, error_handler=error_handler, rand=rand)
    ctx_client = client if client is not None else OfflineClient(setup.core.config.client_id)
    ran = _run(setup, job, ctx_client, now=now, timeout=timeout, cancel=cancel)
    final = apply_set_state(job, ran.update, ran.finished_at)
    return _result(ran, final)


# ---------------------------------------------------------------- work_with_client

_SAVEPOINT = "river_testing_claim"


def _mark_running(ex: Executor, job_id: int, client_id: str, now: datetime) -> None:
    """Put one job in ``running`` by id, the way a claim would (River's test worker does the same)."""
    prefix = getattr(ex.dialect, "prefix", "")
    if ex.dialect.name == "postgres":
        sql = (f"UPDATE {prefix}river_job SET state = 'running', attempt = attempt + 1, attempted_at = %s, "
               "attempted_by = array_append(coalesce(attempted_by, '{}'::text[]), %s::text) WHERE id = %s")
        ex.execute(Statement(sql, (now, client_id, job_id), fetch=False))
        return
    from river_protocol.gotime import format_sqlite_time

    sql = (f"UPDATE {prefix}river_job SET state = 'running', attempt = attempt + 1, attempted_at = ?, "
           "attempted_by = jsonb_insert(coalesce(attempted_by, jsonb('[]')), '$[#]', ?) WHERE id = ?")
    ex.execute(Statement(sql, (format_sqlite_time(now), client_id, job_id), fetch=False))


def claim_job(ex: Executor, job: JobRow, client_id: str) -> JobRow:
    """Claim ``job`` inside ``ex``'s open transaction and return it running.

    The producer's own claim (``ClaimJobs`` on the job's queue) is tried first;
    when it would pick another job (one ahead in the queue, or this one is not
    yet available) that attempt is rolled back to a savepoint and the job is
    moved to ``running`` by id instead.
    """
    if job.state is JobState.RUNNING:
        raise ValidationError(f"job {job.id} is already running; it cannot be claimed again")
    if job.state.finalized:
        raise ValidationError(f"job {job.id} is already {job.state.value}; there is nothing to work")
    ex.execute(Statement(f"SAVEPOINT {_SAVEPOINT}", fetch=False))
    claimed = ex.run(ClaimJobs(queue=job.queue, limit=1, client_id=client_id))
    if [row.id for row in claimed] == [job.id]:
        ex.execute(Statement(f"RELEASE SAVEPOINT {_SAVEPOINT}", fetch=False))
        row: JobRow = claimed[0]
        return row
    ex.execute(Statement(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}", fetch=False))
    ex.execute(Statement(f"RELEASE SAVEPOINT {_SAVEPOINT}", fetch=False))
    _mark_running(ex, job.id, client_id, _utcnow())
    fetched: JobRow = ex.run(GetJob(job.id))
    return fetched


@contextmanager
def client_transaction(client: Client, tx: Any) -> Iterator[Executor]:
    """An executor in ``tx`` (the caller's transaction) or in a new transaction of the client's."""
    if tx is None:
        with client.database.transaction() as ex:
            yield ex
        return
    from river_sync.txadapt import executor_for_caller_tx

    ex = executor_for_caller_tx(tx, schema=client.schema)
    if ex.dialect.name != client.database.dialect.name:
        raise ValidationError(
            f"tx is a {ex.dialect.name} transaction but the client uses {client.database.dialect.name}"
        )
    yield ex


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
    setup = _setup(None, client, job_timeout=None, retry_policy=None, max_attempts=None,
                   middleware=None, error_handler=None, rand=rand)
    with client_transaction(client, tx) as ex:
        running = claim_job(ex, job, client.client_id)
    ran = _run(setup, running, client, now=None, timeout=timeout, cancel=cancel)
    with client_transaction(client, tx) as ex:
        rows = ex.run(SetStateIfRunning(updates=(ran.update,)))
        final: JobRow | None = rows[0] if rows else None
    if final is None:
        raise RiverError(f"job {running.id} was deleted while it ran; its outcome could not be recorded")
    return _result(ran, final)


__all__ = [
    "NoDatabaseError",
    "OfflineClient",
    "WorkResult",
    "claim_job",
    "client_settings",
    "work_once",
    "work_with_client",
]
