"""river_asyncio.testing with asyncio-native transactions (psycopg ``AsyncConnection``, SQLAlchemy
``AsyncSession`` on psycopg and asyncpg, a bare asyncpg ``Connection``), on real Postgres under
anyio's pytest plugin (asyncio backend).

``work_with_client(tx=...)``, ``require_inserted(..., tx=...)`` and ``InlineClient.insert(tx=...)``
go through the adapter the client's own ``insert(tx=...)`` uses: what they insert, claim and record
is visible through the transaction and nowhere else until it commits, and a rollback takes it all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import psycopg
import pytest

from river_asyncio import Client, JobState, WorkContext, Workers
from river_asyncio.testing import (
    inline_client,
    require_inserted,
    require_many_inserted,
    require_not_inserted,
    work_with_client,
)
from tests.testing_helpers import Other, Task, migrated_pg_fixture  # noqa: F401  (fixture)

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

OpenTx = Callable[[], AbstractAsyncContextManager[Any]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def pg_url(_migrated_pg: str) -> str:
    with psycopg.connect(_migrated_pg, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_queue, river_leader RESTART IDENTITY")
    return _migrated_pg


def _sqlalchemy_url(url: str, driver: str) -> str:
    return url.replace("postgresql://", f"postgresql+{driver}://", 1)


@pytest.fixture(params=["psycopg AsyncConnection", "AsyncSession on psycopg", "AsyncSession on asyncpg",
                        "asyncpg Connection"])
def open_tx(request: pytest.FixtureRequest, pg_url: str) -> OpenTx:
    """Opens one uncommitted transaction of the kind, rolled back when the block ends."""
    kind: str = request.param

    @asynccontextmanager
    async def psycopg_tx() -> AsyncIterator[Any]:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            yield conn
            await conn.rollback()

    @asynccontextmanager
    async def session_tx() -> AsyncIterator[Any]:
        from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

        engine = create_async_engine(_sqlalchemy_url(pg_url, kind.rsplit(" ", 1)[1]))
        try:
            async with AsyncSession(engine) as session:
                yield session
                await session.rollback()
        finally:
            await engine.dispose()

    @asynccontextmanager
    async def asyncpg_tx() -> AsyncIterator[Any]:
        import asyncpg

        conn = await asyncpg.connect(pg_url)
        try:
            tx = conn.transaction()
            await tx.start()
            yield conn
            await tx.rollback()
        finally:
            await conn.close()

    if kind == "psycopg AsyncConnection":
        return psycopg_tx
    if kind == "asyncpg Connection":
        return asyncpg_tx
    return session_tx


def _client(url: str) -> Client:
    workers = Workers()

    async def shout(ctx: WorkContext, args: Task) -> None:
        ctx.record_output(args.name.upper())

    workers.job(Task)(shout)
    workers.job(Other)(lambda args: None)
    return Client(url, workers=workers)


async def test_require_inserted_sees_the_uncommitted_insert_through_the_tx_only(
    pg_url: str, open_tx: OpenTx
) -> None:
    async with _client(pg_url) as client, open_tx() as tx:
        inserted = (await client.insert(Task("a"), tx=tx)).job
        assert (await require_inserted(tx, Task, state=JobState.AVAILABLE)).id == inserted.id
        assert (await require_inserted(client, Task, tx=tx, args={"name": "a"})).id == inserted.id
        assert [j.id for j in await require_many_inserted(tx, [Task])] == [inserted.id]
        await require_not_inserted(client, Task)  # not committed: invisible outside
        await require_not_inserted(pg_url, Task)
        await require_not_inserted(tx, Other)
        with pytest.raises(AssertionError):
            await require_not_inserted(tx, Task)
    await require_not_inserted(pg_url, Task)  # rolled back with the caller's transaction


async def test_work_with_client_inserts_claims_and_records_in_the_tx(pg_url: str, open_tx: OpenTx) -> None:
    async with _client(pg_url) as client:
        async with open_tx() as tx:
            ahead = (await client.insert(Other(1), tx=tx)).job  # first in the queue: left alone
            result = await work_with_client(client, Task("b"), tx=tx)
            assert result.state is JobState.COMPLETED and result.output == "B"
            assert result.job.attempt == 1 and result.job.attempted_by == (client.client_id,)
            done = await require_inserted(tx, Task, state=JobState.COMPLETED)
            assert done.id == result.job.id
            await require_inserted(tx, Other, state=JobState.AVAILABLE)
            assert done.id != ahead.id
            await require_not_inserted(client, Task)  # outside: nothing yet
            inline = await inline_client(client).insert(Task("c"), tx=tx)
            assert inline.job.state is JobState.COMPLETED and inline.job.metadata["output"] == "C"
            await require_not_inserted(pg_url, Task)
        await require_not_inserted(client, Task)  # the rollback took the jobs and their outcomes
        await require_not_inserted(client, Other)


async def test_work_with_client_in_a_committed_psycopg_async_tx_is_visible_after_commit(pg_url: str) -> None:
    async with _client(pg_url) as client, await psycopg.AsyncConnection.connect(pg_url) as conn:
        async with conn.transaction():
            result = await work_with_client(client, Task("d"), tx=conn)
            await require_not_inserted(client, Task)
        assert (await require_inserted(client, Task, state=JobState.COMPLETED)).id == result.job.id


async def test_an_autocommit_psycopg_async_connection_outside_a_transaction_is_refused_clearly(
    pg_url: str,
) -> None:
    from river_protocol.errors import ValidationError

    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(ValidationError, match="autocommit mode outside a transaction"):
            await require_not_inserted(conn, Task)
        async with conn.transaction():  # inside one it is read in it
            await require_not_inserted(conn, Task)
