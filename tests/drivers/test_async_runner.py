"""river_anyio's MachineRunner: a post sets the wake-up event only once per wait, and no post is
missed for it (before the start, from a hook during a dispatch, and across many waits)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from river_anyio.runner import MachineRunner
from tests.drivers.test_sync_runner import Counter, Ping

Run = Callable[[Callable[[], Awaitable[Any]]], Any]  # the run fixture (tests/drivers/conftest.py)


def test_every_post_is_handled_across_waits(run: Run) -> None:
    async def main() -> None:
        machine = Counter()
        echoed: list[int] = []

        def hook(_output: Any) -> None:
            # A post from the runner's own dispatch: queued while the event is set already.
            if machine.seen and machine.seen[-1] % 10 == 0 and machine.seen[-1] not in echoed:
                echoed.append(machine.seen[-1])
                runner.post(Ping(-machine.seen[-1]))

        runner = MachineRunner(machine, database=None, name="test", on_output=hook)  # type: ignore[arg-type]
        runner.post(Ping(0))  # before the start: on AnyIO's Event, before the loop's own
        async with anyio.create_task_group() as tg:
            await tg.start(runner.run)
            for n in range(1, 41):
                runner.post(Ping(n))
                if n % 3 == 0:
                    runner.post(Ping(100 + n), urgent=True)
                if n % 2:
                    await anyio.wait_all_tasks_blocked()  # the runner waits again, on a new event
                    assert n in machine.seen  # handled without waiting for finish()
            await anyio.wait_all_tasks_blocked()
            runner.finish()
        assert sorted(machine.seen) == sorted(
            [*range(0, 41), *(100 + n for n in range(3, 41, 3)), *(-n for n in echoed)])
        assert echoed  # the hook's own posts were handled too
        assert runner.done.is_set()

    run(main)
