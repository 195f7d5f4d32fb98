"""Resumable steps on both drivers, Postgres and SQLite: skips, cursors, Go-written metadata, checkpoints."""

from __future__ import annotations

from typing import Any

import pytest

from river_protocol.intents import FullJobRow, InsertFullJobs
from river_sync import Database, EventKind, JobState
from tests.drivers.behaviour.support import fast_client, stored_metadata, wait_for
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task

DONE = (EventKind.JOB_COMPLETED, EventKind.JOB_FAILED)


def test_failed_attempt_records_progress_and_retry_resumes(h: Harness, client_db_url: str) -> None:
    ran: list[str] = []
    attempts: list[int] = []

    def work(ctx: Any, args: Task) -> None:
        attempts.append(ctx.job.attempt)

        @ctx.step("one")
        def _() -> None:
            ran.append("one")

        @ctx.step("two")
        def _(cursor: Any) -> None:
            ran.append(f"two@{cursor}")
            ctx.set_cursor("two", {"page": 3})
            if ctx.job.attempt == 1:
                raise RuntimeError("flaky")

        with ctx.step("three") as step:
            if not step.skip:
                ran.append("three")

    client = fast_client(h, client_db_url, h.workers(work, Task))
    sub = client.subscribe(DONE)
    with client:
        job_id = client.insert(Task("r")).job.id
        first = wait_for(sub, job_id)
        assert first.kind is EventKind.JOB_FAILED
        meta = stored_metadata(client_db_url, job_id)
        assert meta["river:resumable_step"] == "one"
        assert meta["river:resumable_cursor"] == {"two": {"page": 3}}
        client.jobs.retry(job_id)
        second = wait_for(sub, job_id)
    assert second.kind is EventKind.JOB_COMPLETED
    assert ran == ["one", "two@None", "two@{'page': 3}", "three"]
    assert attempts == [1, 2]


def test_job_started_by_go_resumes_in_python(h: Harness, client_db_url: str) -> None:
    """Metadata exactly as Go's middleware writes it: the stored step is skipped, its cursor used."""
    ran: list[Any] = []

    def work(ctx: Any, args: Task) -> None:
        for name in ("fetch", "transform", "load"):
            @ctx.step(name)
            def _(cursor: Any, name: str = name) -> None:
                ran.append((name, cursor))

    client = fast_client(h, client_db_url, h.workers(work, Task))
    sub = client.subscribe(DONE)
    go_metadata = b'{"river:resumable_cursor":{"transform":{"id":42}},"river:resumable_step":"fetch"}'
    with client, Database.from_url(client_db_url) as db:
        (row,) = db.run(InsertFullJobs(rows=(FullJobRow(
            kind="task", encoded_args=b'{"name":"go"}', metadata=go_metadata),)))
        event = wait_for(sub, row.id)
    assert event.kind is EventKind.JOB_COMPLETED
    assert ran == [("transform", {"id": 42}), ("load", None)]


def test_stored_step_missing_from_worker_fails(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, h.workers(lambda ctx, args: None, Task))
    sub = client.subscribe(DONE)
    with client, Database.from_url(client_db_url) as db:
        (row,) = db.run(InsertFullJobs(rows=(FullJobRow(
            kind="task", encoded_args=b"{}", metadata=b'{"river:resumable_step":"gone"}'),)))
        event = wait_for(sub, row.id)
    assert event.kind is EventKind.JOB_FAILED
    assert 'resumable step "gone" not found in Worker' in event.job.errors[-1].error


def test_checkpoint_commits_with_business_data(h: Harness, client_db_url: str) -> None:
    def work(ctx: Any, args: Task) -> None:
        @ctx.step("import")
        def _() -> None:
            with h.transaction(ctx.client) as tx:
                tx.execute("INSERT INTO biz (v) VALUES ('imported')")
                h.call(ctx.checkpoint, tx, cursor=10)
            raise RuntimeError("crash after the checkpoint")

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True))
    with h.transaction(client) as tx:
        tx.execute("CREATE TABLE IF NOT EXISTS biz (v text)")
        tx.execute("DELETE FROM biz")
    sub = client.subscribe(DONE)
    with client:
        job_id = client.insert(Task("c")).job.id
        event = wait_for(sub, job_id)
        meta = stored_metadata(client_db_url, job_id)
        with h.transaction(client) as tx:
            rows = tx.execute("SELECT v FROM biz").fetchall()
    assert event.kind is EventKind.JOB_FAILED and event.job.state in (JobState.RETRYABLE, JobState.AVAILABLE)
    assert [tuple(r) for r in rows] == [("imported",)]
    assert meta["river:resumable_step"] == "import"
    assert meta["river:resumable_cursor"] == {"import": 10}


def test_checkpoint_outside_a_step_is_refused(h: Harness, client_db_url: str) -> None:
    errors: list[BaseException] = []

    def work(ctx: Any, args: Task) -> None:
        with h.transaction(ctx.client) as tx:
            try:
                h.call(ctx.checkpoint, tx)
            except Exception as exc:
                errors.append(exc)

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True))
    sub = client.subscribe(DONE)
    with client:
        job_id = client.insert(Task("c")).job.id
        assert wait_for(sub, job_id).kind is EventKind.JOB_COMPLETED
    assert len(errors) == 1 and "not inside a resumable step" in str(errors[0])


@pytest.mark.parametrize("swallow", [False, True])
def test_step_failure_fails_the_job_even_if_swallowed(h: Harness, client_db_url: str, swallow: bool) -> None:
    ran: list[str] = []

    def work(ctx: Any, args: Task) -> None:
        try:
            with ctx.step("a"):
                raise ValueError("a broke")
        except ValueError:
            if not swallow:
                raise
        with ctx.step("b") as step:
            if not step.skip:
                ran.append("b")

    client = fast_client(h, client_db_url, h.workers(work, Task))
    sub = client.subscribe(DONE)
    with client:
        job_id = client.insert(Task("s")).job.id
        event = wait_for(sub, job_id)
    assert event.kind is EventKind.JOB_FAILED and "a broke" in event.job.errors[-1].error
    assert ran == []
