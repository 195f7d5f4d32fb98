"""``tx=`` end to end through ``river_asyncio.Client`` on real Postgres, for every asyncio-native
transaction kind: psycopg ``AsyncConnection``, SQLAlchemy ``AsyncConnection`` and ``AsyncSession``
on psycopg and on asyncpg, asyncpg ``Connection`` (and a pool's).

``test_caller_tx_asyncio_runners.py`` checks the runners statement by statement; here the public client
does the insert (``insert``, ``insert_many``, the admin API, through insert middleware too),
the caller commits or rolls back, and a running client works only what committed. Under trio,
``river_trio.Client`` refuses the same connected objects with a ``ValidationError`` and leaves
the caller's transaction usable.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import psycopg
import pytest
import trio

import river_asyncio
import river_trio
from river_asyncio import EventKind, InsertManyParams, InsertOpts, JobState, QueueConfig, Workers
from river_db.migrator import Migrator
from river_protocol.errors import ValidationError
from tests.drivers.test_caller_tx_asyncio_runners import KINDS, open_caller
from tests.drivers.test_caller_tx_asyncio_runners import url_fixture as url_fixture  # the url fixture
from tests.drivers.test_client_support import migrated_pg_fixture  # noqa: F401 - the _migrated_pg fixture

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

WAIT = 15  # seconds; generous on a loaded machine, never reached when things work


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Receipt:
    kind: ClassVar[str] = "tx_receipt"
    order: str


def receipt_workers(done: list[str] | None = None) -> Workers:
    workers = Workers()

    @workers.job(Receipt)
    async def send_receipt(args: Receipt) -> None:
        if done is not None:
            done.append(args.order)

    return workers


@asynccontextmanager
async def inserter(url: str) -> AsyncIterator[river_asyncio.Client]:
    """An insert-only client (no queues), as a web process has."""
    client = river_asyncio.Client(url, workers=receipt_workers())
    try:
        yield client
    finally:
        await client.aclose()


def stored(url: str) -> list[tuple[str, str, str]]:
    """(order, queue, state) of every committed receipt job, in insertion order."""
    with psycopg.connect(url) as conn:
        return [
            (r[0], r[1], r[2]) for r in conn.execute(
                "SELECT args->>'order', queue, state::text FROM river_job "
                "WHERE kind = 'tx_receipt' ORDER BY id"
            )
        ]


# ---------------------------------------------------------------- insert


@pytest.mark.parametrize("kind", KINDS)
async def test_insert_commits_and_rolls_back_with_the_callers_transaction(kind: str, url: str) -> None:
    async with inserter(url) as client, open_caller(kind, url) as caller:
        result = await client.insert(Receipt("kept"), tx=await caller.begin())
        assert (result.job.kind, result.job.state, result.job.args) == ("tx_receipt", JobState.AVAILABLE,
                                                                        {"order": "kept"})
        assert stored(url) == []  # not visible before the caller commits
        await caller.commit()
        assert stored(url) == [("kept", "default", "available")]

        await client.insert(Receipt("dropped"), tx=await caller.begin())
        await caller.rollback()
        assert stored(url) == [("kept", "default", "available")]


class _Undo(Exception):
    pass


@pytest.mark.parametrize("kind", KINDS)
async def test_a_rolled_back_savepoint_takes_its_insert_and_the_outer_commit_keeps_the_rest(
    kind: str, url: str
) -> None:
    async with inserter(url) as client, open_caller(kind, url) as caller:
        tx = await caller.begin()
        await client.insert(Receipt("before"), tx=tx)
        with pytest.raises(_Undo):
            async with caller.savepoint():
                await client.insert(Receipt("in-savepoint"), tx=tx)
                raise _Undo
        async with caller.savepoint():
            await client.insert(Receipt("in-kept-savepoint"), tx=tx)
        await client.insert(Receipt("after"), tx=tx)
        await caller.commit()
    assert [order for order, _, _ in stored(url)] == ["before", "in-kept-savepoint", "after"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_running_client_works_what_committed_and_never_what_rolled_back(kind: str, url: str) -> None:
    done: list[str] = []
    # The rolled-back insert's notification uses up the insert-notify throttle window (100 ms
    # by default), which would keep the committed insert's back: its job would wait for the
    # queue's 1 s poll. A 1 ms window lets the commit's NOTIFY wake the queue.
    client = river_asyncio.Client(url, workers=receipt_workers(done), queues={"default": QueueConfig()},
                                  fetch_cooldown=timedelta(milliseconds=1))
    async with client, open_caller(kind, url) as caller:
        sub = client.subscribe([EventKind.JOB_COMPLETED])
        await client.insert(Receipt("rolled-back"), tx=await caller.begin())
        await caller.rollback()
        committed = await client.insert(Receipt("committed"), tx=await caller.begin())
        await caller.commit()  # the insert's NOTIFY goes out with this commit
        event = await sub.get(timeout=WAIT)
        assert event.job.id == committed.job.id
    assert done == ["committed"]
    assert stored(url) == [("committed", "default", "completed")]


async def test_insert_many_is_one_atomic_part_of_the_callers_transaction(url: str) -> None:
    async with inserter(url) as client, open_caller("sqlalchemy-session-asyncpg", url) as caller:
        other = InsertOpts(queue="other", priority=3)
        items = [Receipt("a"), InsertManyParams(Receipt("b"), other), Receipt("c")]
        results = await client.insert_many(items, tx=await caller.begin())
        assert [(r.job.args["order"], r.job.queue, r.job.priority) for r in results] == [
            ("a", "default", 1), ("b", "other", 3), ("c", "default", 1)]
        await caller.rollback()
        assert stored(url) == []

        results = await client.insert_many(items, tx=await caller.begin())
        await caller.commit()
    assert stored(url) == [("a", "default", "available"), ("b", "other", "available"),
                           ("c", "default", "available")]
    assert len({r.job.id for r in results}) == 3


# ---------------------------------------------------------------- the admin API


@pytest.mark.parametrize("kind", ["asyncpg", "sqlalchemy-session-psycopg"])
async def test_the_admin_api_reads_and_changes_jobs_inside_the_callers_transaction(
    kind: str, url: str
) -> None:
    async with inserter(url) as client, open_caller(kind, url) as caller:
        queued = (await client.insert(Receipt("queued"))).job  # committed on its own
        tx = await caller.begin()
        fresh = (await client.insert(Receipt("fresh"), tx=tx)).job
        # The transaction sees its own uncommitted insert; no other connection does.
        assert (await client.jobs.get(fresh.id, tx=tx)).args == {"order": "fresh"}
        page = await client.jobs.list(kinds=["tx_receipt"], tx=tx)
        assert [j.id for j in page.jobs] == [queued.id, fresh.id]
        assert [j.id for j in (await client.jobs.list(kinds=["tx_receipt"])).jobs] == [queued.id]

        assert (await client.jobs.cancel(queued.id, tx=tx)).state is JobState.CANCELLED
        assert (await client.jobs.get(queued.id)).state is JobState.AVAILABLE  # not yet committed
        assert (await client.jobs.delete(fresh.id, tx=tx)).id == fresh.id
        counts = await client.jobs.count_by_state(tx=tx)
        assert (counts[JobState.CANCELLED], counts[JobState.AVAILABLE]) == (1, 0)
        await caller.rollback()
        assert stored(url) == [("queued", "default", "available")]  # the cancel went with the rollback

        tx = await caller.begin()
        await client.jobs.cancel(queued.id, tx=tx)
        await client.jobs.update(queued.id, output={"note": "cancelled in tx"}, tx=tx)
        await caller.commit()
        row = await client.jobs.get(queued.id)
        assert row.state is JobState.CANCELLED and row.metadata["output"] == {"note": "cancelled in tx"}

        tx = await caller.begin()
        assert (await client.jobs.retry(queued.id, tx=tx)).state is JobState.AVAILABLE
        await caller.commit()
    assert stored(url) == [("queued", "default", "available")]


async def test_queue_pause_in_the_callers_transaction_takes_effect_only_when_it_commits(url: str) -> None:
    async with inserter(url) as client, open_caller("psycopg", url) as caller:
        with psycopg.connect(url, autocommit=True) as conn:  # as a client working the queue records it
            conn.execute("INSERT INTO river_queue (name, metadata, created_at, updated_at) "
                         "VALUES ('default', '{}', now(), now()) ON CONFLICT DO NOTHING")
        assert await client.queues.pause("default", tx=await caller.begin()) == 1
        await caller.rollback()
        assert (await client.queues.get("default")).paused_at is None
        await client.queues.pause("default", tx=await caller.begin())
        await caller.commit()
        assert (await client.queues.get("default")).paused_at is not None


# ---------------------------------------------------------------- refusals


def _insert_under_trio(url: str, tx: Any) -> str:
    """In a thread of its own, a trio loop's ``river_trio.Client.insert(..., tx=tx)``; the
    ValidationError's text (the test fails if the insert goes through)."""
    assert threading.current_thread() is not threading.main_thread()

    async def main() -> str:
        client = river_trio.Client(url, workers=receipt_workers())
        try:
            with pytest.raises(ValidationError) as refused:
                await client.insert(Receipt("under-trio"), tx=tx)
            return str(refused.value)
        finally:
            await client.aclose()

    return trio.run(main)


NAMES = {
    "psycopg": "psycopg's AsyncConnection", "psycopg-autocommit": "psycopg's AsyncConnection",
    "psycopg-client-cursor": "psycopg's AsyncConnection",
    "sqlalchemy-conn-psycopg": "SQLAlchemy's asyncio AsyncConnection",
    "sqlalchemy-session-psycopg": "SQLAlchemy's asyncio AsyncSession",
    "sqlalchemy-conn-asyncpg": "SQLAlchemy's asyncio AsyncConnection",
    "sqlalchemy-session-asyncpg": "SQLAlchemy's asyncio AsyncSession",
    "asyncpg": "asyncpg's Connection", "asyncpg-pool": "asyncpg's PoolConnectionProxy",
}


@pytest.mark.parametrize("kind", KINDS)
async def test_under_trio_the_connected_asyncio_kinds_are_refused_and_the_transaction_goes_on(
    kind: str, url: str
) -> None:
    async with inserter(url) as client, open_caller(kind, url) as caller:
        tx = await caller.begin()
        await client.insert(Receipt("asyncio-before"), tx=tx)
        message = await anyio.to_thread.run_sync(_insert_under_trio, url, tx)
        assert message.startswith(f"{NAMES[kind]} runs on asyncio only: under trio pass a sync psycopg")
        await client.insert(Receipt("asyncio-after"), tx=tx)  # the refusal sent nothing
        await caller.commit()
    assert [order for order, _, _ in stored(url)] == ["asyncio-before", "asyncio-after"]


async def test_a_sqlite_client_refuses_a_postgres_transaction_and_sends_nothing(
    url: str, tmp_path: Path
) -> None:
    sqlite_url = f"sqlite:///{tmp_path / 'river.sqlite3'}"
    with Migrator(sqlite_url) as migrator:
        migrator.migrate_up()
    async with inserter(sqlite_url) as sqlite_client, inserter(url) as client, \
            open_caller("sqlalchemy-session-asyncpg", url) as caller:
        tx = await caller.begin()
        with pytest.raises(ValidationError, match="sqlite"):
            await sqlite_client.insert(Receipt("wrong-database"), tx=tx)
        await client.insert(Receipt("right-database"), tx=tx)
        await caller.commit()
    assert stored(url) == [("right-database", "default", "available")]



# ---------------------------------------------------------------- insert middleware


async def test_insert_middleware_runs_around_an_insert_in_the_callers_transaction(url: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from river_otel import METADATA_KEY, OtelMiddleware

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    otel = OtelMiddleware(tracer_provider=provider)
    client = river_asyncio.Client(url, workers=receipt_workers(), insert_middleware=[otel.insert_many_async])
    try:
        async with open_caller("sqlalchemy-session-asyncpg", url) as caller:
            dropped = await client.insert(Receipt("dropped"), tx=await caller.begin())
            await caller.rollback()
            kept = await client.insert(Receipt("kept"), tx=await caller.begin())
            await caller.commit()
    finally:
        await client.aclose()
        provider.shutdown()
    # Each insert had its producer span, and the metadata it added rode in the transaction.
    assert [s.attributes["river.job.id"] for s in spans.get_finished_spans()] == [dropped.job.id, kept.job.id]
    assert METADATA_KEY in kept.job.metadata
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, metadata ? %s FROM river_job", (METADATA_KEY,)).fetchall()
    assert rows == [(kept.job.id, True)]
