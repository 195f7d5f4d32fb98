"""The parts of a test run of a worker that do not wait, shared by both drivers.

``river_sync.testing.work`` and ``river_anyio.testing.work`` run the worker their
own way (calling thread / a task on the loop); choosing the job and workers, the
configuration, the deadline, the verdict after the run and the ``WorkResult``
are the same for both and live here.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from river_db.testing.builder import TEST_CLIENT_ID, build_job
from river_protocol.client_core import EVENT_FOR_REASON, ClientConfig, ClientCore, EventKind, JobPlan
from river_protocol.constants import MAX_ATTEMPTS_DEFAULT
from river_protocol.errors import ValidationError
from river_protocol.intents import SetStateUpdate
from river_protocol.job import JobRow
from river_protocol.machines.completer import CompletionReason, persisted_reason
from river_protocol.options import InsertOpts
from river_protocol.outcomes import OUTPUT_KEY, Outcome, Snooze
from river_protocol.retry import RetryPolicy
from river_protocol.states import JobState
from river_protocol.work import CancelCause, JobCancel, JobDiscard, JobSnooze, wants_error_handler
from river_protocol.workers import Workers


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
        """The client event this run would publish (``job_completed``, ``job_failed``, ...),
        named, as the client names it, by what ``job`` bears out (a cancelled snooze: cancelled)."""
        return EVENT_FOR_REASON[persisted_reason(self.update, self.reason, self.job) or self.reason]

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


# ---------------------------------------------------------------- configuration


class _FixedRandom:
    """An ``Rng`` that always answers ``value``: a deterministic retry jitter."""

    def __init__(self, value: float) -> None:
        if not 0.0 <= value < 1.0:
            raise ValidationError(f"rand must be in [0, 1), got {value}")
        self.value = value

    def random(self) -> float:
        return self.value


@dataclass(frozen=True, slots=True)
class RunSetup:
    """What a run works with: the core that plans and finishes it, middleware, error handler."""


    core: ClientCore
    middleware: tuple[Any, ...]  # the driver's own middleware signature
    error_handler: Any  # sync, or async under trio


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


def as_workers(workers_or_callable: Any, args_type: type | None) -> Workers:
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


def setup_run(
    workers: Workers | None,
    client: Any,
    *,
    job_timeout: timedelta | None,
    retry_policy: RetryPolicy | None,
    max_attempts: int | None,
    middleware: Sequence[Any] | None,
    error_handler: Any,
    rand: float | None,
) -> RunSetup:
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
    return RunSetup(
        core=ClientCore(config, bundle, rng),
        middleware=tuple(client_mw if middleware is None else middleware),
        error_handler=client_handler if error_handler is None else error_handler,
    )


def job_to_work(
    workers_or_callable: Any,
    args_or_job: Any,
    *,
    opts: InsertOpts | None,
    client: Any,
    now: datetime | None,
    attempt: int,
    args_type: type | None,
    max_attempts: int | None,
) -> tuple[JobRow, Workers | None]:
    """``work_once``'s job (the given row, or a running one built for args) and workers."""
    if isinstance(args_or_job, JobRow):
        workers = as_workers(workers_or_callable, args_type) if workers_or_callable is not None else None
        return args_or_job, workers
    workers = (
        as_workers(workers_or_callable, args_type or type(args_or_job))
        if workers_or_callable is not None else None
    )
    config, _, _, _ = client_settings(client)
    job = build_job(
        args_or_job, opts, attempt=attempt, now=now,
        client_id=config.client_id if config is not None else TEST_CLIENT_ID,
        client_max_attempts=max_attempts or (config.max_attempts if config else MAX_ATTEMPTS_DEFAULT),
    )
    return job, workers


# ---------------------------------------------------------------- a run


def _timeout_seconds(value: timedelta | float) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def run_seconds(plan: JobPlan, timeout: timedelta | float | None) -> float | None:
    """The run's deadline in seconds (None: none): ``timeout`` when given (0 = none), else the plan's."""
    if timeout is None:
        return None if plan.timeout is None else plan.timeout.total_seconds()
    given = _timeout_seconds(timeout)
    return given if given > 0 else None


@dataclass(slots=True)
class Ran:
    """A finished run, before its row is known (computed, or read back)."""


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


def skipped_run(core: ClientCore, plan: JobPlan, *, started_at: datetime, finished_at: datetime,
                cause: CancelCause | None) -> Ran:
    """A job the plan finished without running (unknown kind, args that don't decode)."""
    assert plan.immediate is not None
    finish = core.finish_job(plan, plan.immediate, now=finished_at, started_at=started_at,
                             cancel_cause=cause, metadata_updates={})
    return Ran(plan.immediate, finish.update, finish.reason, None, None, None, "", {}, False,
               started_at, finished_at, cause, False)


def calls_error_handler(setup: RunSetup, outcome: Outcome, error: BaseException | None,
                        cause: CancelCause | None) -> bool:
    return setup.error_handler is not None and error is not None and wants_error_handler(outcome, cause)


def finished_run(
    core: ClientCore,
    plan: JobPlan,
    outcome: Outcome,
    *,
    result: Any,
    error: BaseException | None,
    trace: str,
    cause: CancelCause | None,
    handler_cancel: bool,
    metadata: dict[str, Any],
    started_at: datetime,
    finished_at: datetime,
    completed_in_tx: bool,
) -> Ran:
    """The run's update as the client's completer would get it; snooze, cancel and discard
    requests are outcomes, not errors."""
    finish = core.finish_job(plan, outcome, now=finished_at, started_at=started_at, cancel_cause=cause,
                             error_handler_cancel=handler_cancel, metadata_updates=metadata)
    real_error = None if isinstance(error, JobSnooze | JobCancel | JobDiscard) else error
    return Ran(outcome, finish.update, finish.reason, plan.args, result, real_error, trace, metadata, True,
               started_at, finished_at, cause, completed_in_tx)


def work_result(ran: Ran, job: JobRow) -> WorkResult:
    """The ``WorkResult`` of ``ran`` whose row is now ``job``."""
    return WorkResult(
        job=job, outcome=ran.outcome, reason=ran.reason, update=ran.update, args=ran.args,
        result=ran.result, error=ran.error, trace=ran.trace, metadata_updates=ran.metadata, ran=ran.ran,
        started_at=ran.started_at, finished_at=ran.finished_at, cancel_cause=ran.cause,
        completed_in_tx=ran.completed_in_tx,
    )
