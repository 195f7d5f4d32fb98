"""The log line of a run that did not complete: its level, its words and its fields.

Every client logs one line per run that ends in anything but success (docs/guides/client.md,
"Logging"): the decision of which level and which words is a rule about jobs, made here once,
so river_sync, river_trio and river_asyncio say the same thing. The drivers only hand the line
to ``logging`` (``logger.log(line.level, line.message, *line.args, extra=line.extra,
exc_info=...)``); river_protocol imports no ``logging``, so the levels are its numbers.

Levels follow Python's convention rather than River Go's (which logs these at INFO since
v0.33): error trackers such as Sentry pick up ERROR records with a traceback, as Celery's and
procrastinate's failed tasks are. A failure that will be retried is a WARNING, one that
discards the job an ERROR, a cancel (asked for by the worker, by an operator or by the error
handler) and a client stop's interruption INFO, a snooze DEBUG. ``JobLogLevels`` changes them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.job import JobRow
from river_protocol.machines.completer import CompletionReason
from river_protocol.outcomes import Cancel, Discard, Failed, Interrupted, Outcome, Snooze
from river_protocol.states import JobState
from river_protocol.work import DEADLINE_EXCEEDED_MESSAGE, CancelCause

# The logging module's level numbers (river_protocol must not import logging).
DEBUG, INFO, WARNING, ERROR, CRITICAL = 10, 20, 30, 40, 50
NO_LOG = -1  # a JobLogLevels value that logs nothing for that ending


class RunEnding(enum.Enum):
    """How a run that did not complete ended (the ``outcome`` field of its log line)."""

    RETRIED = "retried"  # failed with attempts left: the job runs again
    DISCARDED = "discarded"  # failed for good (last attempt, or the worker asked to discard)
    CANCELLED = "cancelled"  # JobCancel, a remote cancel, or the error handler's choice
    SNOOZED = "snoozed"  # JobSnooze: runs again later without consuming an attempt
    INTERRUPTED = "interrupted"  # the client's stop cancelled it: available again, no attempt used


class Failure(enum.Enum):
    """What went wrong (the ``failure`` field): says which of the failures without a worker's
    exception it was (unknown kind, args that do not decode, a row that does not decode)."""

    ERROR = "error"  # the worker raised (or returned a Failed)
    TIMEOUT = "timeout"  # the worker gave up at its job timeout (context deadline exceeded)
    UNKNOWN_KIND = "unknown_kind"  # no worker registered for the job's kind: nothing ran
    UNDECODABLE_ARGS = "undecodable_args"  # the args did not decode into the worker's type
    UNDECODABLE_ROW = "undecodable_row"  # the stored row itself could not be read
    REQUESTED = "requested"  # the worker asked for it (JobCancel, JobDiscard, JobSnooze)
    REMOTE_CANCEL = "remote_cancel"  # cancelled by an operator or another client while running
    ERROR_HANDLER = "error_handler"  # the worker raised and the error handler chose to cancel
    STOP = "stop"  # the client stopped while it ran


_WHAT = {
    Failure.ERROR: "failed",
    Failure.TIMEOUT: "timed out",
    Failure.UNKNOWN_KIND: "has a kind no worker is registered for",
    Failure.UNDECODABLE_ARGS: "has args that do not decode",
    Failure.UNDECODABLE_ROW: "is stored in a row that could not be decoded",
    Failure.REQUESTED: "asked",
    Failure.REMOTE_CANCEL: "was cancelled remotely",
    Failure.ERROR_HANDLER: "failed",
    Failure.STOP: "was interrupted by the client's stop",
}

# A traceback says where the worker's own code went wrong; an outcome it asked for has none.
_WITH_TRACEBACK = frozenset({Failure.ERROR, Failure.TIMEOUT, Failure.ERROR_HANDLER})


@dataclass(frozen=True, slots=True)
class JobLogLevels:
    """The level of each ending's log line (the ``logging`` numbers: 10 DEBUG .. 50 CRITICAL;
    level names such as ``"WARNING"`` are accepted too; ``NO_LOG`` (-1) silences one ending).

    ``Client(job_log_levels=JobLogLevels(retried=logging.INFO))`` keeps retries out of an
    error tracker that listens at WARNING.
    """

    retried: int | str = WARNING
    discarded: int | str = ERROR
    cancelled: int | str = INFO
    snoozed: int | str = DEBUG
    interrupted: int | str = INFO

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _level(f.name, getattr(self, f.name)))

    def of(self, ending: RunEnding) -> int:
        level: int = getattr(self, ending.value)
        return level


_NAMES = {"DEBUG": DEBUG, "INFO": INFO, "WARNING": WARNING, "WARN": WARNING, "ERROR": ERROR,
          "CRITICAL": CRITICAL, "FATAL": CRITICAL}


def _level(name: str, value: Any) -> int:
    if isinstance(value, str) and value.upper() in _NAMES:
        return _NAMES[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool) and (value >= 0 or value == NO_LOG):
        return value
    raise ValidationError(
        f"JobLogLevels.{name} must be a logging level (a number >= 0 or a name such as 'WARNING'), "
        f"or NO_LOG (-1), got {value!r}"
    )


def parse_job_log_levels(value: Any) -> JobLogLevels:
    """The ``job_log_levels`` argument of a client (None: the defaults)."""
    if value is None:
        return JobLogLevels()
    if not isinstance(value, JobLogLevels):
        raise ValidationError(f"job_log_levels must be a JobLogLevels, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class RunLogLine:
    """One line for ``logging``: ``message % args`` is the text; ``extra`` the structured fields
    (``job_id``, ``kind``, ``queue``, ``attempt``, ``max_attempts``, ``error``, ``outcome``,
    ``failure``, ``next_attempt_at``); ``traceback``: pass the worker's exception as ``exc_info``."""

    level: int
    message: str
    args: tuple[Any, ...]
    extra: dict[str, Any]
    traceback: bool


_ENDING_OF_REASON = {
    CompletionReason.CANCELLED: RunEnding.CANCELLED,
    CompletionReason.SNOOZED: RunEnding.SNOOZED,
    CompletionReason.INTERRUPTED: RunEnding.INTERRUPTED,
}


def run_ending(reason: CompletionReason, state: JobState) -> RunEnding | None:
    """How the run ended, from the completer request's reason and the state it sets; None for a
    completed run (nothing to log)."""
    if reason is CompletionReason.COMPLETED:
        return None
    if reason is CompletionReason.FAILED:
        return RunEnding.DISCARDED if state is JobState.DISCARDED else RunEnding.RETRIED
    return _ENDING_OF_REASON[reason]


def failure_of(
    job: JobRow,
    outcome: Outcome,
    *,
    worker_known: bool,
    args_decoded: bool,
    ending: RunEnding,
    cancel_cause: CancelCause | None,
    error_handler_cancel: bool,
) -> Failure:
    """What went wrong in a run that ended as ``ending``."""
    if job.undecodable is not None:
        return Failure.UNDECODABLE_ROW
    if not worker_known:
        return Failure.UNKNOWN_KIND
    if not args_decoded:
        return Failure.UNDECODABLE_ARGS
    if ending is RunEnding.INTERRUPTED or isinstance(outcome, Interrupted):
        return Failure.STOP
    if ending is RunEnding.CANCELLED and cancel_cause is CancelCause.REMOTE_CANCEL:
        return Failure.REMOTE_CANCEL
    if error_handler_cancel and isinstance(outcome, Failed):
        return Failure.ERROR_HANDLER
    if isinstance(outcome, Cancel | Discard | Snooze):
        return Failure.REQUESTED
    if cancel_cause is CancelCause.TIMEOUT and isinstance(outcome, Failed) \
            and outcome.error == DEADLINE_EXCEEDED_MESSAGE:
        return Failure.TIMEOUT
    return Failure.ERROR


def _error_text(outcome: Outcome, failure: Failure) -> str:
    if failure is Failure.REMOTE_CANCEL:
        return "job cancelled remotely"
    match outcome:
        case Failed() | Discard():
            return outcome.error
        case Cancel():
            return outcome.message
        case Snooze():
            return f"snoozed for {outcome.delay}"
    return ""


def _requested_words(outcome: Outcome) -> str:
    match outcome:
        case Cancel():
            return "asked to be cancelled"
        case Discard():
            return "asked to be discarded"
        case Snooze():
            return "asked to be snoozed"
    return "asked"


def _then(ending: RunEnding, scheduled_at: datetime | None) -> str:
    at = f" at {scheduled_at.isoformat()}" if scheduled_at is not None else ""
    if ending is RunEnding.RETRIED:
        return f"will be retried{at}"
    if ending is RunEnding.SNOOZED:
        return f"will run again{at}"
    if ending is RunEnding.INTERRUPTED:
        return "available again, no attempt used"
    return str(ending.value)  # discarded, cancelled


def run_log_line(
    job: JobRow,
    outcome: Outcome,
    *,
    reason: CompletionReason,
    state: JobState,
    scheduled_at: datetime | None,
    worker_known: bool,
    args_decoded: bool,
    cancel_cause: CancelCause | None,
    error_handler_cancel: bool,
    has_exception: bool,
    levels: JobLogLevels,
) -> RunLogLine | None:
    """The log line of a finished run, or None when there is none (it completed, or its
    ending's level is ``NO_LOG``). ``reason``, ``state`` and ``scheduled_at`` are those of the
    completer request the run became; ``has_exception``: the driver holds the worker's exception
    (its traceback goes with the line where the failure is the worker's code's)."""
    ending = run_ending(reason, state)
    if ending is None:
        return None
    level = levels.of(ending)
    if level == NO_LOG:
        return None
    failure = failure_of(
        job, outcome, worker_known=worker_known, args_decoded=args_decoded, ending=ending,
        cancel_cause=cancel_cause, error_handler_cancel=error_handler_cancel,
    )
    what = _requested_words(outcome) if failure is Failure.REQUESTED else _WHAT[failure]
    if failure is Failure.ERROR_HANDLER:
        then = "cancelled by the error handler"
    else:
        then = _then(ending, scheduled_at if ending in (RunEnding.RETRIED, RunEnding.SNOOZED) else None)
    error = _error_text(outcome, failure)
    next_at = scheduled_at.isoformat() if scheduled_at is not None and ending in (
        RunEnding.RETRIED, RunEnding.SNOOZED) else None
    extra = {
        "job_id": job.id, "kind": job.kind, "queue": job.queue, "attempt": job.attempt,
        "max_attempts": job.max_attempts, "error": error, "outcome": ending.value,
        "failure": failure.value, "next_attempt_at": next_at,
    }
    message = "river: job %d (kind %r, queue %r, attempt %d of %d) %s; %s"
    args: tuple[Any, ...] = (job.id, job.kind, job.queue, job.attempt, job.max_attempts, what, then)
    if error:
        message += ": %s"
        args += (error,)
    return RunLogLine(level, message, args, extra, has_exception and failure in _WITH_TRACEBACK)


__all__ = [
    "CRITICAL",
    "DEBUG",
    "ERROR",
    "INFO",
    "NO_LOG",
    "WARNING",
    "Failure",
    "JobLogLevels",
    "RunEnding",
    "RunLogLine",
    "parse_job_log_levels",
    "run_ending",
    "run_log_line",
]
