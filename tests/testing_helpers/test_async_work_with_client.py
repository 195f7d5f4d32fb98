"""The async drivers' work_with_client (river_trio.testing, river_asyncio.testing): insert, claim,
work and record through an async client, on Postgres and SQLite; and parity with a running client."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import psycopg
import pytest

from river_db.sqlite import connect_sqlite
from river_db.urls import sqlite_path
from river_protocol.errors import ValidationError
from river_protocol.intents import GetJob
from river_protocol.job import JobRow
from river_trio import (
    CancelCause,
    EventKind,
    InsertOpts,
    JobCancel,
    JobSnooze,
    JobState,
    WorkContext,
    Workers,
)
from river_trio.testing import require_inserted, require_not_inserted, work_once, work_with_client
from tests.testing_helpers import (  # noqa: F401  (fixtures)
    FAST,
    WAIT,
    AsyncDriver,
    Other,
    Task,
    async_driver_fixture,
    client_db_url_fixture,
    migrated_pg_fixture,
)

FAR = datetime(2100, 1, 1, tzinfo=UTC)


def _workers(fn: Any) -> Workers:
    workers = Workers()
    workers.job(Task, next_retry=lambda job: FAR)(fn)
    workers.job(Other)(lambda args: None)
    return workers


def _open_tx(url: str) -> Any:
    if url.startswith("postgres"):
        return psycopg.connect(url)
    conn = connect_sqlite(sqlite_path(url))
    conn.execute("BEGIN")
    return conn


def test_claims_works_and_records_the_row(drv: AsyncDriver, client_db_url: str) -> None:
    seen: list[Any] = []

    async def work(ctx: WorkContext, args: Task) -> None:
        seen.append((ctx.job.state, ctx.job.attempt, ctx.client))
        await ctx.client.insert(Other(1))  # the context's client is the real one
        ctx.record_output(args.name)

    async def main() -> None:
        client = drv.package.Client(client_db_url, workers=_workers(work))
        try:
            result = await work_with_client(client, Task("real"))
            assert seen == [(JobState.RUNNING, 1, client)]
            assert result.job == await client.database.run(GetJob(result.job.id))
            await require_inserted(client, Other, state=JobState.AVAILABLE)
            assert result.state is JobState.COMPLETED and result.output == "real"
            assert result.job.attempted_by == (client.client_id,)
            # Jobs ahead in the queue are left alone; scheduled jobs are worked anyway.
            ahead = (await client.insert(Other(), InsertOpts(priority=1))).job
            later = await work_with_client(client, Task("later"), InsertOpts(scheduled_at=FAR))
            assert later.state is JobState.COMPLETED
            other = await client.database.run(GetJob(ahead.id))
            assert other.state is JobState.AVAILABLE and other.attempt == 0
        finally:
            await client.aclose()

    drv.run(main)


def test_an_existing_row_is_retried_then_refused(drv: AsyncDriver, client_db_url: str) -> None:
    def fails(args: Task) -> None:  # a sync worker: runs in a thread
        raise ZeroDivisionError

    async def main() -> None:
        client = drv.package.Client(client_db_url, workers=_workers(fails))
        try:
            inserted = (await client.insert(Task("x"), InsertOpts(max_attempts=2))).job
            first = await work_with_client(client, inserted, rand=0.5)
            assert first.job.state is JobState.RETRYABLE and isinstance(first.error, ZeroDivisionError)
            second = await work_with_client(client, first.job)
            assert second.job.state is JobState.DISCARDED and second.job.attempt == 2
            with pytest.raises(ValidationError, match="already discarded"):
                await work_with_client(client, second.job)
            with pytest.raises(ValidationError, match="already running"):
                await work_with_client(client, dataclasses.replace(inserted, state=JobState.RUNNING))
        finally:
            await client.aclose()

    drv.run(main)


def test_everything_in_the_callers_transaction(drv: AsyncDriver, client_db_url: str) -> None:
    async def work(ctx: WorkContext, args: Task) -> None:
        ctx.record_output("in tx")

    async def main() -> None:
        client = drv.package.Client(client_db_url, workers=_workers(work))
        try:
            conn = _open_tx(client_db_url)
            try:
                result = await work_with_client(client, Task("tx"), tx=conn)
                assert result.state is JobState.COMPLETED and result.output == "in tx"
                assert (await require_inserted(conn, Task, state="completed")).id == result.job.id
                conn.rollback()
            finally:
                conn.close()
            await require_not_inserted(client, Task)
        finally:
            await client.aclose()

    drv.run(main)


def test_cancel_causes_reach_the_database(drv: AsyncDriver, client_db_url: str) -> None:
    async def sleeps(args: Task) -> None:
        await anyio.sleep(3600)

    async def main() -> None:
        client = drv.package.Client(client_db_url, workers=_workers(sleeps))
        try:
            stopped = await work_with_client(client, Task("s"), cancel=CancelCause.STOP)
            remote = await work_with_client(client, Task("r"), cancel=CancelCause.REMOTE_CANCEL)
            timed_out = await work_with_client(client, Task("t"), timeout=0.01)
        finally:
            await client.aclose()
        assert (stopped.job.state, stopped.job.attempt, stopped.job.errors) == (JobState.AVAILABLE, 0, ())
        assert remote.job.state is JobState.CANCELLED
        assert timed_out.job.state is JobState.RETRYABLE
        assert timed_out.job.errors[0].error == "context deadline exceeded"

    drv.run(main)


# ---------------------------------------------------------------- parity with a running client


async def _ok(ctx: WorkContext, args: Task) -> None:
    ctx.record_output({"echo": args.name})


async def _snooze(args: Task) -> None:
    raise JobSnooze(timedelta(minutes=3))


async def _cancel(args: Task) -> None:
    raise JobCancel(ValueError("stop it"))


async def _error(ctx: WorkContext, args: Task) -> None:
    ctx.record_output("partial")
    raise RuntimeError("boom")


SCENARIOS = {
    "completed": (_ok, None),
    "snoozed": (_snooze, None),
    "cancelled": (_cancel, None),
    "retryable": (_error, None),
    "exhausted": (_error, InsertOpts(max_attempts=1)),
}


def _shape(row: JobRow) -> dict[str, Any]:
    metadata = {k: v for k, v in row.metadata.items() if k != "river:unique_nonce"}
    return {
        "state": row.state, "attempt": row.attempt, "errors": [(e.attempt, e.error) for e in row.errors],
        "metadata": metadata, "finalized": row.finalized_at is not None,
        "scheduled_far": row.scheduled_at == FAR, "args": row.args,
    }


async def _reference(
    drv: AsyncDriver, url: str, fn: Any, opts: InsertOpts | None
) -> tuple[EventKind, JobRow]:
    client = drv.package.Client(url, workers=_workers(fn), queues={"default": FAST}, leader_election=False)
    with client.subscribe() as sub:
        async with client:
            inserted = await client.insert(Task("p"), opts)
            with anyio.fail_after(WAIT):
                async for event in sub:
                    if event.job is not None and event.job.id == inserted.job.id:
                        return event.kind, event.job
    raise AssertionError("no event")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_outcome_as_a_running_client(drv: AsyncDriver, client_db_url: str, scenario: str) -> None:
    fn, opts = SCENARIOS[scenario]

    async def main() -> None:
        kind, reference = await _reference(drv, client_db_url, fn, opts)
        offline = await work_once(_workers(fn), Task("p"), opts=opts)
        assert offline.event_kind is kind and _shape(offline.job) == _shape(reference)
        if offline.update.metadata_do_merge:
            assert json.loads(offline.update.metadata_updates).items() <= reference.metadata.items()
        client = drv.package.Client(client_db_url, workers=_workers(fn))
        try:
            online = await work_with_client(client, Task("p"), opts)
        finally:
            await client.aclose()
        assert online.event_kind is kind and online.job.id != reference.id
        assert _shape(online.job) == _shape(reference)

    drv.run(main)
