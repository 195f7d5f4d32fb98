"""The trio client's deadlines task: bucketed timeouts in trio time, in order, never early, droppable."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
import trio.testing

from river_anyio.client import DEADLINE_GRAIN, _Deadlines
from river_db.deadline_buckets import EMPTIED as _EMPTIED


def run_deadlines(body: Callable[[_Deadlines], Awaitable[None]]) -> None:
    """``body(deadlines)`` while the deadlines task runs, on a MockClock that jumps to each wake-up."""

    async def main() -> None:
        deadlines = _Deadlines()
        async with trio.open_nursery() as nursery:
            await nursery.start(deadlines.run)
            await body(deadlines)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def recorder() -> tuple[list[tuple[str, float]], Callable[[str], None]]:
    """A list of (run, trio time) and the deadline action that appends to it."""
    fired: list[tuple[str, float]] = []

    def action(run: str) -> None:
        fired.append((run, trio.current_time()))

    return fired, action


def test_deadlines_fire_in_order_never_early_and_dropped_ones_never() -> None:
    fired, action = recorder()

    async def body(deadlines: _Deadlines) -> None:
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

    run_deadlines(body)
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

    async def body(deadlines: _Deadlines) -> None:
        deadlines.add("a", trio.current_time() + 1.0, boom)
        deadlines.add("b", trio.current_time() + 2.0, fired.append)
        await trio.sleep(3.0)

    run_deadlines(body)
    assert fired == ["b"]


def test_a_claims_bucket_fires_its_runs_together_and_an_earlier_one_moves_the_wakeup() -> None:
    fired, action = recorder()

    async def body(deadlines: _Deadlines) -> None:
        now = trio.current_time()
        deadlines.add("late", now + 5.0, action)
        await trio.sleep(0.5)  # the task sleeps until the 5 s bucket
        slot, bucket = deadlines.bucket(now + 2.0)  # earlier: moves the task's scope
        assert deadlines.bucket(now + 2.0) == (slot, bucket) and deadlines.bucket(now + 2.0)[1] is bucket
        assert slot * DEADLINE_GRAIN >= now + 2.0  # rounded up, never early
        for run in ("a", "b", "c"):  # what the client does for each job of a claim
            bucket[run] = action
        deadlines.drop("b", slot)
        await trio.sleep(10.0)

    run_deadlines(body)
    assert sorted(name for name, _ in fired[:2]) == ["a", "c"] and fired[2][0] == "late"
    at = dict(fired)
    assert at["a"] == at["c"] and 2.0 <= at["a"] <= 2.0 + DEADLINE_GRAIN
    assert 5.0 <= at["late"] <= 5.0 + DEADLINE_GRAIN


def test_an_emptied_bucket_is_the_stand_in_fires_nothing_and_a_refill_is_fresh() -> None:
    fired, action = recorder()

    async def body(deadlines: _Deadlines) -> None:
        now = trio.current_time()
        gone, bucket = deadlines.bucket(now + 1.0)  # every run of this claim ends early
        bucket["x"] = bucket["y"] = action
        refilled, old = deadlines.bucket(now + 3.0)
        old["z"] = action
        deadlines.add("last", now + 4.0, action)
        for run in ("x", "y"):
            deadlines.drop(run, gone)
        deadlines.drop("z", refilled)
        assert deadlines._buckets[gone] is _EMPTIED and deadlines._buckets[refilled] is _EMPTIED
        heap = sorted(deadlines._slots)
        slot, fresh = deadlines.bucket(now + 3.0)  # a later claim, the same deadline
        assert slot == refilled and fresh is not _EMPTIED and fresh is not old and fresh == {}
        assert sorted(deadlines._slots) == heap  # its slot was still in the heap: no push
        fresh["w"] = action
        await trio.sleep(2.0)
        assert fired == []  # the task woke at the emptied 1 s bucket and fired nothing
        assert gone not in deadlines._buckets and gone not in deadlines._slots
        await trio.sleep(10.0)
        assert deadlines._buckets == {} and deadlines._slots == []

    run_deadlines(body)
    assert [name for name, _ in fired] == ["w", "last"] and _EMPTIED == {}
    at = dict(fired)
    assert 3.0 <= at["w"] <= 3.0 + DEADLINE_GRAIN and 4.0 <= at["last"] <= 4.0 + DEADLINE_GRAIN
