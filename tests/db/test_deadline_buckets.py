"""river_db.deadline_buckets: the bucket/slot bookkeeping both clients' deadline timers share.

The clients' waiting is tested with them: tests/drivers/test_sync_watchdog.py (a thread on a
Condition) and tests/drivers/test_trio_deadlines.py (a task in a cancel scope, on a MockClock).
"""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_db.deadline_buckets import DEADLINE_GRAIN, EMPTIED, DeadlineBuckets, fire


class Recording(DeadlineBuckets):
    def __init__(self) -> None:
        super().__init__()
        self.earliest: list[int] = []

    def _new_earliest(self, slot: int) -> None:
        self.earliest.append(slot)


def nothing(run: object) -> None:
    pass


def test_one_slot_gives_one_bucket_and_filling_it_is_adding() -> None:
    d = Recording()
    slot, bucket = d.bucket(12.345)
    assert d.bucket(12.345) == (slot, bucket) and d.bucket(12.345)[1] is bucket
    assert d.bucket(12.345 - DEADLINE_GRAIN / 10)[1] is bucket  # the same slot, the same dict
    bucket["a"] = nothing
    assert d.add("b", 12.345, nothing) == slot
    assert bucket == {"a": nothing, "b": nothing} and d._slots == [slot]  # pushed once


@given(st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False))
def test_a_slot_is_rounded_up_never_early_and_at_most_a_grain_late(when: float) -> None:
    slot, _ = DeadlineBuckets().bucket(when)
    assert slot * DEADLINE_GRAIN >= when
    # Late by at most a grain; float division may land an exact multiple (0.2 / 0.01) one up.
    assert slot * DEADLINE_GRAIN - when <= DEADLINE_GRAIN * (1 + 1e-9)


def test_only_a_new_earliest_slot_moves_the_waiter() -> None:
    d = Recording()
    late, _ = d.bucket(5.0)
    d.bucket(7.0)  # later: the waiter's wake-up stands
    d.bucket(5.0)  # known slot
    early, _ = d.bucket(1.0)
    assert d.earliest == [late, early]
    assert d.wake_at() == early * DEADLINE_GRAIN and Recording().wake_at() == math.inf


def test_an_emptied_bucket_becomes_the_stand_in_and_is_refilled_with_a_fresh_dict() -> None:
    d = Recording()
    slot, bucket = d.bucket(3.0)
    bucket["a"] = bucket["b"] = nothing
    d.drop("a", slot)
    assert d._buckets[slot] is bucket
    d.drop("b", slot)
    assert d._buckets[slot] is EMPTIED and EMPTIED == {}  # the filled table is let go
    d.drop("b", slot)  # twice, and in an emptied bucket: harmless
    d.drop("x", slot + 1)  # a slot with no bucket: harmless
    again, fresh = d.bucket(3.0)
    assert again == slot and fresh is not EMPTIED and fresh is not bucket and fresh == {}
    assert d._slots == [slot] and d.earliest == [slot]  # still in the heap: no push, no wake-up move
    fresh["c"] = nothing
    assert EMPTIED == {}  # the stand-in is never written to
    assert d.pop_due(3.0) == {"c": nothing}
    assert d._buckets == {} and d._slots == []


def test_pop_due_takes_buckets_in_order_and_skips_emptied_ones() -> None:
    d = Recording()
    first = d.add("first", 1.0, nothing)
    gone = d.add("gone", 2.0, nothing)
    d.add("third", 3.0, nothing)
    d.add("later", 9.0, nothing)
    d.drop("gone", gone)
    assert d.pop_due(0.5) is None and len(d._slots) == 4  # nothing due yet
    assert d.pop_due(first * DEADLINE_GRAIN) == {"first": nothing}
    assert d.pop_due(3.0) == {"third": nothing}  # the emptied 2.0 is taken out on the way
    assert d.pop_due(3.0) is None
    assert sorted(d._buckets) == d._slots and len(d._slots) == 1  # only 9.0 is left
    assert gone not in d._buckets


def test_fire_calls_every_action_with_its_run_and_logs_one_that_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    called: list[object] = []

    def broken(run: object) -> None:
        called.append(run)
        raise RuntimeError("bug in an action")

    log = logging.getLogger("river_sync.client")
    with caplog.at_level(logging.ERROR, logger="river_sync.client"):
        fire({"a": called.append, "b": broken, "c": called.append}, log)
    assert called == ["a", "b", "c"]  # the failing action did not stop the ones after it
    [record] = caplog.records
    assert record.name == "river_sync.client" and record.getMessage() == "river: a deadline action failed"
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
