"""``python -m benchmarks dashboard``: its arguments, fill, timing, report and plans at a tiny
size (the machinery, never the figures: the benchmark itself is run by hand on an idle machine)."""

from __future__ import annotations

import pytest

from benchmarks.dashboard import JOBS, PAGES, ROUNDS, STATE_BANDS, parse_args, report_lines, run


def test_defaults_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args([])
    assert (args.jobs, args.rounds, args.no_plans) == (JOBS, ROUNDS, False) == (1_000_000, 7, False)
    for argv in (["--jobs", "10"], ["--rounds", "0"], ["--jobs", "x"]):
        with pytest.raises(SystemExit) as exited:
            parse_args(argv)
        assert exited.value.code == 2
    assert "usage: python -m benchmarks dashboard" in capsys.readouterr().err


def test_state_bands_cover_every_state_once() -> None:
    from river_protocol.states import JobState

    uppers = [upper for upper, _ in STATE_BANDS]
    assert uppers == sorted(uppers) and uppers[-1] == 1000
    assert sorted(state for _, state in STATE_BANDS) == sorted(s.value for s in JobState)


def test_report_lines_give_median_spread_and_verdict() -> None:
    over, under = report_lines({"overview": [250.0, 260.0, 240.0], "a job": [5.0, 7.0, 6.0]})
    assert over.startswith("overview") and "median   250.0 ms  (min 240.0, max 260.0)" in over
    assert over.endswith("[target < 200 ms: missed]") and under.endswith("[target < 200 ms: met]")


@pytest.mark.postgres
def test_the_machinery_runs_at_a_tiny_size(scratch_pg_url: str) -> None:
    said: list[str] = []
    result = run(scratch_pg_url, jobs=2000, rounds=1, plans=True, say=said.append, exact_up_to=100)
    assert result["jobs"] == 2000
    assert set(result["timings_ms"]) == {name for name, _ in PAGES} | {"jobs, state=completed, 21st page"}
    text = "\n".join(said)
    assert "-- CountJobsByQueue" in text and "(estimate probe) EXPLAIN (FORMAT JSON)" in text
    assert "-- FinishedHistogram" in text and "-- ListJobs" in text and "Execution Time" in text
    assert "river_job_prioritized_fetching_index" in text  # the loose index scan's probes
