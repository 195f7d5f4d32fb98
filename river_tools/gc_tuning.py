"""Garbage-collector settings for a process that does nothing but work jobs (``river work``,
``river bench``); a library never changes them, so a ``Client`` in someone else's process
leaves them alone.

Every job allocates a few dozen small container objects (rows, runs, outcomes, events), so
the young generation fills every few dozen jobs, and each full collection walks everything
the process holds: the modules, the client and every job thread's stack. In a 20,000-job
burn-down that was about 12 us of CPU per job. Freezing what startup allocated takes it out
of every later collection, and a larger young generation collects seventy times less often;
nothing that becomes garbage is kept longer than the next collection of its generation.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between young collections (CPython's default: 700). At 10,000 a 50,000-job
# burn-down still spent 1.6-2.3 us per job collecting, about half of it in the middle
# generation; at 50,000, 0.4-1.0 us, with the same peak RSS within the runs' noise.
YOUNG_THRESHOLD = 50_000


def tune_for_worker() -> tuple[int, int, int]:
    """Freeze the objects alive now and raise the young generation's threshold; returns the
    thresholds that were in force before."""
    before = gc.get_threshold()
    gc.collect()  # what is garbage already is freed, not frozen
    gc.freeze()
    gc.set_threshold(max(before[0], YOUNG_THRESHOLD), before[1], before[2])
    return before


def restore(thresholds: tuple[int, int, int]) -> None:
    """Undo ``tune_for_worker`` (thresholds back, frozen objects collectable again)."""
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@contextmanager
def tuned_for_worker(enabled: bool = True) -> Iterator[None]:
    """``tune_for_worker`` while open (when ``enabled``), then ``restore``: a command may run
    inside a longer-lived process (tests, embedding)."""
    if not enabled:
        yield
        return
    previous = tune_for_worker()
    try:
        yield
    finally:
        restore(previous)
