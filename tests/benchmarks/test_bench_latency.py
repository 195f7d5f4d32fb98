"""``python -m benchmarks latency``: the machinery, not the figures (runs of half a second)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import psycopg
import pytest

from benchmarks import latency
from benchmarks.fresh_state import FreshDatabases
from benchmarks.latency import DEFAULTS, LOW_LATENCY, SETTINGS, BackendCpu, parse_args, report_lines
from benchmarks.scratch import Scratch
from river_protocol.constants import FETCH_COOLDOWN_DEFAULT, FETCH_COOLDOWN_MIN


@pytest.fixture
def fresh_pg_url() -> Iterator[str]:
    scratch = Scratch()
    try:
        yield FreshDatabases(scratch).postgres("latency_test")
    finally:
        scratch.close()


def test_the_documented_configuration_is_the_last_setting() -> None:
    low = SETTINGS[-1]
    assert low.name == LOW_LATENCY
    assert (low.inserter_cooldown, low.worker_cooldown, low.worker_group_commit,
            low.worker_async_claim_commit) == (FETCH_COOLDOWN_MIN, FETCH_COOLDOWN_MIN, False, True)
    assert SETTINGS[0].name == DEFAULTS
    assert (SETTINGS[0].inserter_cooldown, SETTINGS[0].worker_cooldown, SETTINGS[0].worker_group_commit) == (
        FETCH_COOLDOWN_DEFAULT, FETCH_COOLDOWN_DEFAULT, True)


def test_report_lines_give_percentiles_cpu_ratio_and_targets() -> None:
    results = {
        DEFAULTS: {"jobs": 100, "done": 100, "p50_ms": 52.0, "p95_ms": 97.0, "p99_ms": 101.0, "max_ms": 110.0,
                   "pg_cpu_us_per_job": 400.0, "pg_cpu_inserter_us_per_job": 250.0,
                   "pg_cpu_worker_us_per_job": 150.0, "pg_cpu_walwriter_us_per_job": 12.0},
        LOW_LATENCY: {"jobs": 100, "done": 99, "p50_ms": 2.5, "p95_ms": 6.0, "p99_ms": 8.0, "max_ms": 12.0,
                      "pg_cpu_us_per_job": 460.0, "pg_cpu_inserter_us_per_job": None,
                      "pg_cpu_worker_us_per_job": 190.0},
        "broken": {"error": "the worker process did not start"},
    }
    lines = report_lines(results, load=1.4)
    header, defaults, low, broken, note, go, target, load = lines
    assert header.split()[:2] == ["setting", "p50"] and "PG CPU us/job" in header
    assert header.split()[-5:] == ["defaults", "inserter", "worker", "walwriter", "worked"]
    assert defaults.split()[-10:] == [
        "52.0", "97.0", "101.0", "110.0", "400.0", "x1.00", "250", "150", "12", "100/100"]
    assert low.split()[-10:] == ["2.5", "6.0", "8.0", "12.0", "460.0", "x1.15", "-", "190", "-", "99/100"]
    assert "inserter / worker" in note and "walwriter" in note
    assert broken.split() == ["broken", "failed:", "the", "worker", "process", "did", "not", "start"]
    assert "River Go" in go and "recorded" in go
    assert "p95 6.0 ms [<= 10]" in target and "+15 %" in target
    assert "load average 1.40" in load
    assert not any("load average" in line for line in report_lines(results, load=0.3))


def test_options() -> None:
    quick = parse_args(["--quick", "--worker", "trio", "--only", LOW_LATENCY])
    assert (quick.seconds, quick.rate, quick.worker, quick.only) == (2.0, 100, "trio", [LOW_LATENCY])
    with pytest.raises(SystemExit):
        parse_args(["--rate", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--only", "no such setting"])


@pytest.mark.postgres
def test_backend_cpu_counts_the_databases_backends(fresh_pg_url: str) -> None:
    with psycopg.connect(fresh_pg_url, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        with BackendCpu(fresh_pg_url, interval=0.05) as cpu:
            conn.execute("SELECT count(*) FROM generate_series(1, 3000000)")
    if os.path.exists(f"/proc/{pid}/stat"):
        seconds = cpu.seconds()
        assert seconds is not None and seconds >= 0.05
        assert cpu.seconds("no such application") == 0.0
        walwriter = cpu.walwriter_seconds()
        assert walwriter is not None and walwriter >= 0
    else:  # Postgres in another host or container: not visible, so not reported
        assert cpu.seconds() is None and cpu.walwriter_seconds() is None


def test_named_sets_the_application_name() -> None:
    assert latency.named("postgresql://u@h:5432/db", "x") == "postgresql://u@h:5432/db?application_name=x"
    assert latency.named("postgresql://h/db?sslmode=disable", "x") == (
        "postgresql://h/db?sslmode=disable&application_name=x")


def test_worker_command_is_ours_or_river_go_with_the_settings_cooldown() -> None:
    setting = next(s for s in SETTINGS if s.name == "both 1 ms")
    ours = latency.worker_command(setting, "postgresql://h/db", "trio")
    assert ours[1:4] == ["-m", "benchmarks.latency", "child-work"]
    assert ours[4:] == ["postgresql://h/db?application_name=river_bench_worker", "trio", "1", "on", "off"]
    go = latency.worker_command(setting, "postgresql://h/db", "trio", go_worker="/bin/go-worker")
    assert go == ["/bin/go-worker", "postgresql://h/db?application_name=river_bench_worker", "1"]
    assert set(latency.GO_SETTINGS) <= {s.name for s in SETTINGS}  # Go's rows name real settings
    assert all(not s.worker_async_claim_commit for s in SETTINGS if s.name in latency.GO_SETTINGS)


def test_report_shows_river_go_measured_in_the_run_instead_of_the_recorded_figure() -> None:
    row = {"jobs": 100, "done": 100, "p50_ms": 52.0, "p95_ms": 97.0, "p99_ms": 101.0, "max_ms": 110.0,
           "pg_cpu_us_per_job": 800.0}
    go_row = {**row, "p50_ms": 55.0, "p95_ms": 99.5, "pg_cpu_us_per_job": 1000.0}
    lines = report_lines({DEFAULTS: row, latency.GO_PREFIX + DEFAULTS: go_row}, load=0.3)
    assert any(line.split()[-10:-5] == ["55.0", "99.5", "101.0", "110.0", "1000.0"] for line in lines)
    (go_line,) = [line for line in lines if "defaults, this run" in line]
    assert "p50 55.0 ms, p95 99.5 ms, Postgres CPU per job 1000.0 us; ours at the defaults x0.80 of Go's" \
        in go_line
    assert not any("recorded" in line for line in lines)
    failed = report_lines({DEFAULTS: row, latency.GO_PREFIX + DEFAULTS: {"error": "no start"}}, load=0.3)
    assert any("recorded" in line for line in failed)  # a failed Go run falls back to the record


def test_options_take_the_go_worker_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIVER_GO_WORKER_BIN", "/opt/go-worker")
    assert parse_args([]).go_worker == "/opt/go-worker"
    assert parse_args(["--go-worker", "/x"]).go_worker == "/x"
    monkeypatch.delenv("RIVER_GO_WORKER_BIN")
    assert parse_args([]).go_worker is None


@pytest.mark.postgres
def test_latency_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    results = latency.main(["--seconds", "0.5", "--only", DEFAULTS, "--only", LOW_LATENCY])
    out = capsys.readouterr().out
    assert list(results) == [DEFAULTS, LOW_LATENCY]
    for name, r in results.items():
        assert "error" not in r, r
        if r["pg_cpu_us_per_job"] is not None:  # Postgres visible here: each side's share is found
            assert r["pg_cpu_inserter_us_per_job"] > 0 and r["pg_cpu_worker_us_per_job"] > 0
        assert r["jobs"] == r["done"] == 50
        assert 0 <= r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["max_ms"]
        row = re.search(rf"^   {re.escape(name)} +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+|-) +"
                        r"(x[\d.]+|-) +(\d+|-) +(\d+|-) +(\d+|-) +50/50$", out, re.M)
        assert row is not None, out
    assert re.search(r"^   target: low latency p95 [\d.]+ ms \[<= 10\]; Postgres CPU per job", out, re.M)
