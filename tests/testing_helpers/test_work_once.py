"""work_once: a worker's run without a database, recorded with the client's own rules."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from river_protocol.errors import ValidationError
from river_protocol.intents import SetStateUpdate
from river_protocol.job import AttemptError, encode_attempt_error
from river_protocol.machines.completer import CompletionReason
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Interrupted, Snooze
from river_protocol.states import JobState
from river_sync import (
    CancelCause,
    Client,
    EventKind,
    JobCancel,
    JobDiscard,
    JobSnooze,
    Migrator,
    WorkCancelled,
    WorkContext,
    Workers,
)
from river_sync.testing import NoDatabaseError, OfflineClient, build_job, work_once
from tests.testing_helpers import Other, Task

NOW = datetime(2024, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)


def test_success_with_output_and_metadata() -> None:
    def worker(ctx: WorkContext, args: Task) -> str:
        ctx.record_output({"greeting": f"hi {args.name}"})
        ctx.metadata_updates["extra"] = 1
        return "returned"

    result = work_once(worker, Task("bob"), now=NOW)
    assert result.outcome == Completed() and result.reason is CompletionReason.COMPLETED
    assert result.event_kind is EventKind.JOB_COMPLETED and result.state is JobState.COMPLETED
    assert result.output == {"greeting": "hi bob"} and result.has_output
    assert result.metadata_updates == {"output": {"greeting": "hi bob"}, "extra": 1}
    assert result.result == "returned" and result.error is None and result.ran
    assert result.args == Task("bob") and result.snoozed_for is None
    assert result.update == SetStateUpdate(
        id=1, state=JobState.COMPLETED, finalized_at=NOW, metadata_do_merge=True,
        metadata_updates=b'{"extra":1,"output":{"greeting":"hi bob"}}',
    )
    assert result.job.finalized_at == NOW and result.job.metadata["output"] == {"greeting": "hi bob"}
    result.raise_error()  # nothing to raise


def test_success_without_output() -> None:
    result = work_once(lambda args: None, Task())
    assert result.output is None and not result.has_output
    assert not result.update.metadata_do_merge and result.update.metadata_updates == b"{}"


@pytest.mark.parametrize("how", ["raise", "return"])
def test_snooze(how: str) -> None:
    def worker(args: Task) -> Any:
        request = JobSnooze(timedelta(minutes=2))
        if how == "raise":
            raise request
        return request

    result = work_once(worker, Task(), now=NOW)
    assert result.outcome == Snooze(timedelta(minutes=2)) and result.snoozed_for == timedelta(minutes=2)
    assert result.event_kind is EventKind.JOB_SNOOZED and result.error is None
    assert result.update == SetStateUpdate(
        id=1, state=JobState.SCHEDULED, attempt=0, scheduled_at=NOW + timedelta(minutes=2),
        metadata_do_merge=True, metadata_updates=b'{"snoozes":1}',
    )
    assert result.job.state is JobState.SCHEDULED and result.job.attempt == 0
    assert result.job.metadata == {"snoozes": 1}


def test_short_snooze_is_available_at_once() -> None:
    result = work_once(lambda a: JobSnooze(timedelta(seconds=1)), Task(), now=NOW)
    assert result.update.state is JobState.AVAILABLE
    assert result.update.scheduled_at == NOW + timedelta(seconds=1)


def test_cancel_and_discard() -> None:
    def cancel(args: Task) -> None:
        raise JobCancel("no more")

    def discard(args: Task) -> None:
        raise JobDiscard(ValueError("bad input"))

    cancelled = work_once(cancel, Task(), now=NOW)
    assert cancelled.outcome == Cancel("no more") and cancelled.event_kind is EventKind.JOB_CANCELLED
    assert cancelled.error is None and cancelled.state is JobState.CANCELLED
    assert cancelled.update.error == encode_attempt_error(NOW, 1, "JobCancelError: no more")
    assert cancelled.job.errors[0].error == "JobCancelError: no more"
    discarded = work_once(discard, Task(), now=NOW)
    assert discarded.outcome == Discard("ValueError: bad input") and discarded.state is JobState.DISCARDED
    assert discarded.event_kind is EventKind.JOB_FAILED and discarded.job.finalized_at == NOW


def test_error_is_retried_with_policy_and_rand() -> None:
    def worker(args: Task) -> None:
        raise RuntimeError("boom")

    result = work_once(worker, Task(), now=NOW, rand=0.5)
    assert isinstance(result.outcome, Failed) and result.outcome.error == "RuntimeError: boom"
    assert isinstance(result.error, RuntimeError) and "RuntimeError: boom" in result.trace
    assert result.event_kind is EventKind.JOB_FAILED
    # Attempt 1: 1 s plus jitter, due within the scheduler interval, so available at once.
    assert result.update.state is JobState.AVAILABLE and result.update.scheduled_at is not None
    assert NOW < result.update.scheduled_at < NOW + timedelta(seconds=5)
    assert work_once(worker, Task(), now=NOW, rand=0.5).update == result.update  # deterministic
    # River counts retries by the errors already recorded: the fifth waits 5**4 s, so retryable.
    prior = [AttemptError(at=NOW, attempt=i, error="e") for i in range(1, 5)]
    later = work_once(worker, build_job(Task(), attempt=5, errors=prior, now=NOW), now=NOW, rand=0.5)
    assert later.update.state is JobState.RETRYABLE and later.job.errors[-1].attempt == 5
    with pytest.raises(RuntimeError, match="boom"):
        result.raise_error()


def test_last_attempt_discards_and_max_attempts_override() -> None:
    def worker(args: Task) -> None:
        raise RuntimeError("boom")

    result = work_once(worker, Task(), now=NOW, max_attempts=1)
    assert result.job.max_attempts == 1 and result.state is JobState.DISCARDED


def test_worker_next_retry_is_used() -> None:
    class Worker:
        args_type = Task

        def work(self, ctx: WorkContext, args: Task) -> None:
            raise RuntimeError("x")

        def next_retry(self, job: Any) -> datetime:
            return NOW + timedelta(hours=3)

    result = work_once(Worker(), Task(), now=NOW)
    assert result.update.state is JobState.RETRYABLE
    assert result.update.scheduled_at == NOW + timedelta(hours=3)


def test_error_handler_can_cancel() -> None:
    seen: list[BaseException] = []

    def handler(job: Any, exc: BaseException) -> bool:
        seen.append(exc)
        return True

    result = work_once(lambda a: 1 / 0, Task(), now=NOW, error_handler=handler)
    assert [type(e) for e in seen] == [ZeroDivisionError]
    assert result.state is JobState.CANCELLED and result.event_kind is EventKind.JOB_CANCELLED


def test_snooze_of_a_job_someone_tried_to_cancel_is_reported_cancelled() -> None:
    # As the client publishes it: the stored row is cancelled, so the event is job_cancelled.
    job = build_job(Task(), now=NOW, metadata={"cancel_attempted_at": "2025-01-01T00:00:00Z"})
    result = work_once(lambda a: JobSnooze(timedelta(minutes=2)), job, now=NOW, args_type=Task)
    assert result.reason is CompletionReason.SNOOZED and result.state is JobState.CANCELLED
    assert result.event_kind is EventKind.JOB_CANCELLED


def test_middleware_wraps_the_worker() -> None:
    calls: list[str] = []

    def mw(ctx: WorkContext, args: Any, call_next: Any) -> Any:
        calls.append("before")
        ctx.record_output("from middleware")
        out = call_next(ctx, args)
        calls.append("after")
        return out

    result = work_once(lambda a: calls.append("work"), Task(), middleware=[mw])
    assert calls == ["before", "work", "after"] and result.output == "from middleware"


def test_cancel_causes_map_like_the_client() -> None:
    def honours(ctx: WorkContext, args: Task) -> None:
        ctx.raise_if_cancelled()

    stopped = work_once(honours, Task(), now=NOW, cancel=CancelCause.STOP)
    assert stopped.outcome == Interrupted() and stopped.event_kind is EventKind.JOB_INTERRUPTED
    assert stopped.update == SetStateUpdate(id=1, state=JobState.AVAILABLE, attempt=0, scheduled_at=NOW)
    assert isinstance(stopped.error, WorkCancelled) and stopped.cancel_cause is CancelCause.STOP
    remote = work_once(honours, Task(), now=NOW, cancel=CancelCause.REMOTE_CANCEL)
    assert remote.state is JobState.CANCELLED
    assert remote.job.errors[0].error == "JobCancelError: job cancelled remotely"
    timed_out = work_once(honours, Task(), now=NOW, cancel=CancelCause.TIMEOUT, rand=0.1)
    assert timed_out.job.errors[0].error == "context deadline exceeded"
    # Finishing normally despite the token completes the job, as in production.
    assert work_once(lambda a: None, Task(), cancel=CancelCause.TIMEOUT).state is JobState.COMPLETED


def test_timeout_sets_the_token_during_the_run() -> None:
    def waits(ctx: WorkContext, args: Task) -> None:
        # Bounded wait: returns as soon as the deadline sets the token.
        assert ctx.token.wait(30)
        ctx.raise_if_cancelled()

    result = work_once(waits, Task(), timeout=0.01, rand=0.2)
    assert result.cancel_cause is CancelCause.TIMEOUT
    assert result.job.errors[0].error == "context deadline exceeded"


def test_no_timer_thread_without_a_deadline() -> None:
    before = threading.active_count()
    result = work_once(lambda a: threading.active_count(), Task(), timeout=0)
    assert result.result == before


def test_offline_client_raises_and_the_error_reaches_the_test() -> None:
    def uses_client(ctx: WorkContext, args: Task) -> None:
        assert ctx.client.schema is None and ctx.client.client_id == "river-test"
        ctx.client.insert(Other())

    with pytest.raises(NoDatabaseError, match=r"ctx.client.insert: this worker ran without a database"):
        work_once(uses_client, Task())
    assert isinstance(OfflineClient(), OfflineClient)


def test_a_given_client_lends_context_and_settings(tmp_path: Any) -> None:
    workers = Workers()
    seen: list[Any] = []

    @workers.job(Task)
    def work(ctx: WorkContext, args: Task) -> None:
        seen.append(ctx.client)
        raise RuntimeError("x")

    with Migrator(str(tmp_path / "db.sqlite3")) as migrator:  # a client opens no missing file
        migrator.migrate_up()
    with Client(str(tmp_path / "db.sqlite3"), workers=workers, max_attempts=1, client_id="me") as client:
        result = work_once(None, Task(), client=client, now=NOW)
    assert seen == [client]
    assert result.job.attempted_by == ("me",) and result.state is JobState.DISCARDED


def test_job_rows_unknown_kinds_and_bad_args() -> None:
    workers = Workers()
    workers.job(Task)(lambda args: None)
    job = build_job(Task("x"), id=42, attempt=3, now=NOW)
    done = work_once(workers, job, now=NOW)
    assert done.update.id == 42 and done.state is JobState.COMPLETED and done.job.attempt == 3

    unknown = work_once(workers, build_job(Other(), now=NOW), now=NOW, rand=0.3)
    assert not unknown.ran and unknown.args is None and unknown.event_kind is EventKind.JOB_FAILED
    assert "not registered" in unknown.job.errors[0].error

    bad = build_job(Task(), now=NOW)
    import dataclasses

    bad = dataclasses.replace(bad, encoded_args=b'{"name": 5}')
    undecodable = work_once(workers, bad, now=NOW, rand=0.3)
    assert not undecodable.ran and undecodable.job.errors[0].error.startswith("ValidationError")


def test_args_type_from_the_annotation() -> None:
    def annotated(ctx: WorkContext, args: Task) -> str:
        return args.name

    assert work_once(annotated, build_job(Task("ann"))).result == "ann"


def test_worker_objects_and_one_argument_functions() -> None:
    class Worker:
        args_type = Task

        def work(self, args: Task) -> None:
            self.got = args

    worker = Worker()
    assert work_once(worker, Task("w")).state is JobState.COMPLETED and worker.got == Task("w")
    assert work_once(worker, build_job(Task("r"))).args == Task("r")
    assert work_once(lambda a: None, build_job(Task()), args_type=Task).state is JobState.COMPLETED


def test_bad_worker_arguments() -> None:
    with pytest.raises(ValidationError, match="cannot tell which args type"):
        work_once(lambda a: None, build_job(Task()))
    with pytest.raises(ValidationError, match="cannot tell which args type"):
        work_once(lambda a: None, build_job(Task()), args_type=dict)  # dict has no kind
    with pytest.raises(ValidationError, match="expected Workers"):
        work_once(42, Task())
    with pytest.raises(ValidationError, match=r"rand must be in \[0, 1\)"):
        work_once(lambda a: None, Task(), rand=1.5)


def test_base_exceptions_propagate() -> None:
    def interrupts(args: Task) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        work_once(interrupts, Task())
