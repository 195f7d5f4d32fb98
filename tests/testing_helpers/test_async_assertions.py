"""The async drivers' require_inserted / require_many_inserted / require_not_inserted
(river_trio.testing and river_asyncio.testing, one implementation) on both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from river_db.sqlite import connect_sqlite
from river_db.urls import sqlite_path
from river_protocol.errors import ValidationError
from river_trio import AsyncDatabase, Client, InsertManyParams, InsertOpts, JobState, transaction
from river_trio.testing import (
    ExpectedJob,
    InsertedJob,
    require_inserted,
    require_many_inserted,
    require_not_inserted,
)
from tests.testing_helpers import (  # noqa: F401  (fixtures)
    AsyncDriver,
    Other,
    Task,
    Urgent,
    async_driver_fixture,
    client_db_url_fixture,
    migrated_pg_fixture,
)


@asynccontextmanager
async def insert_only(drv: AsyncDriver, url: str, **kwargs: Any) -> AsyncIterator[Client]:
    client = drv.package.Client(url, **kwargs)
    try:
        yield client
    finally:
        await client.aclose()


def _open_tx(url: str) -> Any:
    """A blocking connection with an open transaction, usable from trio's worker threads."""
    if url.startswith("postgres"):
        return psycopg.connect(url)
    conn = connect_sqlite(sqlite_path(url))
    conn.execute("BEGIN")
    return conn


def test_found_through_client_database_and_url(drv: AsyncDriver, client_db_url: str) -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

    async def main() -> None:
        async with insert_only(drv, client_db_url) as client:
            inserted = await client.insert(Urgent("go"), InsertOpts(scheduled_at=when))
            await client.insert(Task("other kind"))
            job = await require_inserted(
                client, Urgent, queue="urgent", priority=2, max_attempts=3, state=JobState.SCHEDULED,
                tags=["hot"], scheduled_at=when, args={"what": "go"},
            )
        assert isinstance(job, InsertedJob) and job.id == inserted.job.id
        assert job.decoded_args == Urgent("go")
        async with await AsyncDatabase.from_url(client_db_url) as db:
            assert (await require_inserted(db, "urgent", state="scheduled")).id == job.id
        by_kind = await require_inserted(client_db_url, "urgent")
        assert by_kind.decoded_args == {"what": "go"}

    drv.run(main)


def test_a_new_client_opens_its_database_to_check(drv: AsyncDriver, client_db_url: str) -> None:
    async def main() -> None:
        async with insert_only(drv, client_db_url) as writer:
            await writer.insert(Task("t"))
        async with insert_only(drv, client_db_url) as fresh:  # never used before: database not open
            assert (await require_inserted(fresh, Task)).decoded_args == Task("t")

    drv.run(main)


def test_failure_messages_match_river_sync(drv: AsyncDriver, client_db_url: str) -> None:
    async def main() -> None:
        async with insert_only(drv, client_db_url) as client:
            with pytest.raises(AssertionError, match="no job of kind 'task' was found"):
                await require_inserted(client, Task)
            await client.insert_many([Task("b"), Task("b")])
            with pytest.raises(AssertionError, match=r"exactly one job 'task'.*but 2 match"):
                await require_inserted(client, Task("b"))
            with pytest.raises(AssertionError) as info:
                await require_inserted(client, Task, queue="q9", args={"name": "y"})
        message = str(info.value)
        assert message.startswith("River assertion failure: expected job 'task', queue='q9'")
        assert "none of the 2 job(s) of that kind matches" in message
        assert "queue 'default' is not 'q9'" in message and 'do not contain {"name":"y"}' in message

    drv.run(main)


def test_not_inserted(drv: AsyncDriver, client_db_url: str) -> None:
    async def main() -> None:
        async with insert_only(drv, client_db_url) as client:
            await require_not_inserted(client, Task)
            await client.insert(Task("x"), InsertOpts(queue="q1"))
            await require_not_inserted(client, Other)
            await require_not_inserted(client, Task, queue="q2")
            await require_not_inserted(client, Task("y"))
            with pytest.raises(AssertionError, match=r"expected no job 'task', but 1 were inserted:\n  id=1"):
                await require_not_inserted(client, Task)

    drv.run(main)


def test_many_in_order(drv: AsyncDriver, client_db_url: str) -> None:
    async def main() -> None:
        async with insert_only(drv, client_db_url) as client:
            third = InsertManyParams(Task("3"), InsertOpts(priority=4))
            await client.insert_many([Task("1"), Other(2), third])
            await client.insert(Urgent())
            jobs = await require_many_inserted(client, [
                ExpectedJob(Task, args={"name": "1"}), Other, ExpectedJob(Task("3"), priority=4),
            ])
            assert [j.decoded_args for j in jobs] == [Task("1"), Other(2), Task("3")]
            with pytest.raises(AssertionError, match=r"actual kinds:   \['task', 'other', 'task'\]"):
                await require_many_inserted(client, [Other, Task, Task])
            with pytest.raises(AssertionError, match=r"\[2\] id=3: priority 4 is not 1"):
                await require_many_inserted(client, [Task, Other, ExpectedJob(Task, priority=1)])
        with pytest.raises(ValidationError, match="at least one"):
            await require_many_inserted(client_db_url, [])

    drv.run(main)


def test_uncommitted_jobs_are_visible_only_through_their_transaction(
    drv: AsyncDriver, client_db_url: str
) -> None:
    async def main() -> None:
        async with insert_only(drv, client_db_url) as client:
            conn = _open_tx(client_db_url)
            try:
                await client.insert(Task("tx"), tx=conn)
                job = await require_inserted(conn, Task, args={"name": "tx"})
                assert (await require_inserted(client, Task, tx=conn)).id == job.id
                await require_many_inserted(conn, [Task])
                await require_not_inserted(client, Task)  # committed view: nothing yet
                await require_not_inserted(client_db_url, Task)
                conn.rollback()
            finally:
                conn.close()
            await require_not_inserted(client, Task)

    drv.run(main)


def test_river_trio_transaction(drv: AsyncDriver, client_db_url: str) -> None:
    async def main() -> None:
        async with insert_only(drv, client_db_url) as client:
            async with transaction(client) as tx:
                await client.insert(Other(5), tx=tx)
                assert (await require_inserted(tx, Other)).decoded_args == Other(5)
            assert (await require_inserted(client, Other)).decoded_args == Other(5)

    drv.run(main)


def test_autocommit_connections_are_read_directly(
    drv: AsyncDriver, client_db_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with insert_only(drv, client_db_url) as client:
            await client.insert(Other(3))
        conn: Any
        if client_db_url.startswith("postgres"):
            conn = psycopg.connect(client_db_url, autocommit=True)
        else:
            conn = connect_sqlite(sqlite_path(client_db_url))
        try:
            assert (await require_inserted(conn, Other)).decoded_args == Other(3)
            await require_not_inserted(conn, Task)
            assert not getattr(conn, "in_transaction", False)
        finally:
            conn.close()
        if not client_db_url.startswith("postgres"):
            assert (await require_inserted(Path(sqlite_path(client_db_url)), "other")).id == 1

    drv.run(main)
