"""The log line of a run that did not complete (river_protocol.run_log), decided without a client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from river_protocol.client_core import ClientConfig, ClientCore, JobPlan
from river_protocol.errors import ValidationError
from river_protocol.job import JobRow
from river_protocol.machines.completer import CompletionReason
from river_protocol.outcomes import (
    Cancel,
    Completed,
    Discard,
    Failed,
    Interrupted,
    Snooze,
    unknown_kind_failure,
)
from river_protocol.run_log import (
    DEBUG,
    ERROR,
    INFO,
    NO_LOG,
    WARNING,
    Failure,
    JobLogLevels,
    RunEnding,
    parse_job_log_levels,
    run_ending,
    run_log_line,
)
from river_protocol.states import JobState
from river_protocol.work import DEADLINE_EXCEEDED_MESSAGE, CancelCause
from river_protocol.workers import Workers

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
JOB = JobRow(id=7, kind="send_email", encoded_args=b"{}", state=JobState.RUNNING, queue="mail",
             attempt=2, max_attempts=3)


def line(outcome: Any, reason: CompletionReason, state: JobState, **kwargs: Any) -> Any:
    defaults: dict[str, Any] = {
        "scheduled_at": None, "worker_known": True, "args_decoded": True, "cancel_cause": None,
        "error_handler_cancel": False, "has_exception": True, "levels": JobLogLevels(),
    }
    return run_log_line(kwargs.pop("job", JOB), outcome, reason=reason, state=state, **{**defaults, **kwargs})


def test_a_retried_error_is_a_warning_with_its_traceback_and_fields() -> None:
    got = line(Failed("RuntimeError: kaboom", "tb"), CompletionReason.FAILED, JobState.RETRYABLE,
               scheduled_at=NOW)
    assert got.level == WARNING and got.traceback
    text = got.message % got.args
    assert text == ("river: job 7 (kind 'send_email', queue 'mail', attempt 2 of 3) failed; "
                    "will be retried at 2026-01-02T03:04:05+00:00: RuntimeError: kaboom")
    assert got.extra == {
        "job_id": 7, "kind": "send_email", "queue": "mail", "attempt": 2, "max_attempts": 3,
        "error": "RuntimeError: kaboom", "outcome": "retried", "failure": "error",
        "next_attempt_at": "2026-01-02T03:04:05+00:00",
    }


def test_a_discarded_error_is_an_error() -> None:
    got = line(Failed("RuntimeError: kaboom"), CompletionReason.FAILED, JobState.DISCARDED)
    assert (got.level, got.extra["outcome"], got.traceback) == (ERROR, "discarded", True)
    assert "failed; discarded: RuntimeError: kaboom" in got.message % got.args


def test_unknown_kinds_and_undecodable_args_and_rows_say_which_and_carry_no_traceback() -> None:
    unknown = line(unknown_kind_failure("send_email"), CompletionReason.FAILED, JobState.RETRYABLE,
                   worker_known=False, args_decoded=False, has_exception=False)
    assert unknown.extra["failure"] == Failure.UNKNOWN_KIND.value and not unknown.traceback
    assert "has a kind no worker is registered for" in unknown.message % unknown.args
    args = line(Failed("ValidationError: O.n: cannot decode"), CompletionReason.FAILED, JobState.DISCARDED,
                args_decoded=False, has_exception=False)
    assert args.extra["failure"] == "undecodable_args" and args.level == ERROR
    assert "has args that do not decode; discarded" in args.message % args.args
    bad_row = JobRow(id=8, kind="k", encoded_args=b"{}", state=JobState.RUNNING, undecodable="metadata: x")
    row = line(Failed("job row couldn't be decoded: metadata: x"), CompletionReason.FAILED,
               JobState.RETRYABLE, job=bad_row, args_decoded=False, has_exception=False)
    assert row.extra["failure"] == "undecodable_row"


def test_a_timeout_says_so() -> None:
    got = line(Failed(DEADLINE_EXCEEDED_MESSAGE), CompletionReason.FAILED, JobState.RETRYABLE,
               cancel_cause=CancelCause.TIMEOUT)
    assert got.extra["failure"] == "timeout" and got.traceback and got.level == WARNING
    assert "timed out; will be retried: context deadline exceeded" in got.message % got.args


def test_cancels_are_info_and_say_who_asked() -> None:
    asked = line(Cancel("not wanted"), CompletionReason.CANCELLED, JobState.CANCELLED)
    assert (asked.level, asked.extra["failure"], asked.traceback) == (INFO, "requested", False)
    assert "asked to be cancelled; cancelled: JobCancelError: not wanted" in asked.message % asked.args
    remote = line(Failed("context canceled"), CompletionReason.CANCELLED, JobState.CANCELLED,
                  cancel_cause=CancelCause.REMOTE_CANCEL)
    assert remote.extra["failure"] == "remote_cancel" and remote.extra["error"] == "job cancelled remotely"
    handler = line(Failed("RuntimeError: x"), CompletionReason.CANCELLED, JobState.CANCELLED,
                   error_handler_cancel=True)
    assert handler.level == INFO and handler.traceback and handler.extra["failure"] == "error_handler"
    assert "cancelled by the error handler" in handler.message % handler.args


def test_discard_snooze_and_interrupt_levels() -> None:
    discard = line(Discard("bad input"), CompletionReason.FAILED, JobState.DISCARDED)
    assert (discard.level, discard.extra["failure"]) == (ERROR, "requested")
    snooze = line(Snooze(timedelta(minutes=5)), CompletionReason.SNOOZED, JobState.SCHEDULED,
                  scheduled_at=NOW)
    assert snooze.level == DEBUG and snooze.extra["next_attempt_at"] == NOW.isoformat()
    stop = line(Interrupted(), CompletionReason.INTERRUPTED, JobState.AVAILABLE,
                cancel_cause=CancelCause.STOP)
    assert (stop.level, stop.extra["failure"], stop.traceback) == (INFO, "stop", False)


def test_completed_runs_and_silenced_endings_have_no_line() -> None:
    assert line(Completed(), CompletionReason.COMPLETED, JobState.COMPLETED) is None
    quiet = JobLogLevels(retried=NO_LOG)
    assert line(Failed("x"), CompletionReason.FAILED, JobState.RETRYABLE, levels=quiet) is None
    assert run_ending(CompletionReason.FAILED, JobState.AVAILABLE) is RunEnding.RETRIED


def test_levels_accept_names_and_refuse_garbage() -> None:
    levels = JobLogLevels(retried="info", discarded="CRITICAL")
    assert (levels.retried, levels.discarded) == (INFO, 50)
    for bad in ("loud", -5, True, 1.5):
        with pytest.raises(ValidationError, match="retried"):
            JobLogLevels(retried=bad)
    assert parse_job_log_levels(None) == JobLogLevels()
    with pytest.raises(ValidationError, match="JobLogLevels"):
        parse_job_log_levels({"retried": 20})


def test_the_core_builds_the_line_from_its_own_request() -> None:
    import random

    workers = Workers()
    core = ClientCore(ClientConfig(client_id="c", dialect="sqlite", queues={},
                                   job_log_levels=JobLogLevels(discarded=WARNING)), workers, random.Random(1))
    last = JobRow(**{**{f: getattr(JOB, f) for f in JOB.__dataclass_fields__}, "attempt": 3})
    plan = JobPlan(last, None, None, None, unknown_kind_failure(JOB.kind), False)
    submit = core.finish_submit(plan, plan.immediate, now=NOW, started_at=NOW)  # type: ignore[arg-type]
    got = core.run_log_line(plan, plan.immediate, submit, cancel_cause=None,  # type: ignore[arg-type]
                            error_handler_cancel=False, has_exception=False)
    assert got is not None and got.level == WARNING and got.extra["outcome"] == "discarded"
    assert got.extra["failure"] == "unknown_kind"
