"""The trio client's deadlines task: bucketed timeouts in trio time, in order, never early, droppable."""

from __future__ import annotations

import trio
import trio.testing

from river_trio.client import DEADLINE_GRAIN, _Deadlines


def test_deadlines_fire_in_order_never_early_and_dropped_ones_never() -> None:
    fired: list[tuple[str, float]] = []

    def action(run: str) -> None:
        fired.append((run, trio.current_time()))

    async def main() -> None:
        deadlines = _Deadlines()
        async with trio.open_nursery() as nursery:
            await nursery.start(deadlines.run)
            now = trio.current_time()
            deadlines.add("late", now + 5.0, action)
            slot = deadlines.add("gone", now + 3.0, action)
            deadlines.add("early", now + 1.0, action)  # earlier than the task's wake-up: moves it
            deadlines.add("same bucket", now + 5.0 - DEADLINE_GRAIN / 4, action)
            deadlines.drop("gone", slot)
            deadlines.drop("gone", slot)  # twice is harmless
            await trio.sleep(2.0)
            assert [name for name, _ in fired] == ["early"]
            deadlines.add("added later", trio.current_time() + 0.5, action)
            await trio.sleep(10.0)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    names = [name for name, _ in fired]
    assert names[:2] == ["early", "added later"] and sorted(names[2:]) == ["late", "same bucket"]
    at = dict(fired)
    assert 1.0 <= at["early"] <= 1.0 + DEADLINE_GRAIN
    assert 2.5 <= at["added later"] <= 2.5 + DEADLINE_GRAIN
    assert 5.0 <= at["late"] <= 5.0 + DEADLINE_GRAIN
    assert at["same bucket"] == at["late"]


def test_a_failing_action_does_not_end_the_task() -> None:
    fired: list[str] = []

    def boom(run: str) -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        deadlines = _Deadlines()
        async with trio.open_nursery() as nursery:
            await nursery.start(deadlines.run)
            deadlines.add("a", trio.current_time() + 1.0, boom)
            deadlines.add("b", trio.current_time() + 2.0, fired.append)
            await trio.sleep(3.0)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert fired == ["b"]
