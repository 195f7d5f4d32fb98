"""The trio client's job-task pool (``river_trio.client._JobTasks``), without a database: how many
tasks a batch of runs wakes or starts, and that every queued run is taken."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from river_trio.client import _JobTasks


def _pool(nursery: trio.Nursery, work: Any, spawned: list[int]) -> _JobTasks:
    def spawn() -> None:
        spawned.append(1)
        nursery.start_soon(task)

    async def task() -> None:
        fresh = True
        while True:
            run = await pool.take(fresh=fresh)
            fresh = False
            await work(run)

    pool = _JobTasks(spawn)
    return pool


def test_runs_that_never_wait_cost_two_tasks_in_all() -> None:
    """The first task works every run; the one it woke in case its run waited finds none left."""
    done: list[Any] = []
    spawned: list[int] = []

    async def work(run: Any) -> None:
        done.append(run)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            pool = _pool(nursery, work, spawned)
            for batch in range(3):
                for i in range(100):
                    pool.submit(batch * 100 + i)  # type: ignore[arg-type]
                await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert done == list(range(300))
        assert len(spawned) == 2

    trio.run(main)


def test_runs_that_wait_get_a_task_each_and_tasks_are_reused() -> None:
    spawned: list[int] = []
    gate = trio.Event()
    running: list[Any] = []

    async def work(run: Any) -> None:
        running.append(run)
        await gate.wait()

    async def main() -> None:
        nonlocal gate
        async with trio.open_nursery() as nursery:
            pool = _pool(nursery, work, spawned)
            for i in range(20):
                pool.submit(i)  # type: ignore[arg-type]
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(running) == list(range(20)) and len(spawned) == 20
            gate.set()
            await trio.testing.wait_all_tasks_blocked()
            gate = trio.Event()
            for i in range(20, 35):
                pool.submit(i)  # type: ignore[arg-type]
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(running) == list(range(35))
            assert len(spawned) == 20  # the parked tasks took the new runs
            gate.set()
            nursery.cancel_scope.cancel()

    trio.run(main)
