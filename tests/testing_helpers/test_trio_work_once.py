"""river_trio.testing.work_once: async and sync workers without a database, same WorkResult as
river_sync's. Timeouts run in virtual time (MockClock), so hour-long sleeps cost nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio
import trio.testing

import river_sync.testing
from river_protocol.errors import ValidationError
from river_protocol.intents import SetStateUpdate
from river_protocol.machines.completer import CompletionReason
from river_protocol.outcomes import Completed, Interrupted, Snooze
from river_trio import (
    CancelCause,
    Client,
    EventKind,
    JobCancel,
    JobSnooze,
    JobState,
    WorkCancelled,
    WorkContext,
    Workers,
)
from river_trio.testing import NoDatabaseError, build_job, work_once
from tests.testing_helpers import Other, Task

NOW = datetime(2024, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)


def run(fn: Callable[[], Awaitable[Any]], *, virtual: bool = False) -> Any:
    clock = trio.testing.MockClock(autojump_threshold=0) if virtual else None
    return trio.run(fn, clock=clock)


def test_async_worker_success_matches_the_sync_helper() -> None:
    async def worker(ctx: WorkContext, args: Task) -> str:
        await trio.sleep(0)
        ctx.record_output({"greeting": f"hi {args.name}"})
        return "returned"

    def sync_worker(ctx: Any, args: Task) -> str:
        ctx.record_output({"greeting": f"hi {args.name}"})
        return "returned"

    result = run(lambda: work_once(worker, Task("bob"), now=NOW))
    assert result.outcome == Completed() and result.reason is CompletionReason.COMPLETED
    assert result.event_kind is EventKind.JOB_COMPLETED and result.state is JobState.COMPLETED
    assert result.output == {"greeting": "hi bob"} and result.result == "returned" and result.ran
    assert result.update == SetStateUpdate(
        id=1, state=JobState.COMPLETED, finalized_at=NOW, metadata_do_merge=True,
        metadata_updates=b'{"output":{"greeting":"hi bob"}}',
    )
    reference = river_sync.testing.work_once(sync_worker, Task("bob"), now=NOW)
    assert result.update == reference.update and result.job == reference.job


def test_sync_workers_run_in_a_thread() -> None:
    import threading

    seen: list[bool] = []

    def worker(args: Task) -> None:
        seen.append(threading.current_thread() is threading.main_thread())

    result = run(lambda: work_once(worker, Task()))
    assert result.state is JobState.COMPLETED and seen == [False]


def test_outcomes_as_requests_and_errors() -> None:
    async def snooze(args: Task) -> Any:
        return JobSnooze(timedelta(minutes=2))

    async def cancel(args: Task) -> None:
        raise JobCancel("no more")

    async def boom(args: Task) -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        snoozed = await work_once(snooze, Task(), now=NOW)
        assert snoozed.outcome == Snooze(timedelta(minutes=2)) and snoozed.error is None
        assert snoozed.job.state is JobState.SCHEDULED and snoozed.job.metadata == {"snoozes": 1}
        cancelled = await work_once(cancel, Task(), now=NOW)
        assert cancelled.state is JobState.CANCELLED and cancelled.error is None
        assert cancelled.job.errors[0].error == "JobCancelError: no more"
        failed = await work_once(boom, Task(), now=NOW, rand=0.5)
        assert isinstance(failed.error, RuntimeError) and "RuntimeError: boom" in failed.trace
        assert failed.job.errors[0].error == "RuntimeError: boom"
        assert (await work_once(boom, Task(), now=NOW, rand=0.5)).update == failed.update
        assert (await work_once(boom, Task(), max_attempts=1)).state is JobState.DISCARDED

    run(main)


def test_async_error_handler_and_middleware() -> None:
    calls: list[str] = []

    async def mw(ctx: WorkContext, args: Any, call_next: Any) -> Any:
        calls.append("before")
        out = await call_next(ctx, args)
        calls.append("after")
        return out

    async def handler(job: Any, exc: BaseException) -> bool:
        await trio.sleep(0)
        calls.append(type(exc).__name__)
        return True

    async def worker(args: Task) -> None:
        calls.append("work")
        raise ValueError("x")

    result = run(lambda: work_once(worker, Task(), middleware=[mw], error_handler=handler))
    assert calls == ["before", "work", "ValueError"] and result.state is JobState.CANCELLED


def test_timeout_cancels_an_async_worker_in_virtual_time() -> None:
    async def sleeps(ctx: WorkContext, args: Task) -> None:
        await trio.sleep(3600)

    async def main() -> None:
        start = trio.current_time()
        result = await work_once(sleeps, Task(), timeout=5, rand=0.2)
        assert trio.current_time() - start == pytest.approx(5)
        assert result.cancel_cause is CancelCause.TIMEOUT and isinstance(result.error, WorkCancelled)
        assert result.job.errors[0].error == "context deadline exceeded"
        # The job's own timeout applies when none is given.
        workers = Workers()
        workers.job(Task, timeout=timedelta(seconds=2))(sleeps)
        start = trio.current_time()
        by_worker = await work_once(workers, Task())
        assert trio.current_time() - start == pytest.approx(2)
        assert by_worker.cancel_cause is CancelCause.TIMEOUT

    run(main, virtual=True)


def test_timeout_sets_a_sync_workers_token() -> None:
    def waits(ctx: WorkContext, args: Task) -> None:
        assert ctx.token.wait(30)  # returns as soon as the timer sets the token
        ctx.raise_if_cancelled()

    result = run(lambda: work_once(waits, Task(), timeout=0.01, rand=0.2))
    assert result.cancel_cause is CancelCause.TIMEOUT
    assert result.job.errors[0].error == "context deadline exceeded"


def test_cancel_causes_map_like_the_client() -> None:
    async def sleeps(args: Task) -> None:
        await trio.sleep(3600)

    async def main() -> None:
        stopped = await work_once(sleeps, Task(), now=NOW, cancel=CancelCause.STOP)
        assert stopped.outcome == Interrupted() and stopped.event_kind is EventKind.JOB_INTERRUPTED
        assert stopped.update == SetStateUpdate(id=1, state=JobState.AVAILABLE, attempt=0, scheduled_at=NOW)
        remote = await work_once(sleeps, Task(), now=NOW, cancel=CancelCause.REMOTE_CANCEL)
        assert remote.state is JobState.CANCELLED
        assert remote.job.errors[0].error == "JobCancelError: job cancelled remotely"
        # A worker that never reaches a checkpoint completes despite the token, as in the client.
        quick = await work_once(lambda a: None, Task(), cancel=CancelCause.TIMEOUT)
        assert quick.state is JobState.COMPLETED

    run(main, virtual=True)


def test_offline_client_error_reaches_the_test() -> None:
    async def uses_client(ctx: WorkContext, args: Task) -> None:
        await ctx.client.insert(Other())

    with pytest.raises(NoDatabaseError, match=r"ctx.client.insert: this worker ran without a database"):
        run(lambda: work_once(uses_client, Task()))


def test_a_given_client_lends_context_and_settings(tmp_path: Any) -> None:
    workers = Workers()
    seen: list[Any] = []

    @workers.job(Task)
    async def work(ctx: WorkContext, args: Task) -> None:
        seen.append(ctx.client)
        raise RuntimeError("x")

    async def main() -> None:
        client = Client(str(tmp_path / "db.sqlite3"), workers=workers, max_attempts=1, client_id="me")
        result = await work_once(None, Task(), client=client, now=NOW)
        assert seen == [client]
        assert result.job.attempted_by == ("me",) and result.state is JobState.DISCARDED

    run(main)


def test_job_rows_unknown_kinds_and_bad_args() -> None:
    workers = Workers()

    @workers.job(Task)
    async def work(args: Task) -> None:
        return None

    async def main() -> None:
        done = await work_once(workers, build_job(Task("x"), id=42, attempt=3, now=NOW), now=NOW)
        assert done.update.id == 42 and done.state is JobState.COMPLETED and done.job.attempt == 3
        unknown = await work_once(workers, build_job(Other(), now=NOW), now=NOW, rand=0.3)
        assert not unknown.ran and "not registered" in unknown.job.errors[0].error
        bad = dataclasses.replace(build_job(Task(), now=NOW), encoded_args=b'{"name": 5}')
        undecodable = await work_once(workers, bad, now=NOW, rand=0.3)
        assert not undecodable.ran and undecodable.job.errors[0].error.startswith("ValidationError")
        with pytest.raises(ValidationError, match="cannot tell which args type"):
            await work_once(lambda a: None, build_job(Task()))

    run(main)


def test_base_exceptions_propagate() -> None:
    async def interrupts(args: Task) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(lambda: work_once(interrupts, Task()))


def test_snooze_of_a_job_someone_tried_to_cancel_is_reported_cancelled() -> None:
    async def worker(args: Task) -> JobSnooze:
        await trio.sleep(0)
        return JobSnooze(timedelta(minutes=2))

    job = build_job(Task(), now=NOW, metadata={"cancel_attempted_at": "2025-01-01T00:00:00Z"})
    result = run(lambda: work_once(worker, job, now=NOW, args_type=Task))
    assert result.reason is CompletionReason.SNOOZED and result.state is JobState.CANCELLED
    assert result.event_kind is EventKind.JOB_CANCELLED
