"""work_with_client: insert, claim, work and record through a real client, on Postgres and SQLite."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from river_db.sqlite import connect_sqlite
from river_db.urls import sqlite_path
from river_protocol.errors import ValidationError
from river_protocol.intents import GetJob
from river_sync import Client, InsertOpts, JobState, WorkContext, Workers
from river_sync.testing import require_inserted, require_not_inserted, work_with_client
from tests.testing_helpers import (  # noqa: F401  (fixtures)
    Other,
    Task,
    client_db_url_fixture,
    migrated_pg_fixture,
)


def _workers(fn: Any) -> Workers:
    workers = Workers()
    workers.job(Task)(fn)
    workers.job(Other)(lambda args: None)
    return workers


def test_claims_with_the_producers_claim_and_records_the_row(client_db_url: str) -> None:
    seen: list[Any] = []

    def work(ctx: WorkContext, args: Task) -> None:
        seen.append((ctx.job.state, ctx.job.attempt, ctx.client))
        ctx.client.insert(Other(1))  # the context's client is the real one
        ctx.record_output(args.name)

    with Client(client_db_url, workers=_workers(work)) as client:
        result = work_with_client(client, Task("real"))
        assert seen == [(JobState.RUNNING, 1, client)]
        assert result.job == client.database.run(GetJob(result.job.id))
        require_inserted(client, Other, state=JobState.AVAILABLE)
    assert result.state is JobState.COMPLETED and result.output == "real"
    assert result.job.attempted_by == (client.client_id,) and result.job.metadata["output"] == "real"


def test_jobs_ahead_in_the_queue_are_left_alone(client_db_url: str) -> None:
    with Client(client_db_url, workers=_workers(lambda a: None)) as client:
        ahead = client.insert(Other(), InsertOpts(priority=1)).job
        result = work_with_client(client, Task(), InsertOpts(priority=4))
        scheduled = work_with_client(
            client, Task("later"), InsertOpts(scheduled_at=datetime.now(UTC) + timedelta(days=1))
        )
        pending = work_with_client(client, Task("pending"), InsertOpts(pending=True))
        other = client.database.run(GetJob(ahead.id))
    assert result.state is JobState.COMPLETED and result.job.attempt == 1
    assert scheduled.state is JobState.COMPLETED and pending.state is JobState.COMPLETED
    assert other.state is JobState.AVAILABLE and other.attempt == 0 and other.attempted_by == ()


def test_an_existing_job_row(client_db_url: str) -> None:
    with Client(client_db_url, workers=_workers(lambda a: 1 / 0)) as client:
        inserted = client.insert(Task("x"), InsertOpts(max_attempts=2)).job
        first = work_with_client(client, inserted, rand=0.5)
        assert first.job.state is JobState.AVAILABLE and isinstance(first.error, ZeroDivisionError)
        second = work_with_client(client, first.job)
        assert second.job.state is JobState.DISCARDED and second.job.attempt == 2
        assert [e.attempt for e in second.job.errors] == [1, 2]
        assert second.job.attempted_by == (client.client_id, client.client_id)
        with pytest.raises(ValidationError, match="already discarded"):
            work_with_client(client, second.job)
        with pytest.raises(ValidationError, match="already running"):
            work_with_client(client, dataclasses.replace(inserted, state=JobState.RUNNING))


def _open_tx(url: str) -> Any:
    if url.startswith("postgres"):
        return psycopg.connect(url)
    conn = connect_sqlite(sqlite_path(url))
    conn.execute("BEGIN")
    return conn


def test_everything_in_the_callers_transaction(client_db_url: str) -> None:
    with Client(client_db_url, workers=_workers(lambda ctx, a: ctx.record_output("in tx"))) as client:
        conn = _open_tx(client_db_url)
        try:
            result = work_with_client(client, Task("tx"), tx=conn)
            assert result.state is JobState.COMPLETED and result.output == "in tx"
            assert require_inserted(conn, Task, state="completed").id == result.job.id
            conn.rollback()
        finally:
            conn.close()
        require_not_inserted(client, Task)


def test_complete_in_the_workers_own_transaction(client_db_url: str) -> None:
    def work(ctx: WorkContext, args: Task) -> None:
        conn = _open_tx(client_db_url)
        try:
            ctx.record_output("atomic")
            ctx.complete_in(conn)
            conn.commit()
        finally:
            conn.close()

    with Client(client_db_url, workers=_workers(work)) as client:
        result = work_with_client(client, Task())
    assert result.completed_in_tx and result.state is JobState.COMPLETED
    assert result.job.metadata["output"] == "atomic"


def test_cancel_causes_reach_the_database(client_db_url: str) -> None:
    from river_sync import CancelCause

    def honours(ctx: WorkContext, args: Task) -> None:
        ctx.raise_if_cancelled()

    with Client(client_db_url, workers=_workers(honours)) as client:
        stopped = work_with_client(client, Task("s"), cancel=CancelCause.STOP)
        remote = work_with_client(client, Task("r"), cancel=CancelCause.REMOTE_CANCEL)
    # A stop gives the attempt back and leaves the job available; a remote cancel ends it.
    assert (stopped.job.state, stopped.job.attempt, stopped.job.errors) == (JobState.AVAILABLE, 0, ())
    assert remote.job.state is JobState.CANCELLED
    assert remote.job.errors[0].error == "JobCancelError: job cancelled remotely"
