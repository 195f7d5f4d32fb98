"""The threaded client's watchdog: bucketed deadlines that fire in order, never early, and can be dropped."""

from __future__ import annotations

import threading
import time

from river_sync.client import _EMPTIED, DEADLINE_GRAIN, _Watchdog

WAIT = 10.0


class Run:
    def __init__(self, name: str) -> None:
        self.name = name


def test_deadlines_fire_in_order_never_early_and_dropped_ones_never() -> None:
    lock = threading.Lock()
    dog = _Watchdog(lock)
    fired: list[tuple[str, float]] = []
    all_fired = threading.Event()

    def action(run: Run) -> None:
        fired.append((run.name, time.monotonic()))
        if len(fired) == 3:
            all_fired.set()

    dog.start()
    try:
        now = time.monotonic()
        late, early, gone, same = Run("late"), Run("early"), Run("gone"), Run("same bucket")
        deadlines = {"late": now + 0.12, "early": now + 0.03, "same bucket": now + 0.12}
        with lock:
            dog.add(late, deadlines["late"], action)
            slot = dog.add(gone, now + 0.06, action)
            dog.add(early, deadlines["early"], action)  # earlier than the sleeping thread's wake-up
            dog.add(same, deadlines["same bucket"], action)
            dog.drop(gone, slot)
            dog.drop(gone, slot)  # twice is harmless
        assert all_fired.wait(WAIT)
        time.sleep(0.1)  # "gone"'s deadline is long past: had it not been dropped, it would be here
    finally:
        dog.stop()
    names = [name for name, _ in fired]
    assert names[0] == "early" and sorted(names[1:]) == ["late", "same bucket"]
    for name, at in fired:
        assert at >= deadlines[name]
        assert at - deadlines[name] < DEADLINE_GRAIN + 5.0  # late by the grain plus scheduling, not more


def test_a_failing_action_does_not_stop_the_watchdog() -> None:
    lock = threading.Lock()
    dog = _Watchdog(lock)
    done = threading.Event()

    def boom(run: Run) -> None:
        raise RuntimeError("boom")

    dog.start()
    try:
        with lock:
            dog.add(Run("a"), time.monotonic(), boom)
            dog.add(Run("b"), time.monotonic() + 0.05, lambda run: done.set())
        assert done.wait(WAIT)
    finally:
        dog.stop()
    assert not dog._thread.is_alive()


def test_filling_a_bucket_is_adding_and_one_deadline_has_one_bucket() -> None:
    lock = threading.Lock()
    dog = _Watchdog(lock)
    fired: list[str] = []
    both = threading.Event()

    def action(run: Run) -> None:
        fired.append(run.name)
        if len(fired) == 2:
            both.set()

    dog.start()
    try:
        when = time.monotonic() + 0.03
        a, b, gone = Run("a"), Run("b"), Run("gone")
        with lock:
            slot, bucket = dog.bucket(when)
            assert dog.bucket(when) == (slot, bucket) and dog.bucket(when)[1] is bucket
            bucket[a] = action  # what a claim's chunk does for each job sharing the deadline
            bucket[gone] = action
            assert dog.add(b, when, action) == slot
            dog.drop(gone, slot)
            assert set(bucket) == {a, b}
        assert both.wait(WAIT)
        time.sleep(0.05)
    finally:
        dog.stop()
    assert sorted(fired) == ["a", "b"]


def test_the_last_run_dropped_takes_its_bucket_and_a_later_add_there_still_fires() -> None:
    lock = threading.Lock()
    dog = _Watchdog(lock)
    fired = threading.Event()
    dog.start()
    try:
        when = time.monotonic() + 0.05
        a, b = Run("a"), Run("b")
        with lock:
            slot = dog.add(a, when, lambda run: None)
            dog.add(b, when, lambda run: None)
            dog.drop(a, slot)
            assert slot in dog._buckets
            dog.drop(b, slot)
            assert dog._buckets[slot] is _EMPTIED  # the shared stand-in, not the table a and b filled
            dog.drop(b, slot)  # a bucket already gone is harmless
            assert dog.add(Run("late"), when, lambda run: fired.set()) == slot
        assert fired.wait(WAIT)
    finally:
        dog.stop()
    assert dog._buckets == {} and dog._slots == []


def test_a_bucket_earlier_than_the_sleeping_thread_wakes_it() -> None:
    lock = threading.Lock()
    dog = _Watchdog(lock)
    fired: list[tuple[str, float]] = []
    done = threading.Event()

    def action(run: Run) -> None:
        fired.append((run.name, time.monotonic()))
        if len(fired) == 2:
            done.set()

    dog.start()
    try:
        with lock:
            dog.add(Run("far"), time.monotonic() + 3600, action)
        time.sleep(0.05)  # the thread sleeps until the far deadline
        when = time.monotonic() + 0.03
        with lock:
            slot, bucket = dog.bucket(when)  # a new earliest slot: notifies the condition
            bucket[Run("a")] = action
            bucket[Run("b")] = action
        assert done.wait(WAIT)
    finally:
        dog.stop()
    assert sorted(name for name, _ in fired) == ["a", "b"]
    assert all(at >= when for _, at in fired)
    assert slot not in dog._buckets and len(dog._slots) == 1  # the far one is left
