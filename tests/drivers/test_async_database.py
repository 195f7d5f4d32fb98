"""The async I/O layer (AsyncDatabase, AsyncExecutor) on real Postgres and SQLite,
under trio and under asyncio (``river_anyio``, which ``river_trio`` and ``river_asyncio`` share).

Tests are plain functions calling ``run(main)`` (``anyio.run`` on each backend). Waiting for the
server to reach a state (a statement visibly running) polls with short sleeps; no result
depends on how long anything takes, except the scheduling-gap bound, which is
the property under test.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest
import sniffio
import sqlalchemy as sa
import sqlean  # type: ignore[import-untyped]
from psycopg_pool import ConnectionPool

from river_anyio.database import AsyncDatabase
from river_anyio.executor import AsyncExecutor, ThreadRunner
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.base import Plan
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import DatabaseUnavailableError, JobNotFoundError, RiverError, ValidationError
from river_protocol.intents import (
    GetJob,
    GetQueue,
    InsertJobs,
    Intent,
    ListQueues,
    Statement,
    UpsertQueue,
)
from tests.drivers.async_db_support import admin_rows, eventually, job, nonce, running_query
from tests.drivers.tcp_proxy import TcpProxy

Run = Callable[[Callable[[], Awaitable[Any]]], Any]  # the run fixture (tests/drivers/conftest.py)
LONG_SQLITE = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
)

# ---------------------------------------------------------------- test intents


@dataclass(frozen=True)
class MarkThenWait(Intent):
    """Insert a mark, then run a statement that never ends on its own (cancel it)."""

    value: str
    transactional = True


def _ph(dialect: Any) -> str:
    return "%s" if dialect.paramstyle == "format" else "?"


def plan_mark_then_wait(dialect: Any, intent: MarkThenWait) -> Plan[None]:
    yield Statement(f"INSERT INTO trio_marks (v) VALUES ({_ph(dialect)})", (intent.value,), fetch=False)
    if dialect.name == "postgres":
        yield Statement("SELECT pg_sleep(30)")
    else:
        yield Statement(LONG_SQLITE)


PostgresDialect.planners()[MarkThenWait] = plan_mark_then_wait
SQLiteDialect.planners()[MarkThenWait] = plan_mark_then_wait


@dataclass(frozen=True)
class SlowStatement(Intent):
    """A statement that keeps its connection busy for a good fraction of a second."""


def plan_slow_statement(dialect: Any, intent: SlowStatement) -> Plan[None]:
    if dialect.name == "postgres":
        yield Statement("SELECT pg_sleep(0.4)")
    else:
        yield Statement(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 4000000)"
            " SELECT count(*) FROM c"
        )


PostgresDialect.planners()[SlowStatement] = plan_slow_statement
SQLiteDialect.planners()[SlowStatement] = plan_slow_statement

MARKS = "CREATE TABLE IF NOT EXISTS trio_marks (v text NOT NULL)"


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def migrated_pg(module_pg_url: str) -> str:
    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        Migrator(conn).migrate_up()
        conn.execute(MARKS)
    return module_pg_url


@pytest.fixture
def migrated_sqlite(tmp_path: Path) -> str:
    path = str(tmp_path / "river.sqlite3")
    conn = connect_sqlite(path)
    Migrator(conn).migrate_up()
    conn.execute(MARKS)
    conn.close()
    return path


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def open_db(request: pytest.FixtureRequest) -> Callable[..., Awaitable[AsyncDatabase]]:
    """An async factory for a handle on a migrated database of either kind."""
    if request.param == "postgres":
        url = request.getfixturevalue("migrated_pg")

        async def open_pg(**kw: Any) -> AsyncDatabase:
            return await AsyncDatabase.from_url(url, **kw)

        return open_pg
    path = request.getfixturevalue("migrated_sqlite")

    async def open_sqlite(**kw: Any) -> AsyncDatabase:
        if "pool_size" in kw:
            kw["readers"] = kw.pop("pool_size")
        return await AsyncDatabase.from_sqlite_path(path, **kw)

    return open_sqlite


async def count_marks(db: AsyncDatabase, value: str) -> int:
    async with db.executor() as ex:
        rows = await ex.execute(Statement(f"SELECT count(*) FROM trio_marks WHERE v = {_ph(db.dialect)}",
                                          (value,)))
    return int(rows[0][0])


async def backend_state(url: str, pid: int) -> str | None:
    rows = await anyio.to_thread.run_sync(
        admin_rows, url, "SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,))
    return rows[0][0] if rows else None


# ---------------------------------------------------------------- intents on both databases


def test_run_intents(run: Run, open_db: Callable[..., Awaitable[AsyncDatabase]]) -> None:
    async def main() -> None:
        async with await open_db() as db:
            (res,) = await db.run(InsertJobs(jobs=(job(),), nonce=nonce()))
            assert not res.unique_skipped_as_duplicate
            got = await db.run(GetJob(id=res.job.id), readonly=True)
            assert got.kind == "trio_k" and got.id == res.job.id
            with pytest.raises(JobNotFoundError):
                await db.run(GetJob(id=10**12))
            name = "q_" + uuid.uuid4().hex[:8]
            await db.run(UpsertQueue(name=name))
            assert (await db.run(GetQueue(name=name))).name == name
            async with db.executor(readonly=True) as ex:
                names = [q.name for q in await ex.run(ListQueues(limit=1000))]
            assert name in names

    run(main)


def test_transaction_commits_and_rolls_back(
    run: Run, open_db: Callable[..., Awaitable[AsyncDatabase]]
) -> None:
    async def main() -> None:
        async with await open_db() as db:
            async with db.transaction() as ex:
                (kept,) = await ex.run(InsertJobs(jobs=(job(),), nonce=nonce()))
                async with ex.transaction() as inner:  # nested: same transaction
                    assert inner is ex
            with pytest.raises(RuntimeError):
                async with db.transaction() as ex:
                    (lost,) = await ex.run(InsertJobs(jobs=(job(),), nonce=nonce()))
                    raise RuntimeError("boom")
            assert (await db.run(GetJob(id=kept.job.id))).id == kept.job.id
            with pytest.raises(JobNotFoundError):
                await db.run(GetJob(id=lost.job.id))

    run(main)


def test_already_cancelled_runs_nothing(run: Run, open_db: Callable[..., Awaitable[AsyncDatabase]]) -> None:
    async def main() -> None:
        async with await open_db() as db:
            value = uuid.uuid4().hex
            with anyio.CancelScope() as scope:
                scope.cancel()
                await db.run(MarkThenWait(value))
            assert scope.cancelled_caught
            assert await count_marks(db, value) == 0

    run(main)


def test_loop_never_blocked(run: Run, open_db: Callable[..., Awaitable[AsyncDatabase]]) -> None:
    """A ticking task keeps being scheduled while 10 tasks run 500 intents between them and
    others run statements that each hold a connection far longer than the allowed gap.

    The bound is generous (other processes share these two cores); what it catches is a
    statement run on the loop, which would stall the ticker for the statement's whole length.
    """

    async def main() -> None:
        async with await open_db(pool_size=4) as db:
            gaps: list[float] = []
            slow: list[float] = []
            done = anyio.Event()

            async def tick() -> None:
                last = anyio.current_time()
                while not done.is_set():
                    await anyio.sleep(0.001)
                    now = anyio.current_time()
                    gaps.append(now - last)
                    last = now

            async def worker(n: int) -> None:
                for i in range(50):
                    if i % 2:
                        await db.run(InsertJobs(jobs=(job(f"tick{n}"),), nonce=nonce()))
                    else:
                        await db.run(ListQueues(limit=10), readonly=True)

            async def sleeper() -> None:
                for _ in range(3):
                    started = anyio.current_time()
                    await db.run(SlowStatement(), readonly=True)
                    slow.append(anyio.current_time() - started)

            async with anyio.create_task_group() as nursery:
                nursery.start_soon(tick)
                async with anyio.create_task_group() as workers:
                    for n in range(10):
                        workers.start_soon(worker, n)
                    workers.start_soon(sleeper)
                done.set()
            assert len(gaps) > 10
            assert min(slow) > 0.25, f"slow statements too fast to prove anything: {slow}"
            assert max(gaps) < 0.2, f"trio loop blocked for {max(gaps) * 1000:.1f} ms"

    run(main)


def test_one_task_per_executor(run: Run, open_db: Callable[..., Awaitable[AsyncDatabase]]) -> None:
    async def main() -> None:
        async with await open_db() as db, db.executor() as ex:
            with pytest.raises(BaseExceptionGroup) as info:
                async with anyio.create_task_group() as nursery:
                    for _ in range(2):
                        nursery.start_soon(ex.execute, Statement("SELECT 1"))
            assert info.group_contains(anyio.BusyResourceError)
            if sniffio.current_async_library() == "trio":  # trio's own error too, as before AnyIO
                import trio

                assert info.group_contains(trio.BusyResourceError)
            assert await ex.execute(Statement("SELECT 2")) == [(2,)]

    run(main)


def test_limiter_sized_to_pool(run: Run, open_db: Callable[..., Awaitable[AsyncDatabase]]) -> None:
    async def main() -> None:
        async with await open_db(pool_size=3) as db:
            # SQLite: 3 readers plus the writer.
            assert db.limiter.total_tokens == (3 if db.dialect.name == "postgres" else 4)
            async with db.executor(readonly=True), db.executor():
                assert db.limiter.borrowed_tokens == 2
            assert db.limiter.borrowed_tokens == 0

    run(main)


def test_sqlite_readers_never_outnumber_the_readers_setting(run: Run, migrated_sqlite: str) -> None:
    # readers=1: one reader connection at most (the limiter's other token is the writer's); a
    # second reader waits for it (here until the handle's timeout), and the writer never waits.
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite, readers=1, timeout=0.2) as db, \
                db.executor(readonly=True) as reader:
            with pytest.raises(TimeoutError, match="reader"):
                async with db.executor(readonly=True):
                    pass
            (res,) = await db.run(InsertJobs(jobs=(job(),), nonce=nonce()))
            assert await reader.run(GetJob(id=res.job.id)) is not None

    run(main)


def test_closed_handle_refuses(run: Run, open_db: Callable[..., Awaitable[AsyncDatabase]]) -> None:
    async def main() -> None:
        db = await open_db()
        await db.aclose()
        assert db.closed
        with pytest.raises(RiverError):
            await db.run(ListQueues())

    run(main)


# ---------------------------------------------------------------- cancellation: Postgres


@pytest.mark.postgres
def test_pg_cancel_is_server_side_and_connection_reused(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, pool_size=1) as db:
            async with db.executor() as ex:
                pid = (await ex.execute(Statement("SELECT pg_backend_pid()")))[0][0]
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as nursery:
                    async def sleeper() -> None:
                        async with db.executor() as ex:
                            await ex.execute(Statement("SELECT pg_sleep(30)"))

                    nursery.start_soon(sleeper)
                    await eventually(lambda: running_query(migrated_pg, pid, "pg_sleep"), "pg_sleep to run")
                    scope.cancel()
            assert scope.cancelled_caught
            # Cancelled on the server: the backend is idle before anything else used it.
            assert await backend_state(migrated_pg, pid) == "idle"
            async with db.executor() as ex:
                assert (await ex.execute(Statement("SELECT pg_backend_pid()")))[0][0] == pid
                assert await ex.execute(Statement("SELECT 7")) == [(7,)]

    run(main)


@pytest.mark.postgres
def test_pg_cancel_rolls_back_transactions(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, pool_size=1) as db:
            async with db.executor() as ex:
                pid = (await ex.execute(Statement("SELECT pg_backend_pid()")))[0][0]
            explicit, planned = uuid.uuid4().hex, uuid.uuid4().hex

            async def in_explicit_tx() -> None:
                async with db.transaction() as ex:
                    await ex.execute(Statement("INSERT INTO trio_marks (v) VALUES (%s)", (explicit,),
                                               fetch=False))
                    await ex.execute(Statement("SELECT pg_sleep(30)"))

            async def in_intent_tx() -> None:
                await db.run(MarkThenWait(planned))

            for body in (in_explicit_tx, in_intent_tx):
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as nursery:
                        nursery.start_soon(body)
                        await eventually(lambda: running_query(migrated_pg, pid, "pg_sleep"), "pg_sleep")
                        scope.cancel()
                assert await backend_state(migrated_pg, pid) == "idle"
            assert await count_marks(db, explicit) == 0
            assert await count_marks(db, planned) == 0
            async with db.executor() as ex:
                assert (await ex.execute(Statement("SELECT pg_backend_pid()")))[0][0] == pid

    run(main)


@pytest.mark.postgres
def test_pg_dead_idle_connections_are_replaced_and_an_outage_is_typed(run: Run, migrated_pg: str) -> None:
    proxy, url = TcpProxy.in_front_of(migrated_pg)

    async def main() -> None:
        async with await AsyncDatabase.from_url(url, pool_size=2) as db:
            async with db.executor() as a, db.executor() as b:
                old = {(await a.execute(Statement("SELECT pg_backend_pid()")))[0][0],
                       (await b.execute(Statement("SELECT pg_backend_pid()")))[0][0]}
            proxy.cut()  # both pooled connections now idle and dead; new ones refused
            with pytest.raises(DatabaseUnavailableError, match="unavailable") as caught:
                async with db.executor():
                    pass
            assert isinstance(caught.value.__cause__, psycopg.OperationalError)
            proxy.restore()
            async with db.executor() as ex:  # not a dead one from before: the first use works
                assert (await ex.execute(Statement("SELECT pg_backend_pid()")))[0][0] not in old

    try:
        run(main)
    finally:
        proxy.close()


@pytest.mark.postgres
def test_pg_terminated_idle_connection_is_replaced(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, pool_size=1) as db:
            async with db.executor() as ex:
                pid = (await ex.execute(Statement("SELECT pg_backend_pid()")))[0][0]
            await anyio.to_thread.run_sync(admin_rows, migrated_pg, "SELECT pg_terminate_backend(%s)", (pid,))
            await eventually(lambda: _gone(migrated_pg, pid), "the backend to exit")
            async with db.executor() as ex:
                new_pid = (await ex.execute(Statement("SELECT pg_backend_pid()")))[0][0]
            assert new_pid != pid

    run(main)


async def _gone(url: str, pid: int) -> bool:
    return await backend_state(url, pid) is None


@pytest.mark.postgres
def test_pg_failed_statement_keeps_connection(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, pool_size=1) as db:
            with pytest.raises(psycopg.errors.DivisionByZero):
                async with db.transaction() as ex:
                    await ex.execute(Statement("SELECT 1 / 0"))
            async with db.executor() as ex:
                assert await ex.execute(Statement("SELECT 1")) == [(1,)]
                assert not ex.broken

    run(main)


@pytest.mark.postgres
def test_pg_acquire_timeout_and_bad_urls(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, pool_size=1, timeout=0.05) as db:
            async with db.executor():
                with pytest.raises(TimeoutError):
                    async with db.executor():
                        pass
            with pytest.raises(ValidationError):
                await AsyncDatabase.from_url(migrated_pg, pool_size=0)
        with pytest.raises(ValidationError):
            await AsyncDatabase.from_url("mysql://x/y")
        with pytest.raises(DatabaseUnavailableError) as caught:
            await AsyncDatabase.from_url("postgresql://postgres@127.0.0.1:1/none", connect_timeout=1)
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)

    run(main)


@pytest.mark.postgres
def test_pg_connect_dedicated_and_configure(run: Run, migrated_pg: str) -> None:
    seen: list[int] = []

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET application_name = 'river-trio-test'")
        seen.append(conn.info.backend_pid)

    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, configure=configure) as db:
            async with db.executor() as ex:
                assert await ex.execute(Statement("SHOW application_name")) == [("river-trio-test",)]
                assert await ex.execute(Statement("SHOW TimeZone")) == [("UTC",)]  # set before configure
            conn = await db.connect_dedicated()
            try:
                assert conn.autocommit and conn.info.backend_pid not in seen
            finally:
                conn.close()

    run(main)


# ---------------------------------------------------------------- cancellation: SQLite


def test_sqlite_interrupt_and_writer_reused(run: Run, migrated_sqlite: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            for readonly in (True, False):
                with anyio.move_on_after(0.2) as scope:
                    async with db.executor(readonly=readonly) as ex:
                        await ex.execute(Statement(LONG_SQLITE))
                assert scope.cancelled_caught
            value = uuid.uuid4().hex
            with anyio.move_on_after(0.2) as scope:
                await db.run(MarkThenWait(value))
            assert scope.cancelled_caught
            with anyio.move_on_after(0.2) as scope:
                async with db.transaction() as ex:
                    await ex.execute(Statement("INSERT INTO trio_marks (v) VALUES (?)", (value,),
                                               fetch=False))
                    await ex.execute(Statement(LONG_SQLITE))
            assert scope.cancelled_caught
            assert await count_marks(db, value) == 0
            async with db.executor() as ex:
                assert not ex.conn.in_transaction
                await ex.execute(Statement("INSERT INTO trio_marks (v) VALUES (?)", (value,), fetch=False))
            assert await count_marks(db, value) == 1

    run(main)


def test_sqlite_nested_writer_refused_and_memory(run: Run, migrated_sqlite: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db, db.executor():
            with pytest.raises(RiverError, match="single writer"):
                async with db.executor():
                    pass
        async with await AsyncDatabase.from_url("sqlite://:memory:") as mem:
            assert mem.limiter.total_tokens == 1
            async with mem.executor(readonly=True) as ex:
                assert await ex.execute(Statement("SELECT 1")) == [(1,)]
            with pytest.raises(ValidationError):
                await mem.connect_dedicated()

    run(main)


def test_sqlalchemy_sqlite_nested_writer_in_one_task_is_refused(run: Run, migrated_sqlite: str) -> None:
    # As from a path: refused at once, not waited for until the timeout (this task would wait for
    # itself); the outer writer goes on, and writers work again once it is given back.
    engine = sa.create_engine("sqlite:///" + migrated_sqlite, module=sqlean,
                              connect_args={"check_same_thread": False})

    async def main() -> None:
        async with AsyncDatabase.from_sqlalchemy_engine(engine, timeout=30) as db:
            async with db.executor() as outer:
                with pytest.raises(RiverError, match="single writer"):
                    async with db.executor():
                        pass
                await outer.execute(Statement("INSERT INTO trio_marks (v) VALUES ('n')", fetch=False))
            assert await count_marks(db, "n") == 1

    try:
        run(main)
    finally:
        engine.dispose()


# ---------------------------------------------------------------- other sources


@pytest.mark.postgres
def test_from_pool_restores_mode(run: Run, migrated_pg: str) -> None:
    pool: ConnectionPool[Any] = ConnectionPool(migrated_pg, min_size=1, max_size=2, open=True)

    async def main() -> None:
        db = AsyncDatabase.from_pool(pool)
        assert db.limiter.total_tokens == 2
        (res,) = await db.run(InsertJobs(jobs=(job(),), nonce=nonce()))
        assert (await db.run(GetJob(id=res.job.id))).id == res.job.id
        conn = await db.connect_dedicated()
        conn.close()
        await db.aclose()

    try:
        run(main)
        with pool.connection() as conn:
            assert conn.autocommit is False
    finally:
        pool.close()


@pytest.mark.postgres
def test_from_sqlalchemy_engine_timeout_bounds_the_wait_for_a_connection(run: Run, migrated_pg: str) -> None:
    engine = sa.create_engine(migrated_pg.replace("postgresql://", "postgresql+psycopg://"),
                              pool_size=1, max_overflow=0)

    async def main() -> None:
        db = AsyncDatabase.from_sqlalchemy_engine(engine, timeout=0.2)
        async with db.executor():
            with pytest.raises(TimeoutError, match="a connection from the SQLAlchemy engine"):
                async with db.executor():
                    pass
        async with db.executor() as ex:
            assert await ex.execute(Statement("SELECT 1")) == [(1,)]

    try:
        run(main)
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def test_from_sqlalchemy_engine(run: Run, kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "postgres":
        url = request.getfixturevalue("migrated_pg").replace("postgresql://", "postgresql+psycopg://")
        engine = sa.create_engine(url, pool_size=2)
    else:
        engine = sa.create_engine("sqlite:///" + request.getfixturevalue("migrated_sqlite"), module=sqlean,
                                  connect_args={"check_same_thread": False})

    async def main() -> None:
        db = AsyncDatabase.from_sqlalchemy_engine(engine)
        (res,) = await db.run(InsertJobs(jobs=(job(),), nonce=nonce()))
        assert (await db.run(GetJob(id=res.job.id))).id == res.job.id
        with pytest.raises(RuntimeError):
            async with db.transaction() as ex:
                (lost,) = await ex.run(InsertJobs(jobs=(job(),), nonce=nonce()))
                raise RuntimeError
        with pytest.raises(JobNotFoundError):
            await db.run(GetJob(id=lost.job.id))
        if kind == "postgres":
            (await db.connect_dedicated()).close()
        else:
            with pytest.raises(ValidationError):
                await db.connect_dedicated()
        await db.aclose()

    try:
        run(main)
    finally:
        engine.dispose()


# ---------------------------------------------------------------- executor directly


def test_executor_on_a_bare_connection(run: Run, tmp_path: Path) -> None:
    conn = connect_sqlite(str(tmp_path / "bare.sqlite3"))

    async def main() -> None:
        ex = AsyncExecutor(conn, SQLiteDialect())
        assert isinstance(ex.runner, ThreadRunner)
        await ex.execute(Statement("CREATE TABLE t (x integer)", fetch=False))
        async with ex.transaction():
            await ex.execute(Statement("INSERT INTO t VALUES (1)", fetch=False))
        with pytest.raises(ZeroDivisionError):
            async with ex.transaction():
                await ex.execute(Statement("INSERT INTO t VALUES (2)", fetch=False))
                raise ZeroDivisionError
        assert await ex.execute(Statement("SELECT x FROM t")) == [(1,)]
        assert not conn.in_transaction

    try:
        run(main)
    finally:
        conn.close()


