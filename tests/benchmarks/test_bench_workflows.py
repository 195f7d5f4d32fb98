"""``python -m benchmarks workflows``: its arguments, percentiles and report, not its figures."""

from __future__ import annotations

import pytest

from benchmarks.workflows import JOBS, SAMPLES, parse_args, percentile, report_lines


def test_defaults_and_quick() -> None:
    args = parse_args([])
    assert (args.jobs, args.samples, args.max_workers) == (JOBS, SAMPLES, 100) == (10_000, 200, 100)
    quick = parse_args(["--quick", "--max-workers", "7"])
    assert (quick.jobs, quick.samples, quick.max_workers) == (200, 20, 7)
    assert parse_args(["--jobs", "50", "--samples", "3"]).jobs == 50


@pytest.mark.parametrize("argv", [["--jobs", "0"], ["--samples", "-1"], ["--max-workers", "0"],
                                  ["--jobs", "many"], ["--nope"]])
def test_bad_arguments_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2 and "usage: python -m benchmarks workflows" in capsys.readouterr().err


def test_percentile_by_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, unsorted
    assert (percentile(values, 0.5), percentile(values, 0.95), percentile(values, 1.0)) == (50.0, 95.0, 100.0)
    assert percentile([3.0], 0.95) == 3.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


def test_report_lines_give_ratio_percentiles_and_verdicts() -> None:
    results = {"jobs": 10_000, "independent_s": 2.0, "fan_in_s": 2.5,
               "latency_defaults_ms": [float(v) for v in range(1, 101)],
               "latency_low_latency_ms": [60.0] * 10}
    fan, defaults, low = report_lines(results)
    assert fan == ("fan-out/fan-in of 10,000: 2.50 s; independent jobs: 2.00 s; x1.25 [target <= 1.5: met]")
    assert "p50 50.0 ms, p95 95.0 ms" in defaults and defaults.endswith("[target p95 <= 1000 ms: met]")
    assert low.startswith("promotion latency, low-latency (10 chains)") and low.endswith("missed]")
    assert report_lines({"jobs": 1}) == []


@pytest.mark.postgres
def test_the_measurements_run_at_a_tiny_size(scratch_pg_url: str) -> None:
    """The machinery on 20 jobs and 3 chains (figures meaningless at this size)."""
    from benchmarks.workflows import fan_in_seconds, independent_seconds, promotion_latencies_ms
    from river_db.migrator import Migrator

    with Migrator(scratch_pg_url) as migrator:
        migrator.migrate_up()
    assert independent_seconds(scratch_pg_url, 20, 4) > 0
    assert fan_in_seconds(scratch_pg_url, 20, 4) > 0
    latencies = promotion_latencies_ms(scratch_pg_url, 3, 4, low_latency=True)
    assert len(latencies) == 3 and all(v >= 0 for v in latencies)
