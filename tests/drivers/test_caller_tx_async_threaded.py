"""The async client's caller transactions on blocking connections
(``river_anyio.caller_tx.executor_for_caller_tx`` with a psycopg connection, a stdlib or sqlean
SQLite connection, a SQLAlchemy session), whose statements run in worker threads, under trio
and under asyncio, on real Postgres and SQLite: our rows commit and roll back with the caller's
transaction, a cancellation leaves the caller's connection usable, and what cannot be used is
refused.

The family: test_caller_tx_sync.py (the threaded client's adapters),
test_caller_tx_async_routing.py (which way ``tx=`` goes on each loop),
test_caller_tx_asyncio_runners.py (the asyncio-native connections) and
test_caller_tx_asyncio_client.py (``tx=`` through the asyncio client).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest
import sqlalchemy as sa
import sqlean  # type: ignore[import-untyped]
from sqlalchemy import orm

from river_anyio.caller_tx import executor_for_caller_tx
from river_anyio.database import AsyncDatabase
from river_anyio.executor import connection_kind
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.errors import JobNotFoundError, ValidationError
from river_protocol.intents import GetJob, InsertJobs, Statement
from tests.drivers.async_db_support import eventually, job, nonce, running_query

Run = Callable[[Callable[[], Awaitable[Any]]], Any]  # the run fixture (tests/drivers/conftest.py)


@pytest.fixture(scope="module")
def migrated_pg(module_pg_url: str) -> str:
    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        Migrator(conn).migrate_up()
    return module_pg_url


@pytest.fixture
def migrated_sqlite(tmp_path: Path) -> str:
    path = str(tmp_path / "river.sqlite3")
    conn = connect_sqlite(path)
    Migrator(conn).migrate_up()
    conn.close()
    return path


@pytest.mark.postgres
def test_caller_tx_psycopg(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        conn = await anyio.to_thread.run_sync(lambda: psycopg.connect(migrated_pg))
        try:
            ex = await executor_for_caller_tx(conn)
            (res,) = await ex.run(InsertJobs(jobs=(job(),), nonce=nonce()))
            await anyio.to_thread.run_sync(conn.rollback)
            async with await AsyncDatabase.from_url(migrated_pg) as db:
                with pytest.raises(JobNotFoundError):
                    await db.run(GetJob(id=res.job.id))
                ex = await executor_for_caller_tx(conn)
                async with ex.transaction():  # the caller's: no BEGIN/COMMIT from us
                    (kept,) = await ex.run(InsertJobs(jobs=(job(),), nonce=nonce()))
                with pytest.raises(JobNotFoundError):
                    await db.run(GetJob(id=kept.job.id))
                await anyio.to_thread.run_sync(conn.commit)
                assert (await db.run(GetJob(id=kept.job.id))).id == kept.job.id
            conn.autocommit = True
            with pytest.raises(ValidationError, match="autocommit"):
                await executor_for_caller_tx(conn)
        finally:
            conn.close()

    run(main)


@pytest.mark.postgres
def test_caller_tx_cancel_leaves_caller_connection_usable(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        conn = await anyio.to_thread.run_sync(lambda: psycopg.connect(migrated_pg))
        try:
            pid = conn.info.backend_pid
            ex = await executor_for_caller_tx(conn)
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as nursery:
                    nursery.start_soon(ex.execute, Statement("SELECT pg_sleep(30)"))
                    await eventually(lambda: running_query(migrated_pg, pid, "pg_sleep"), "pg_sleep")
                    scope.cancel()
            # The caller's transaction is aborted; rolling it back makes the connection usable.
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
            await anyio.to_thread.run_sync(conn.rollback)
            assert await (await executor_for_caller_tx(conn)).execute(Statement("SELECT 3")) == [(3,)]
        finally:
            conn.close()

    run(main)


def test_caller_tx_sqlite_and_sqlalchemy(run: Run, migrated_sqlite: str) -> None:
    async def main() -> None:
        conn = connect_sqlite(migrated_sqlite)
        try:
            conn.execute("BEGIN")
            ex = await executor_for_caller_tx(conn)
            assert ex.dialect.name == "sqlite" and connection_kind(conn) == "sqlite"
            await ex.run(InsertJobs(jobs=(job("trio_rolled_back"),), nonce=nonce()))
            conn.rollback()
        finally:
            conn.close()
        engine = sa.create_engine("sqlite:///" + migrated_sqlite, module=sqlean,
                                  connect_args={"check_same_thread": False})
        try:
            with orm.Session(engine) as session:
                ex = await executor_for_caller_tx(session)
                (kept,) = await ex.run(InsertJobs(jobs=(job(),), nonce=nonce()))
                session.commit()
        finally:
            engine.dispose()
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            async with db.executor() as ex:
                rows = await ex.execute(
                    Statement("SELECT count(*) FROM river_job WHERE kind = 'trio_rolled_back'"))
            assert rows == [(0,)]
            assert (await db.run(GetJob(id=kept.job.id))).id == kept.job.id

        same_thread = sqlean.connect(migrated_sqlite)  # check_same_thread defaults to True
        try:
            same_thread.execute("BEGIN")
            with pytest.raises(ValidationError, match="check_same_thread"):
                await executor_for_caller_tx(same_thread)
        finally:
            same_thread.close()

    run(main)


def test_caller_tx_refuses_unknown_objects(run: Run) -> None:
    # The asyncio-only kinds: tests/drivers/test_caller_tx_async_routing.py.
    async def main() -> None:
        with pytest.raises(ValidationError, match="cannot run inside"):
            await executor_for_caller_tx(object())

    run(main)
