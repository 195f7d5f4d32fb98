"""The async drivers' inline mode (river_trio.testing, river_asyncio.testing): await insert runs the
job at once, in memory or in the database."""

from __future__ import annotations

import importlib
from typing import Any

import anyio
import pytest

from river_protocol.errors import ValidationError
from river_trio import (
    InsertManyParams,
    InsertOpts,
    JobSnooze,
    JobState,
    UniqueOpts,
    WorkContext,
    Workers,
)
from river_trio.testing import require_inserted, require_not_inserted
from tests.testing_helpers import (  # noqa: F401  (fixtures)
    AsyncDriver,
    Other,
    Task,
    async_driver_fixture,
    client_db_url_fixture,
    migrated_pg_fixture,
    timedelta,
)


def _workers(log: list[str]) -> Workers:
    workers = Workers()

    @workers.job(Task)
    async def work(ctx: WorkContext, args: Task) -> None:
        await anyio.sleep(0)
        log.append(args.name)
        if args.name == "fail":
            raise RuntimeError("failed inline")
        if args.name == "snooze":
            raise JobSnooze(timedelta(hours=1))
        ctx.record_output(args.name.upper())

    return workers


def test_in_memory(drv: AsyncDriver) -> None:
    log: list[str] = []

    async def main() -> None:
        inline = drv.testing.InlineClient(_workers(log))
        first = await inline.insert(Task("a"))
        assert first.job.id == 1 and first.job.state is JobState.COMPLETED
        assert first.work is not None and first.work.output == "A" and not first.unique_skipped_as_duplicate
        failed = await inline.insert(Task("fail"), InsertOpts(max_attempts=1))
        assert failed.job.state is JobState.DISCARDED
        assert failed.job.errors[0].error == "RuntimeError: failed inline"
        many = await inline.insert_many([Task("snooze"), InsertManyParams(Task("b"), InsertOpts(queue="q"))])
        assert [r.job.state for r in many] == [JobState.SCHEDULED, JobState.COMPLETED]
        assert [j.id for j in inline.jobs()] == [1, 2, 3, 4] and inline.get_job(4).queue == "q"
        assert inline.client is None
        with pytest.raises(ValidationError, match="no job 99"):
            inline.get_job(99)
        with pytest.raises(ValidationError, match="not registered"):
            await inline.insert(Other())
        with pytest.raises(ValidationError, match="tx= needs a database"):
            await inline.insert(Task(), tx=object())

    drv.run(main)
    assert log == ["a", "fail", "snooze", "b"]
    with pytest.raises(ValidationError, match="needs a Workers bundle"):
        drv.testing.InlineClient(lambda a: None)  # type: ignore[arg-type]


def test_with_a_database(drv: AsyncDriver, client_db_url: str) -> None:
    log: list[str] = []

    async def main() -> None:
        async with drv.testing.InlineClient(_workers(log), client_db_url) as inline:
            done = await inline.insert(Task("x"))
            failed = await inline.insert(Task("fail"))
            assert inline.client is not None
            stored = await require_inserted(inline.client, Task, args={"name": "x"})
            assert stored.state is JobState.COMPLETED and stored.metadata["output"] == "X"
            assert stored == done.job
            again = await require_inserted(inline.client, Task, args={"name": "fail"})
            # Not retried inline: the job waits for a real client, with its error recorded.
            assert again.state is JobState.AVAILABLE and again.attempt == 1 and failed.job == again
            with pytest.raises(ValidationError, match="records jobs in its database"):
                inline.jobs()

    drv.run(main)
    assert log == ["x", "fail"]


def test_unique_duplicates_are_not_run(drv: AsyncDriver, client_db_url: str) -> None:
    log: list[str] = []
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))

    async def main() -> None:
        async with drv.testing.InlineClient(_workers(log), client_db_url) as inline:
            first = await inline.insert(Task("u"), unique)
            second = await inline.insert(Task("u"), unique)
        assert second.unique_skipped_as_duplicate and second.work is None
        assert second.job.id == first.job.id

    drv.run(main)
    assert log == ["u"]


def test_inline_client_borrows_a_client(drv: AsyncDriver, client_db_url: str) -> None:
    log: list[str] = []

    async def main() -> None:
        client = drv.package.Client(client_db_url, workers=_workers(log), max_attempts=1)
        try:
            inline = drv.testing.inline_client(client)
            result = await inline.insert(Task("fail"))
            await inline.aclose()  # the borrowed client stays usable
            assert result.job.state is JobState.DISCARDED
            assert (await require_inserted(client, Task)).id == result.job.id
        finally:
            await client.aclose()

    drv.run(main)
    with pytest.raises(ValidationError, match=rf"needs a river_{drv.name}\.Client"):
        drv.testing.inline_client(object())  # type: ignore[arg-type]


def test_transaction_mode(drv: AsyncDriver, client_db_url: str) -> None:
    import psycopg

    from river_db.sqlite import connect_sqlite
    from river_db.urls import sqlite_path

    conn: Any
    if client_db_url.startswith("postgres"):
        conn = psycopg.connect(client_db_url)
    else:
        conn = connect_sqlite(sqlite_path(client_db_url))
        conn.execute("BEGIN")

    async def main() -> None:
        async with drv.testing.InlineClient(_workers([]), client_db_url) as inline:
            try:
                result = await inline.insert(Task("t"), tx=conn)
                assert result.job.state is JobState.COMPLETED
                conn.rollback()
            finally:
                conn.close()
            assert inline.client is not None
            await require_not_inserted(inline.client, Task)

    drv.run(main)


# ---------------------------------------------------------------- under anyio's pytest plugin


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """anyio's plugin runs each ``@pytest.mark.anyio`` test below on this backend."""
    return str(request.param)


@pytest.mark.anyio
async def test_helpers_run_as_anyio_plugin_tests(anyio_backend: str, client_db_url: str) -> None:
    # The README's way for asyncio (and trio) users: async tests under @pytest.mark.anyio.
    testing = importlib.import_module(f"river_{anyio_backend}.testing")
    log: list[str] = []
    async with testing.InlineClient(_workers(log), client_db_url) as inline:
        done = await inline.insert(Task("plugin"))
        assert done.job.state is JobState.COMPLETED
        assert anyio_backend == type(inline.client).ANYIO_BACKEND
        assert (await require_inserted(inline.client, Task, args={"name": "plugin"})).id == done.job.id
    assert log == ["plugin"]
