"""Run deadlines in buckets: the bookkeeping both clients' deadline timers share.

A deadline is an entry, keyed by the run, in the bucket (a dict) of its slot: the
deadline rounded up to a multiple of ``DEADLINE_GRAIN``, so it never fires early and
at most the grain late. The slots are a heap. Adding or dropping a deadline is a
dict operation, a finished run leaves its bucket at once rather than waiting for its
deadline, and only a new slot touches the heap.

The waiting is the client's: the threaded client's watchdog sleeps on a Condition
(river_sync), the async client's deadlines task in a cancel scope (river_anyio).
Each subclasses ``DeadlineBuckets`` and moves its waiter in ``_new_earliest``. There
is no locking here: the threaded client calls under its lock, the async one from
its event loop. Times are seconds on the client's clock (``time.monotonic()``, or
the loop's time).
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable
from typing import Any

DEADLINE_GRAIN = 0.01  # seconds: deadlines share buckets this wide, so one may fire this much late

Bucket = dict[Any, Callable[[Any], None]]  # run -> the action its deadline calls with it

# Stands for a bucket whose runs all left: the dict they filled is freed (an emptied dict
# keeps its table until its slot comes round; over a 60 s timeout the buckets of finished
# claims held megabytes), the slot stays in the heap. Never written to: ``bucket()`` hands
# out a fresh dict in its place, and popped it is empty, so it fires nothing.
EMPTIED: Bucket = {}


class DeadlineBuckets:
    """Deadlines by slot; ``_buckets`` maps each slot in the ``_slots`` heap to its bucket."""

    def __init__(self) -> None:
        self._buckets: dict[int, Bucket] = {}
        self._slots: list[int] = []  # a heap of the buckets' slots

    def _new_earliest(self, slot: int) -> None:
        """``slot`` became the earliest: wake the waiter at ``slot * DEADLINE_GRAIN`` (subclasses).

        Only a new slot can be earlier than the waiter's wake-up; a later one can't change it.
        """

    def add(self, run: Any, when: float, action: Callable[[Any], None]) -> int:
        """Call ``action(run)`` at ``when``; returns the slot to ``drop`` it from."""
        slot, bucket = self.bucket(when)
        bucket[run] = action
        return slot

    def bucket(self, when: float) -> tuple[int, Bucket]:
        """The slot ``when`` falls in and its bucket: ``bucket[run] = action`` is then
        ``add(run, when, action)``, so runs that share a deadline (a claim's jobs with the same
        timeout) look their slot up once. Use the bucket before anything can ``drop`` from it
        (the threaded client holds its lock throughout): a bucket its last run left is replaced."""
        slot = -int(-when // DEADLINE_GRAIN)  # rounded up: a deadline never fires early
        buckets = self._buckets
        bucket = buckets.get(slot)
        if bucket is None:
            bucket = buckets[slot] = {}
            slots = self._slots
            earliest = not slots or slot < slots[0]
            heapq.heappush(slots, slot)
            if earliest:
                self._new_earliest(slot)
        elif bucket is EMPTIED:  # its slot is still in the heap: a fresh table, no push
            bucket = buckets[slot] = {}
        return slot, bucket

    def drop(self, run: Any, slot: int) -> None:
        """Forget ``run``'s deadline in ``slot`` (harmless if it is gone or has fired)."""
        bucket = self._buckets.get(slot)
        if bucket is not None:
            bucket.pop(run, None)
            if not bucket:  # an emptied dict would keep its table until its slot came round
                self._buckets[slot] = EMPTIED

    def wake_at(self) -> float:
        """When the earliest bucket is due: ``math.inf`` with none."""
        slots = self._slots
        return slots[0] * DEADLINE_GRAIN if slots else math.inf

    def pop_due(self, now: float) -> Bucket | None:
        """Take out the earliest bucket due at ``now`` that has runs in it; None when there is none.

        Emptied buckets (``EMPTIED``) due on the way are taken out and skipped: they fire nothing.
        """
        slots, buckets = self._slots, self._buckets
        while slots and slots[0] * DEADLINE_GRAIN <= now:
            bucket = buckets.pop(heapq.heappop(slots), EMPTIED)
            if bucket:
                return bucket
        return None


def fire(due: Bucket, log: logging.Logger) -> None:
    """Call each run's action in ``due`` with its run. An action that raises (a bug) is logged on
    the client's ``log`` and the others still fire: one failing action must not end the timer."""
    for run, action in due.items():
        try:
            action(run)
        except Exception:
            log.exception("river: a deadline action failed")
