"""``python -m benchmarks flow``: its arguments, gap arithmetic and report, not its figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from benchmarks.flow import (
    GLOBAL_LIMIT,
    HOT_JOBS,
    JOBS,
    MAX_WORKERS,
    PARTITIONS,
    gaps_ms,
    parse_args,
    queue_config,
    report_lines,
)
from river_sync import ConcurrencyConfig, PartitionConfig


def test_defaults_are_the_issues_sizes_and_quick_shrinks_them() -> None:
    args = parse_args([])
    assert (args.jobs, args.partitions, args.global_limit, args.max_workers, args.hot_jobs, args.rounds) == (
        JOBS, PARTITIONS, GLOBAL_LIMIT, MAX_WORKERS, HOT_JOBS, 3) == (20_000, 1_000, 50, 2_000, 10_000, 3)
    quick = parse_args(["--quick", "--global-limit", "2"])
    assert (quick.jobs, quick.partitions, quick.hot_jobs, quick.rounds) == (500, 20, 50, 1)
    assert quick.global_limit == 2
    assert parse_args(["--hot-jobs", "0"]).hot_jobs == 0
    assert args.fetch_cooldown_ms == 100 and parse_args(["--fetch-cooldown-ms", "5"]).fetch_cooldown_ms == 5


@pytest.mark.parametrize("argv", [["--jobs", "0"], ["--partitions", "0"], ["--global-limit", "0"],
                                  ["--max-workers", "-3"], ["--rounds", "0"], ["--hot-jobs", "-1"],
                                  ["--fetch-cooldown-ms", "0"],
                                  ["--jobs", "many"], ["--nope"]])
def test_bad_arguments_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2 and "usage: python -m benchmarks flow" in capsys.readouterr().err


def test_the_limited_queue_is_partitioned_by_the_member() -> None:
    assert queue_config(7, None).concurrency is None and queue_config(7, None).max_workers == 7
    by_p = PartitionConfig(by_args=["p"])
    assert queue_config(7, 3).concurrency == ConcurrencyConfig(global_limit=3, partition=by_p)
    assert queue_config(7, 3).fetch_cooldown == timedelta(milliseconds=100)  # River's default
    assert queue_config(7, 1, fetch_cooldown_ms=5).fetch_cooldown == timedelta(milliseconds=5)


def test_gaps_in_start_order_and_overlaps_counted() -> None:
    t = datetime(2030, 1, 1, tzinfo=UTC)
    ms = timedelta(milliseconds=1)
    runs = [(t + 10 * ms, t + 12 * ms), (t, t + 5 * ms), (t + 11 * ms, t + 20 * ms)]
    gaps, overlaps = gaps_ms(runs)
    assert gaps == [5.0, -1.0] and overlaps == 1
    assert gaps_ms([(t, t + ms)]) == ([], 0)


def test_report_lines_give_rates_ratio_cpu_hot_gaps_and_load() -> None:
    results = {"jobs": 1000, "global_limit": 50, "fetch_cooldown_ms": 20,
               "pairs": [{"unlimited_s": 1.0, "limited_s": 1.25, "unlimited_cpu": 0.02, "limited_cpu": 0.05,
                          "load": 1.5},
                         {"unlimited_s": 1.0, "limited_s": 2.0, "unlimited_cpu": None, "limited_cpu": None}],
               "hot_gaps_ms": [float(v) for v in range(1, 101)], "hot_overlaps": 0, "hot_load": 0.25}
    first, second, hot = report_lines(results)
    assert first == ("round 1: unlimited 1,000 jobs/s, global_limit=50 800 jobs/s: 80% [target >= 70%: met]; "
                     "Postgres CPU 20 vs 50 us/job; load 1.50")
    assert second.endswith("50% [target >= 70%: missed]")
    assert hot == ("hot partition (global_limit=1, 101 jobs, fetch_cooldown 20 ms): gap end->next start "
                   "p50 50.00 ms, p95 95.00 ms; strictly one at a time; load 0.25")
    assert "3 OVERLAPPING" in report_lines({"hot_gaps_ms": [1.0], "hot_overlaps": 3})[0]
    assert report_lines({}) == []


@pytest.mark.postgres
def test_the_measurements_run_at_a_tiny_size(scratch_pg_url: str) -> None:
    """The machinery on 60 jobs (figures meaningless at this size)."""
    from benchmarks.flow import burn_down, hot_partition
    from river_db.migrator import Migrator

    for line in ("main", "python"):
        with Migrator(scratch_pg_url, line=line) as migrator:
            migrator.migrate_up()
    seconds, _ = burn_down(scratch_pg_url, 40, 5, 10, 2)
    assert seconds > 0
    gaps, overlaps = hot_partition(scratch_pg_url, 20, 10, fetch_cooldown_ms=5)
    assert len(gaps) == 19 and overlaps == 0
