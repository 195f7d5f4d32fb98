"""The worker process's collector settings (river_tools.gc_tuning)."""

from __future__ import annotations

import gc
import subprocess
import sys

from river_tools.gc_tuning import YOUNG_THRESHOLD, restore, tune_for_worker


def test_tuning_freezes_startup_objects_and_raises_the_young_threshold_then_restores() -> None:
    before = gc.get_threshold()
    previous = tune_for_worker()
    try:
        assert previous == before
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (max(before[0], YOUNG_THRESHOLD), before[1], before[2])
    finally:
        restore(previous)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_garbage_made_after_tuning_is_still_collected() -> None:
    code = (
        "import gc, weakref\n"
        "from river_tools.gc_tuning import tune_for_worker\n"
        "tune_for_worker()\n"
        "class Node: pass\n"
        "a = Node(); a.self = a; ref = weakref.ref(a); del a\n"
        "gc.collect(0)\n"
        "print(ref() is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_tuned_for_worker_restores_on_exit_and_can_be_turned_off() -> None:
    from river_tools.gc_tuning import tuned_for_worker

    before = gc.get_threshold()
    with tuned_for_worker():
        assert gc.get_freeze_count() > 0 and gc.get_threshold()[0] >= YOUNG_THRESHOLD
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with tuned_for_worker(False):
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
