"""The async client's job-task pool (``river_anyio.client._JobTasks``, on trio's ParkingLot or the
asyncio backend's), without a database: how many
tasks a batch of runs wakes or starts, and that every queued run is taken."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc

from river_anyio.client import _JobTasks

Run = Callable[[Callable[[], Awaitable[Any]]], Any]  # the run fixture (tests/drivers/conftest.py)


def _pool(nursery: anyio.abc.TaskGroup, work: Any, spawned: list[int]) -> _JobTasks:
    def spawn() -> None:
        spawned.append(1)
        nursery.start_soon(task)

    async def task() -> None:  # as the client's _job_task takes its runs
        pool.arrived()
        while True:
            run = pool.poll()
            if run is None:
                run = await pool.take()
            await work(run)

    pool = _JobTasks(spawn)
    return pool


def test_runs_that_never_wait_cost_two_tasks_in_all(run: Run) -> None:
    """The first task works every run; the one it woke in case its run waited finds none left."""
    done: list[Any] = []
    spawned: list[int] = []

    async def work(run: Any) -> None:
        done.append(run)

    async def main() -> None:
        async with anyio.create_task_group() as nursery:
            pool = _pool(nursery, work, spawned)
            for batch in range(3):
                for i in range(100):
                    pool.submit(batch * 100 + i)  # type: ignore[arg-type]
                await anyio.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert done == list(range(300))
        assert len(spawned) == 2

    run(main)


def test_runs_that_wait_get_a_task_each_and_tasks_are_reused(run: Run) -> None:
    spawned: list[int] = []
    gate = anyio.Event()
    running: list[Any] = []

    async def work(run: Any) -> None:
        running.append(run)
        await gate.wait()

    async def main() -> None:
        nonlocal gate
        async with anyio.create_task_group() as nursery:
            pool = _pool(nursery, work, spawned)
            for i in range(20):
                pool.submit(i)  # type: ignore[arg-type]
            await anyio.wait_all_tasks_blocked()
            assert sorted(running) == list(range(20)) and len(spawned) == 20
            gate.set()
            await anyio.wait_all_tasks_blocked()
            gate = anyio.Event()
            for i in range(20, 35):
                pool.submit(i)  # type: ignore[arg-type]
            await anyio.wait_all_tasks_blocked()
            assert sorted(running) == list(range(35))
            assert len(spawned) == 20  # the parked tasks took the new runs
            gate.set()
            nursery.cancel_scope.cancel()

    run(main)


def test_async_chain_awaits_async_def_and_async_call_workers(run: Run) -> None:
    """An ``async def`` worker with no middleware but the resumable steps' gets the
    ``_resumable_only`` marker (``_call_worker`` runs those steps itself), with middleware its call
    is the chain's innermost step; a callable that is async only by its ``__call__`` goes through
    the wrapping coroutine; a sync one has no chain."""
    from dataclasses import dataclass
    from types import SimpleNamespace

    from river_anyio.client import Client, _resumable_only
    from river_protocol.workers import WorkerEntry

    @dataclass
    class Args:
        n: int

    async def with_ctx(ctx: Any, args: Args) -> int:
        return args.n + 1

    async def without_ctx(args: Args) -> int:
        return args.n + 2

    class AsyncCall:
        async def __call__(self, ctx: Any, args: Args) -> int:
            return args.n + 3

    def blocking(ctx: Any, args: Args) -> int:
        return args.n

    async def passthrough(ctx: Any, args: Any, call_next: Any) -> Any:
        return await call_next(ctx, args)

    bare = Client("sqlite:///unused-never-opened.sqlite3")  # the constructor does no I/O
    client = Client("sqlite:///unused-never-opened.sqlite3", middleware=[passthrough])

    async def main() -> None:
        assert bare._async_chain(WorkerEntry("k", Args, with_ctx, True)) is _resumable_only
        assert bare._async_chain(WorkerEntry("k", Args, AsyncCall(), True)) is not _resumable_only
        results = []
        for fn, takes_context in ((with_ctx, True), (without_ctx, False), (AsyncCall(), True)):
            chain = client._async_chain(WorkerEntry("k", Args, fn, takes_context))
            assert chain is not None
            ctx = SimpleNamespace(_resumable_state=None, job=SimpleNamespace(metadata={}))
            results.append(await chain(ctx, Args(10)))  # type: ignore[arg-type]
        assert results == [11, 12, 13]
        assert client._async_chain(WorkerEntry("k", Args, blocking, True)) is None

    run(main)
