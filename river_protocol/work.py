"""What a worker's run means: outcome exceptions, the result → outcome rule, and
the executor's "job finished" decision (docs/protocol.md §7, §9, §12.4).

Workers request outcomes by raising ``JobSnooze`` / ``JobCancel`` /
``JobDiscard`` (or returning one of them, or a ``WorkOutcome`` value); any
other exception is an error retried per the retry policy. Every driver maps a
finished run through ``outcome_from_result`` and ``finish_job`` so threaded and
trio clients record identical rows.

A run's cancellation token carries a ``CancelCause``. A worker that honours its
token raises ``WorkCancelled`` (``token.raise_if_cancelled()``), the Python
counterpart of returning Go's ``ctx.Err()``; the cause then decides the outcome:
a timeout is the error ``context deadline exceeded`` (River's text), a client
stop is ``Interrupted`` (no attempt consumed), a remote cancel is the
remote-cancel ``Cancel``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol.constants import JOB_TIMEOUT_NONE
from river_protocol.errors import JobNotRunError, ValidationError
from river_protocol.frozen import quick_init
from river_protocol.golang.gotime import GoTime
from river_protocol.intents import SetStateUpdate
from river_protocol.job import JobRow
from river_protocol.machines.completer import CompletionReason
from river_protocol.outcomes import (
    Cancel,
    Completed,
    Discard,
    Failed,
    Interrupted,
    Outcome,
    Snooze,
    outcome_reason,
    outcome_to_update,
)
from river_protocol.retry import RetryPolicy
from river_protocol.states import JobState

# What a worker may hand back to request an outcome (Interrupted is the client's alone).
WorkOutcome = Completed | Snooze | Cancel | Discard | Failed

DEADLINE_EXCEEDED_MESSAGE = "context deadline exceeded"
CANCELED_MESSAGE = "context canceled"


# ---------------------------------------------------------------- outcome exceptions


class JobSnooze(Exception):
    """Run the job again after ``delay`` without consuming an attempt (Go's ``JobSnooze``)."""

    def __init__(self, delay: timedelta) -> None:
        if not isinstance(delay, timedelta):
            raise ValidationError(f"JobSnooze needs a timedelta delay, got {type(delay).__name__}")
        super().__init__(f"snoozing for {delay}")
        self.delay = delay


class JobCancel(Exception):
    """Cancel the job for good, whatever attempts remain (Go's ``JobCancel(err)``).

    ``reason`` is the inner error: text, an exception (its text is used) or
    ``None`` (Go's nil error, stored as ``<nil>``).
    """

    def __init__(self, reason: str | BaseException | None = None) -> None:
        super().__init__(reason)
        self.reason = reason


class JobDiscard(Exception):
    """Discard the job now (state ``discarded``) with ``reason`` as its error text."""

    def __init__(self, reason: str | BaseException) -> None:
        super().__init__(reason)
        self.reason = reason


class CancelCause(enum.Enum):
    """Why a running job's token was set."""

    TIMEOUT = "timeout"
    REMOTE_CANCEL = "remote_cancel"
    STOP = "stop"


class WorkCancelled(Exception):
    """Raised by a cancellation token when checked after it was set."""

    def __init__(self, cause: CancelCause) -> None:
        super().__init__(_CAUSE_TEXT[cause])
        self.cause = cause


_CAUSE_TEXT = {
    CancelCause.TIMEOUT: DEADLINE_EXCEEDED_MESSAGE,
    CancelCause.REMOTE_CANCEL: CANCELED_MESSAGE,
    CancelCause.STOP: CANCELED_MESSAGE,
}


# ---------------------------------------------------------------- result -> outcome


def error_text(error: BaseException | str | None) -> str | None:
    """How an exception is stored in ``errors[].error``: ``Type: message`` (or just the type)."""
    if error is None or isinstance(error, str):
        return error
    message = str(error)
    name = type(error).__name__
    return f"{name}: {message}" if message else name


def _cancelled_by_token(error: BaseException) -> WorkCancelled | None:
    """The token's exception, also when the worker wrapped it (``raise X from exc``)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, WorkCancelled):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _requested(value: BaseException | WorkOutcome) -> Outcome | None:
    match value:
        case JobSnooze():
            return Snooze(value.delay)
        case JobCancel():
            return Cancel(error_text(value.reason))
        case JobDiscard():
            return Discard(error_text(value.reason) or "")
        case Completed() | Snooze() | Cancel() | Discard() | Failed():
            return value
    return None


_COMPLETED = Completed()  # immutable and fieldless: one value serves every success


def outcome_from_result(
    result: Any = None,
    error: BaseException | None = None,
    *,
    trace: str = "",
    cancel_cause: CancelCause | None = None,
) -> Outcome:
    """The outcome of a run that returned ``result`` or raised ``error``.

    ``cancel_cause`` is the token's cause if it was set during the run. Only a
    raised ``WorkCancelled`` (possibly wrapped) is read as the worker giving
    up because of the token, as Go only treats a returned context error so; any
    other exception keeps its own text. A normal return completes the job even
    after its token was set (the work was done; running it again could repeat
    side effects), unless it returned an outcome request.
    """
    if error is None:
        if result is None:  # what most workers return: a success, without the outcome checks
            return _COMPLETED
        requested = _requested(result) if isinstance(result, (BaseException, WorkOutcome)) else None
        return requested if requested is not None else _COMPLETED
    requested = _requested(error)
    if requested is not None:
        return requested
    cancelled = _cancelled_by_token(error)
    if cancelled is not None:
        cause = cancel_cause or cancelled.cause
        if cause is CancelCause.STOP:
            return Interrupted()
        return Failed(_CAUSE_TEXT[cause], trace)
    return Failed(error_text(error) or "", trace)


# ---------------------------------------------------------------- the executor's decision


_REASONS = {
    "completed": CompletionReason.COMPLETED,
    "snoozed": CompletionReason.SNOOZED,
    "cancelled": CompletionReason.CANCELLED,
    "interrupted": CompletionReason.INTERRUPTED,
    "failed": CompletionReason.FAILED,
}


@quick_init
@dataclass(frozen=True, slots=True)
class Finish:
    """A finished run's request for the completer."""

    update: SetStateUpdate
    reason: CompletionReason
    outcome: Outcome


def plain_success(
    job: JobRow, outcome: Outcome, now: datetime | GoTime, metadata_updates: Mapping[str, Any] | None
) -> Finish | None:
    """``finish_job``'s answer for a plain success (nothing recorded, a UTC ``now``), without its
    dispatch; None for anything else. Most runs end here, and no override changes a success."""
    update = plain_success_update(job, outcome, now, metadata_updates)
    return None if update is None else Finish(update, CompletionReason.COMPLETED, outcome)


def plain_success_update(
    job: JobRow, outcome: Outcome, now: datetime | GoTime, metadata_updates: Mapping[str, Any] | None
) -> SetStateUpdate | None:
    """``plain_success``'s update (its reason is ``COMPLETED``), without the ``Finish`` around it:
    a client handing it straight to the completer builds no object per job only to unpack it."""
    if (outcome.__class__ is Completed and not metadata_updates and now.__class__ is datetime
            and now.tzinfo is UTC):
        return SetStateUpdate(job.id, JobState.COMPLETED, finalized_at=now,
                              claimed=job if job.undecodable is None else None)
    return None


def finish_job(
    job: JobRow,
    outcome: Outcome,
    *,
    now: datetime | GoTime,
    started_at: datetime | GoTime,
    cancel_cause: CancelCause | None = None,
    retry_policy: RetryPolicy | None = None,
    rand: float | None = None,
    worker_next_retry: datetime | GoTime | None = None,
    error_handler_cancel: bool = False,
    metadata_updates: Mapping[str, Any] | None = None,
) -> Finish:
    """The set-state request and completion reason for ``job``'s finished attempt (§7.1 steps 6-7).

    A remote cancel turns every outcome but success into the remote-cancel
    cancellation, whatever the worker raised.
    """
    quick = plain_success(job, outcome, now, metadata_updates)
    if quick is not None:
        return quick
    remote = cancel_cause is CancelCause.REMOTE_CANCEL
    if isinstance(outcome, Interrupted) and cancel_cause is not CancelCause.STOP:
        raise ValidationError("Interrupted is only a valid outcome after a client stop cancelled the job")
    update = outcome_to_update(
        job, outcome, now=now, started_at=started_at, retry_policy=retry_policy, rand=rand,
        worker_next_retry=worker_next_retry, error_handler_cancel=error_handler_cancel,
        remote_cancelled=remote, metadata_updates=metadata_updates,
    )
    reason = outcome_reason(outcome, error_handler_cancel=error_handler_cancel, remote_cancelled=remote)
    return Finish(update, _REASONS[reason], outcome)


def not_run_error(outcome: Outcome) -> JobNotRunError | None:
    """The exception an error handler is handed for a job failed without running (a claim's
    ``JobPlan.immediate``: an unknown kind, args or a stored row that do not decode); None for
    any other outcome."""
    return JobNotRunError(outcome.error) if isinstance(outcome, Failed) else None


def wants_error_handler(outcome: Outcome, cancel_cause: CancelCause | None) -> bool:
    """Whether the error handler is consulted (§7.3): plain failures only, not remote cancels."""
    return isinstance(outcome, Failed) and cancel_cause is not CancelCause.REMOTE_CANCEL


def complete_in_tx_update(
    job: JobRow, now: datetime, metadata_updates: Mapping[str, Any] | None
) -> SetStateUpdate:
    """The single-row completion a worker runs in its own transaction (§7.5)."""
    from river_protocol.golang.encoding_json import encode

    updates = dict(metadata_updates or {})
    return SetStateUpdate(
        id=job.id, state=JobState.COMPLETED, finalized_at=now,
        metadata_do_merge=bool(updates), metadata_updates=encode(updates) if updates else b"{}",
    )


_NO_TIME = timedelta(0)


def effective_timeout(worker_timeout: timedelta | None, client_timeout: timedelta) -> timedelta | None:
    """The run's deadline length: worker's if set, else the client's; ``None`` = no deadline (§7.1 step 4)."""
    chosen = worker_timeout if worker_timeout else client_timeout
    if chosen == JOB_TIMEOUT_NONE or chosen <= _NO_TIME:
        return None
    return chosen
