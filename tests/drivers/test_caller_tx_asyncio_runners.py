"""asyncio-native caller transactions (``river_anyio.caller_tx``) on real Postgres.

Every kind of ``tx=`` an asyncio app holds (psycopg's AsyncConnection, SQLAlchemy's
AsyncConnection and AsyncSession on psycopg and on asyncpg, a bare asyncpg connection
and a pool's) runs the Postgres dialect's real intents through the executor the
client uses; the jobs live and die with the caller's transaction and its savepoints,
and read back exactly as the sync psycopg path reads them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import asyncpg
import psycopg
import pytest
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, create_async_engine

from river_anyio.caller_tx import (
    AsyncpgRunner,
    PsycopgAsyncRunner,
    _split_table,
    asyncpg_sql,
    native_runner_for,
    numbered_placeholders,
)
from river_anyio.executor import AsyncExecutor
from river_db.executor import Executor, execute_step
from river_protocol.admin import (
    cancel_intent,
    decode_job_cursor,
    encode_job_cursor,
    list_jobs_intent,
    list_queues_intent,
    pause_intents,
    update_output_intent,
    update_queue_intents,
)
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.postgres.fragments import JOB_COLUMNS
from river_protocol.errors import ValidationError
from river_protocol.intents import (
    ClaimJobs,
    CountJobs,
    DeleteJob,
    GetJob,
    GetJobs,
    GetQueue,
    InsertJobs,
    InsertJobsFast,
    InsertParams,
    ListJobs,
    ListQueues,
    Notify,
    PauseQueue,
    ResumeQueue,
    RetryJob,
    SetStateIfRunning,
    SetStateUpdate,
    Statement,
    UpsertQueue,
)
from river_protocol.job import JobRow, encode_attempt_error
from river_protocol.machines.notifications import TOPIC_CONTROL
from river_protocol.states import JobState
from tests.drivers.test_client_support import migrated_pg_fixture  # noqa: F401 - the _migrated_pg fixture

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

T0 = datetime(2031, 3, 4, 12, 0, 0, 250000, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(name="url")
def url_fixture(_migrated_pg: str) -> str:
    with psycopg.connect(_migrated_pg, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_queue RESTART IDENTITY")
    return _migrated_pg


# ---------------------------------------------------------------- the kinds of caller


class Caller:
    """One kind of asyncio caller's connection: ``begin()`` opens a transaction and returns the
    object passed as ``tx=``; ``savepoint()`` is the kind's nested transaction, rolled back when
    its block raises."""

    async def begin(self) -> Any:
        raise NotImplementedError

    async def commit(self) -> None:
        raise NotImplementedError

    async def rollback(self) -> None:
        raise NotImplementedError

    def savepoint(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError


class PsycopgCaller(Caller):
    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self._tx: Any = None

    async def begin(self) -> Any:
        if self.conn.autocommit:
            self._tx = self.conn.transaction()
            await self._tx.__aenter__()
        return self.conn

    async def commit(self) -> None:
        if self.conn.autocommit:
            await self._tx.__aexit__(None, None, None)
        else:
            await self.conn.commit()

    async def rollback(self) -> None:
        if self.conn.autocommit:
            await self._tx.__aexit__(psycopg.Rollback, psycopg.Rollback(), None)
        else:
            await self.conn.rollback()

    def savepoint(self) -> AbstractAsyncContextManager[Any]:
        return self.conn.transaction()


class SQLAlchemyCaller(Caller):
    def __init__(self, target: AsyncConnection | AsyncSession) -> None:
        self.target = target

    async def begin(self) -> Any:
        return self.target  # the runner autobegins, as SQLAlchemy's first execute would

    async def commit(self) -> None:
        await self.target.commit()

    async def rollback(self) -> None:
        await self.target.rollback()

    def savepoint(self) -> AbstractAsyncContextManager[Any]:
        return self.target.begin_nested()


class AsyncpgCaller(Caller):
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._tx: Any = None

    async def begin(self) -> Any:
        self._tx = self.conn.transaction()
        await self._tx.start()
        return self.conn

    async def commit(self) -> None:
        await self._tx.commit()

    async def rollback(self) -> None:
        await self._tx.rollback()

    def savepoint(self) -> AbstractAsyncContextManager[Any]:
        return self.conn.transaction()  # nested inside an open one: a savepoint


KINDS = [
    "psycopg", "psycopg-autocommit", "psycopg-client-cursor",
    "sqlalchemy-conn-psycopg", "sqlalchemy-session-psycopg",
    "sqlalchemy-conn-asyncpg", "sqlalchemy-session-asyncpg", "asyncpg", "asyncpg-pool",
]


def _sqlalchemy_url(url: str, driver: str) -> str:
    return url.replace("postgresql://", f"postgresql+{driver}://", 1)


@asynccontextmanager
async def open_caller(kind: str, url: str) -> AsyncIterator[Caller]:
    if kind.startswith("psycopg"):
        # Client-side binding cursors cannot return binary results; the runner asks for text then.
        factory = psycopg.AsyncClientCursor if kind == "psycopg-client-cursor" else psycopg.AsyncCursor
        conn = await psycopg.AsyncConnection.connect(
            url, autocommit=kind == "psycopg-autocommit", cursor_factory=factory
        )
        async with conn:
            yield PsycopgCaller(conn)
    elif kind.startswith("sqlalchemy"):
        engine = create_async_engine(_sqlalchemy_url(url, kind.rsplit("-", 1)[1]))
        try:
            if "-session-" in kind:
                async with AsyncSession(engine) as session:
                    yield SQLAlchemyCaller(session)
            else:
                async with engine.connect() as sa_conn:
                    yield SQLAlchemyCaller(sa_conn)
        finally:
            await engine.dispose()
    elif kind == "asyncpg":
        conn = await asyncpg.connect(url)
        try:
            yield AsyncpgCaller(conn)
        finally:
            await conn.close()
    else:
        async with asyncpg.create_pool(url, min_size=1, max_size=1) as pool, pool.acquire() as proxy:
            yield AsyncpgCaller(proxy)


async def executor_for(tx: Any) -> AsyncExecutor:
    """What the client builds for ``tx=``."""
    found = await native_runner_for(tx, schema=None, expect="postgres")
    assert found is not None
    runner, dialect = found
    assert isinstance(dialect, PostgresDialect)
    return AsyncExecutor(getattr(runner, "conn", None), dialect, in_caller_tx=True, runner=runner)


# ---------------------------------------------------------------- helpers


def job(kind: str = "k", **kw: Any) -> InsertParams:
    return InsertParams(kind=kind, encoded_args=kw.pop("args", b'{"n":1}'), **kw)


def rich_job(n: int) -> InsertParams:
    return job(
        "rich", args=f'{{"n":{n},"s":"é \\" x","nested":{{"a":[1,2.5,null]}}}}'.encode(),
        queue="q1", priority=2, max_attempts=7, metadata=b'{"m":{"x":[1,"y"]}}', tags=("red", "blue"),
        scheduled_at=T0, created_at=T0 - timedelta(minutes=1), unique_key=bytes([n]) + bytes(range(31)),
        unique_states=0b11110101,
    )


async def insert(ex: AsyncExecutor, *jobs: InsertParams) -> list[JobRow]:
    results = await ex.run(InsertJobs(jobs=jobs, nonce=uuid.uuid4().hex[:16]))
    return [r.job for r in results]


def sync_executor(url: str) -> Executor:
    return Executor(psycopg.connect(url, autocommit=True), PostgresDialect())


def sync_kinds(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT kind FROM river_job ORDER BY id")]


def sleep_plan(seconds: float) -> Any:
    yield Statement("SELECT pg_sleep(%s::float8)", (seconds,))
    return None


# ---------------------------------------------------------------- transactions


@pytest.mark.parametrize("kind", KINDS)
async def test_commit_keeps_the_jobs_and_rollback_drops_them(kind: str, url: str) -> None:
    async with open_caller(kind, url) as caller:
        ex = await executor_for(await caller.begin())
        await insert(ex, job("committed"))
        assert await ex.run(InsertJobsFast(jobs=(job("committed-copy", tags=("t",)),))) == 1
        assert sync_kinds(url) == []  # not visible before the caller commits
        await caller.commit()
        assert sync_kinds(url) == ["committed", "committed-copy"]

        ex = await executor_for(await caller.begin())
        await insert(ex, job("rolled-back"))
        await ex.run(InsertJobsFast(jobs=(job("rolled-back-copy"),)))
        await caller.rollback()
        assert sync_kinds(url) == ["committed", "committed-copy"]


class _Undo(Exception):
    pass


@pytest.mark.parametrize("kind", KINDS)
async def test_a_savepoint_rollback_takes_its_job_and_the_outer_commit_keeps_the_rest(
    kind: str, url: str
) -> None:
    async with open_caller(kind, url) as caller:
        tx = await caller.begin()
        await insert(await executor_for(tx), job("before"))
        with pytest.raises(_Undo):
            async with caller.savepoint():
                await insert(await executor_for(tx), job("in-savepoint"))
                raise _Undo
        async with caller.savepoint():
            await insert(await executor_for(tx), job("in-kept-savepoint"))
        await insert(await executor_for(tx), job("after"))
        await caller.commit()
    assert sync_kinds(url) == ["before", "in-kept-savepoint", "after"]


# ---------------------------------------------------------------- what comes back


@pytest.mark.parametrize("kind", KINDS)
async def test_rows_read_back_equal_the_sync_psycopg_path(kind: str, url: str) -> None:
    async with open_caller(kind, url) as caller:
        ex = await executor_for(await caller.begin())
        inserted = await insert(ex, rich_job(1), job("plain"))
        await ex.run(InsertJobsFast(jobs=(rich_job(2), job("plain-copy"))))
        # A claim and a retry give the rich job attempted_at/by and an error.
        claimed = await ex.run(ClaimJobs(queue="q1", limit=5, client_id="client-1", now=T0))
        assert [j.kind for j in claimed] == ["rich", "rich"]
        error = encode_attempt_error(T0, 1, 'boom "quoted" ü')
        retry_at = T0 + timedelta(seconds=5)
        await ex.run(SetStateIfRunning(updates=tuple(
            SetStateUpdate(id=j.id, state=JobState.RETRYABLE, error=error, scheduled_at=retry_at)
            for j in claimed
        )))
        select = Statement(f"SELECT {JOB_COLUMNS} FROM river_job ORDER BY id", binary=True)
        raw_async = await ex.execute(select)
        rows_async = [await ex.run(GetJob(id=j)) for j in range(1, 5)]
        await caller.commit()
    assert inserted[0].unique_key == rich_job(1).unique_key

    sync = sync_executor(url)
    with sync.conn:
        raw_sync = execute_step(sync.conn, select)
        rows_sync = [sync.run(GetJob(id=j)) for j in range(1, 5)]
    assert rows_async == rows_sync
    assert len(raw_async) == 4 and all(type(r) is tuple and len(r) == 18 for r in raw_async)
    assert raw_async == raw_sync
    assert [[type(v) for v in r] for r in raw_async] == [[type(v) for v in r] for r in raw_sync]
    rich = rows_sync[0]
    assert rich.errors[0].error == 'boom "quoted" ü' and rich.attempted_by == ("client-1",)
    assert rich.metadata == {"m": {"x": [1, "y"]}} and rich.tags == ("red", "blue")
    assert rich.unique_states == 0b11110101 and rich.scheduled_at == T0 + timedelta(seconds=5)
    assert json.loads(rich.encoded_args)["s"] == 'é " x'
    assert rows_sync[2].unique_states == 0b11110101 and rows_sync[2].tags == ("red", "blue")


@pytest.mark.parametrize("kind", KINDS)
async def test_claim_and_complete_round_trip(kind: str, url: str) -> None:
    sync = sync_executor(url)
    with sync.conn:
        (result,) = sync.run(InsertJobs(jobs=(job("work"),), nonce="0123456789abcdef"))
    async with open_caller(kind, url) as caller:
        ex = await executor_for(await caller.begin())
        (claimed,) = await ex.run(ClaimJobs(queue="default", limit=10, client_id="me"))
        assert claimed.id == result.job.id and claimed.state is JobState.RUNNING and claimed.attempt == 1
        finished = datetime.now(UTC).replace(microsecond=123456)
        (done,) = await ex.run(SetStateIfRunning(updates=(
            SetStateUpdate(id=claimed.id, state=JobState.COMPLETED, finalized_at=finished),
        )))
        assert done.state is JobState.COMPLETED and done.finalized_at == finished
        await caller.commit()
    sync = sync_executor(url)
    with sync.conn:
        row = sync.run(GetJob(id=claimed.id))
    assert row.state is JobState.COMPLETED and row.finalized_at == finished and row.attempted_by == ("me",)


async def test_jsonb_parameters_ignore_the_connections_own_codec(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        # What many apps do: dicts in and out of jsonb. Our JSON text must not be encoded again.
        await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
        async with conn.transaction():
            ex = await executor_for(conn)
            (row,) = await insert(ex, job("out"))
            updated = await ex.run(update_output_intent(row.id, {"answer": 42}))
        assert updated.metadata == {"output": {"answer": 42}}
    finally:
        await conn.close()


def admin_intents(step: int, previous: list[Any]) -> list[Any]:
    """The intents the client runs with ``tx=`` (inserts, jobs and queues admin), in rounds:
    round ``step`` may use the results of the rounds before it."""
    if step == 0:
        return [
            InsertJobs(jobs=(rich_job(1), job("plain", tags=("red",)), job("third", priority=3)),
                       nonce="0123456789abcdef"),
            UpsertQueue("q1", metadata=b'{"team":"a"}', now=T0), UpsertQueue("q2", now=T0),
            Notify(TOPIC_CONTROL, ('{"action":"noop"}',)),
        ]
    if step == 1:
        return [
            list_jobs_intent(states=["available", "scheduled"], kinds=["rich", "plain"],
                             queues=["q1", "default"], ids=[1, 2, 3], priorities=[1, 2], tags_any=["red"],
                             created_after=T0 - timedelta(days=3650), created_before=T0 + timedelta(days=1),
                             order_by="created_at", limit=1),
            list_jobs_intent(order_by="scheduled_at", descending=True, limit=2),
            CountJobs(), GetJobs(ids=(1, 2, 3)), GetQueue("q1"), list_queues_intent(10, None),
            ListQueues(name_contains="Q", exclude=("q2",)),
        ]
    if step == 2:
        first_page = previous[1][0]
        return [
            ListJobs(order_by="created_at", limit=1, after=decode_job_cursor(
                encode_job_cursor(first_page[0], "created_at", False), "created_at", False)),
            cancel_intent(1, T0), update_output_intent(2, {"x": [1, "ü"]}), DeleteJob(3),
            *pause_intents("q1", pause=True), *update_queue_intents("q2", {"k": [True, None]}),
        ]
    return [RetryJob(1, now=T0), ResumeQueue("q1", now=T0), PauseQueue("*", now=T0), CountJobs()]


def _without_db_clock(value: Any) -> Any:
    """``value`` with the times the database's own clock set (before T0's decade) blanked: they
    differ from run to run."""
    if isinstance(value, datetime):
        return "db-now" if value.year < 2030 else value
    if isinstance(value, (list, tuple)):
        return [_without_db_clock(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_db_clock(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, {f.name: _without_db_clock(getattr(value, f.name))
                                       for f in dataclasses.fields(value)})
    return value


@pytest.mark.parametrize("kind", KINDS)
async def test_admin_intents_give_the_sync_psycopg_results(kind: str, url: str) -> None:
    results: list[list[Any]] = []
    async with open_caller(kind, url) as caller:
        ex = await executor_for(await caller.begin())
        for step in range(4):
            results.append([await ex.run(i) for i in admin_intents(step, results)])
        await caller.commit()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_queue RESTART IDENTITY")
    sync = sync_executor(url)
    expected: list[list[Any]] = []
    with sync.conn, sync.transaction():
        for step in range(4):
            expected.append([sync.run(i) for i in admin_intents(step, expected)])
    assert _without_db_clock(results) == _without_db_clock(expected)
    assert [j.id for j in results[1][0]] == [2] and [j.id for j in results[2][0]] == [3]
    assert [j.id for j in results[1][1]] == [1, 3] and results[1][2]
    assert results[2][1].state is JobState.CANCELLED and results[3][0].state is JobState.AVAILABLE
    assert results[2][2].metadata == {"output": {"x": [1, "ü"]}}


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("kind", KINDS)
async def test_a_client_of_another_dialect_is_refused(kind: str, url: str) -> None:
    async with open_caller(kind, url) as caller:
        tx = await caller.begin()
        with pytest.raises(ValidationError, match="postgres transaction but the client uses sqlite"):
            await native_runner_for(tx, schema=None, expect="sqlite")
        with pytest.raises(ValidationError, match="invalid schema name"):
            await native_runner_for(tx, schema="no-such; schema", expect="postgres")
        await caller.rollback()


async def test_refusals(url: str) -> None:
    conn = await asyncpg.connect(url)
    with pytest.raises(ValidationError, match="outside a transaction"):
        await native_runner_for(conn, schema=None, expect="postgres")
    await conn.close()
    with pytest.raises(ValidationError, match="asyncpg connection is closed"):
        await native_runner_for(conn, schema=None, expect="postgres")

    async with asyncpg.create_pool(url, min_size=1, max_size=1) as pool:
        async with pool.acquire() as proxy:
            pass
        with pytest.raises(ValidationError, match="cannot be used"):
            await native_runner_for(proxy, schema=None, expect="postgres")

    aconn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    with pytest.raises(ValidationError, match="autocommit mode outside a transaction"):
        await native_runner_for(aconn, schema=None, expect="postgres")
    await aconn.close()
    with pytest.raises(ValidationError, match="psycopg connection is closed"):
        await native_runner_for(aconn, schema=None, expect="postgres")

    engine = create_async_engine(_sqlalchemy_url(url, "asyncpg"))
    try:
        sa_conn = await engine.connect()
        await sa_conn.close()
        with pytest.raises(ValidationError, match="closed or was never started"):
            await native_runner_for(sa_conn, schema=None, expect="postgres")
        async with engine.connect() as sa_conn:
            auto = await sa_conn.execution_options(isolation_level="AUTOCOMMIT")
            with pytest.raises(ValidationError, match="outside a transaction"):
                await native_runner_for(auto, schema=None, expect="postgres")
    finally:
        await engine.dispose()

    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            found = await native_runner_for(conn, schema=None, expect="postgres")
            assert found is not None
            with pytest.raises(ValidationError, match="never begins one of its own"):
                await found[0].run_plan(sleep_plan(0), begin="BEGIN")
    finally:
        await conn.close()


async def test_other_objects_are_not_native(url: str) -> None:
    import sqlite3

    with psycopg.connect(url) as sync_conn:
        for tx in (object(), sync_conn, sqlite3.connect(":memory:"), None):
            assert await native_runner_for(tx, schema=None, expect="postgres") is None


def test_asyncio_kinds_are_refused_on_another_event_loop(url: str) -> None:
    import trio

    async def refused(*objects: Any) -> None:
        for tx in objects:
            with pytest.raises(ValidationError, match="runs on asyncio only"):
                await native_runner_for(tx, schema=None, expect="postgres")

    conn = asyncio.run(psycopg.AsyncConnection.connect(url))
    engine = create_async_engine(_sqlalchemy_url(url, "psycopg"))
    try:
        trio.run(refused, conn, AsyncSession(engine))
    finally:
        asyncio.run(conn.close())
        asyncio.run(engine.dispose())


def test_finding_nothing_imports_no_optional_driver() -> None:
    code = (
        "import asyncio, sys\n"
        "from river_anyio.caller_tx import native_runner_for\n"
        "assert asyncio.run(native_runner_for(object(), schema=None, expect='postgres')) is None\n"
        "loaded = [m for m in ('asyncpg', 'sqlalchemy.ext.asyncio', 'trio') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- cancellation


async def cancelled_after(seconds: float, how: str, call: Any) -> None:
    """Run ``call()`` and cancel it after ``seconds``, by an AnyIO cancel scope (which cancels
    at every await until the scope exits) or by asyncio's own timeout (which cancels once)."""
    if how == "anyio":
        with anyio.move_on_after(seconds) as scope:
            await call()
        assert scope.cancelled_caught
    else:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(seconds):
                await call()


@pytest.mark.parametrize("how", ["anyio", "asyncio"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_cancelled_statement_leaves_the_caller_able_to_roll_back(
    kind: str, how: str, url: str
) -> None:
    async with open_caller(kind, url) as caller:
        ex = await executor_for(await caller.begin())
        await insert(ex, job("lost"))
        await cancelled_after(0.3, how, lambda: ex.runner.run_plan(sleep_plan(30)))
        with anyio.fail_after(10):  # at once: the server stopped the 30 s sleep
            await caller.rollback()  # the caller's to do; the connection lets them

        ex = await executor_for(await caller.begin())
        await insert(ex, job("next"))
        await caller.commit()
    assert sync_kinds(url) == ["next"]


# ---------------------------------------------------------------- translation


def test_numbered_placeholders() -> None:
    assert numbered_placeholders("SELECT %s::int, %s::text") == "SELECT $1::int, $2::text"
    # psycopg reads a literal's %% as one percent and a literal's %s as a parameter: so do we.
    assert numbered_placeholders("SELECT '100%%', x LIKE 'a%%' FROM t WHERE y = %s") == (
        "SELECT '100%', x LIKE 'a%' FROM t WHERE y = $1"
    )
    assert numbered_placeholders("SELECT '%s', %b, %t") == "SELECT '$1', $2, $3"
    assert numbered_placeholders("SELECT 1") == "SELECT 1"
    for bad in ("SELECT %(name)s", "SELECT %d", "SELECT 5 %"):
        with pytest.raises(ValidationError, match="unsupported placeholder"):
            numbered_placeholders(bad)


def test_asyncpg_sql_binds_jsonb_parameters_as_text() -> None:
    assert asyncpg_sql("UPDATE t SET m = m || %s::jsonb, a = %s::jsonb[] WHERE id = %s::bigint") == (
        "UPDATE t SET m = m || $1::text::jsonb, a = $2::jsonb[] WHERE id = $3::bigint"
    )
    assert asyncpg_sql("SELECT metadata::jsonb FROM t") == "SELECT metadata::jsonb FROM t"


def test_copy_table_names_split_into_schema_and_table() -> None:
    assert _split_table("river_job") == (None, "river_job")
    assert _split_table('"alt_schema".river_job') == ("alt_schema", "river_job")


async def test_runners_report_a_closed_connection_as_broken(url: str) -> None:
    aconn = await psycopg.AsyncConnection.connect(url)
    conn = await asyncpg.connect(url)
    await conn.execute("BEGIN")
    runners = [(await executor_for(aconn)).runner, (await executor_for(conn)).runner]
    assert [r.broken for r in runners] == [False, False]
    assert isinstance(runners[0], PsycopgAsyncRunner) and isinstance(runners[1], AsyncpgRunner)
    await aconn.close()
    conn.terminate()
    assert [r.broken for r in runners] == [True, True]
