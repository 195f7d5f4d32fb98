"""``river bench --driver trio``: River's benchmark worked by a ``river_trio.Client``.

The runner is ``river_tools.bench_async``'s, which serves both async clients on
AnyIO; this module keeps the trio names it had.
"""

from __future__ import annotations

from typing import TextIO

from river_tools.bench import BenchPlan, BenchResult, Tally
from river_tools.bench_async import bench_workers, run_async


def run_trio(plan: BenchPlan, tally: Tally, out: TextIO) -> BenchResult:
    """Work the benchmark with a ``river_trio.Client`` (see ``river_tools.bench.run_sync``)."""
    return run_async(plan, tally, out, driver="trio")


__all__ = ["bench_workers", "run_trio"]
