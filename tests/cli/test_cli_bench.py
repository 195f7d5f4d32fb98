"""`river bench` through the real entry point, on Postgres and SQLite, for every driver; and the
measuring core (``river_tools.bench``) it runs on.

The benchmark runs are small (2,000 jobs, a 2 s duration): they check behaviour and the shape of
the figures, never the figures' size.
"""

from __future__ import annotations

import gc
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from river_db.migrator import Migrator
from river_protocol.client_core import EventKind
from river_protocol.golang.encoding_json import encode_args
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_sync.database import Database
from river_sync.events import Event
from river_tools import bench
from river_tools.bench import (
    BENCH_KIND,
    LATENCY_CLIENT,
    LATENCY_QUEUED,
    BenchmarkArgs,
    BenchPlan,
    BenchResult,
    Latency,
    Period,
    Tally,
)
from river_tools.cli import bench as cli_bench
from river_tools.cli.main import main

RIVER = Path(sys.executable).with_name("river")
PERIOD_LINE = re.compile(r"^bench: jobs worked \[ +\d+ \], inserted \[ +\d+ \], job/sec \[ +[\d.]+ \], "
                         r"total worked \[ +\d+ \] \[[\d.]+s\]$", re.M)
FINAL_LINE = re.compile(r"^bench: total jobs worked \[ +(\d+) \], total jobs inserted \[ +(\d+) \], "
                        r"overall job/sec \[ +([\d.]+) \], running [\d.]+s$", re.M)
DRIVERS = ("sync", "trio", "asyncio")


@dataclass
class Other:
    kind: ClassVar[str] = "not_a_benchmark"
    n: int = 0


# ---------------------------------------------------------------- databases


@pytest.fixture(scope="module")
def migrated_pg_url(module_pg_url: str) -> str:
    with Migrator(module_pg_url) as m:
        m.migrate_up()
    return module_pg_url


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "river.sqlite3"
    with Migrator(str(path)) as m:
        m.migrate_up()
    return path


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> Iterator[str]:
    """A migrated database without jobs."""
    if request.param == "postgres":
        pg: str = request.getfixturevalue("migrated_pg_url")
        with Database.from_url(pg, pool_size=1) as db:
            bench.delete_jobs(db)
        yield pg
    else:
        yield fresh_sqlite(tmp_path, sqlite_template)


def fresh_sqlite(tmp_path: Path, template: Path) -> str:
    """A migrated SQLite file without jobs, as a URL."""
    path = tmp_path / "river.sqlite3"
    path.write_bytes(template.read_bytes())
    return f"sqlite://{path}"


def states(url: str) -> dict[tuple[str, str], int]:
    """(kind, state) -> number of jobs."""
    with Database.from_url(url, pool_size=1) as db, db.executor(readonly=True) as ex:
        rows = ex.conn.execute("SELECT kind, state, count(*) FROM river_job GROUP BY kind, state").fetchall()
    return {(kind, str(state)): int(n) for kind, state, n in rows}


def insert_other(url: str, n: int) -> None:
    with Database.from_url(url, pool_size=1) as db:
        bench.fast_insert(db, n, Other)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["bench", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- the command


@pytest.mark.parametrize("driver", DRIVERS)
def test_burn_down_json(capsys: pytest.CaptureFixture[str], url: str, driver: str) -> None:
    code, out, err = run(capsys, "--database-url", url, "--num-total-jobs", "2000", "--json",
                         "--driver", driver)
    assert code == 0, err
    figures = json.loads(out)  # stdout is the JSON object alone
    assert figures["driver"] == driver
    assert figures["database"] == ("postgres" if url.startswith("postgres") else "sqlite")
    assert figures["mode"] == "burn-down"
    assert figures["jobs"] == 2000 and figures["inserted"] == 2000
    assert figures["jobs_per_sec"] > 0 and figures["seconds"] > 0
    assert figures["jobs_per_sec"] == pytest.approx(2000 / figures["seconds"], rel=0.01)
    latency = figures["latency_ms"]
    assert latency["source"] == LATENCY_QUEUED and latency["count"] == 2000
    assert 0 <= latency["p50"] <= latency["p95"] <= latency["p99"]
    assert figures["peak_rss_mb"] > 0
    assert figures["client_cpu_seconds"] > 0
    assert figures["client_cpu_us_per_job"] == pytest.approx(
        figures["client_cpu_seconds"] / 2000 * 1e6, rel=0.01, abs=0.01)
    assert figures["max_workers"] == 2000  # Go's bench default
    assert (figures["fetch_cooldown_ms"], figures["fetch_poll_interval_ms"]) == (2.0, 20.0)
    assert figures["migrated"] == []
    assert states(url) == {(BENCH_KIND, "completed"): 2000}
    assert "bench: inserted 2,000 jobs" in err  # notes go to stderr with --json
    assert PERIOD_LINE.search(err)


@pytest.mark.parametrize("driver", DRIVERS)
def test_duration_prints_period_and_final_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sqlite_template: Path, driver: str
) -> None:
    path = tmp_path / "river.sqlite3"
    path.write_bytes(sqlite_template.read_bytes())
    code, out, err = run(capsys, "--database-url", str(path), "--duration", "2s", "--driver", driver,
                         "--max-workers", "100")
    assert code == 0, err
    assert len(PERIOD_LINE.findall(out)) >= 1
    final = FINAL_LINE.search(out)
    assert final is not None, out
    worked, inserted = int(final.group(1)), int(final.group(2))
    assert 0 < worked <= inserted
    assert f"bench: latency {LATENCY_CLIENT}: p50 " in out
    assert f"{driver} driver on sqlite, continuous" in out
    completed = states(f"sqlite://{path}").get((BENCH_KIND, "completed"), 0)
    assert completed >= worked  # jobs running at the stop finish during it, uncounted


def test_json_in_duration_mode(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, sqlite_template: Path
) -> None:
    url = fresh_sqlite(tmp_path, sqlite_template)
    code, out, err = run(capsys, "--database-url", url, "--duration", "1s", "--json", "--max-workers", "50")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["mode"] == "continuous" and figures["jobs"] > 0
    assert figures["gc"] == "tuned" and gc.get_freeze_count() == 0  # restored once the run ended
    assert figures["latency_ms"]["source"] == LATENCY_CLIENT
    assert figures["latency_ms"]["count"] == figures["jobs"]


def test_refuses_a_database_holding_jobs_then_wipes_with_permission(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    insert_other(url, 7)
    before = states(url)
    assert before == {("not_a_benchmark", "available"): 7}

    code, out, err = run(capsys, "--database-url", url, "-n", "50")
    assert code == 1
    assert "holds 7 jobs" in err and "--wipe" in err
    assert states(url) == before  # untouched

    code, out, err = run(capsys, "--database-url", url, "-n", "50", "--wipe")
    assert code == 0, err
    assert "deleted 7 existing jobs" in out
    assert states(url) == {(BENCH_KIND, "completed"): 50}

    code, out, err = run(capsys, "--database-url", url, "-n", "20", "--yes")  # --yes says the same
    assert code == 0, err
    assert states(url) == {(BENCH_KIND, "completed"): 20}


def test_migrates_the_default_sqlite_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RIVER_DATABASE_URL", raising=False)
    code, out, err = run(capsys, "-n", "100", "--json")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["database"] == "sqlite" and figures["jobs"] == 100
    assert figures["migrated"] and figures["migrated"] == sorted(figures["migrated"])
    assert "the database was not fully migrated; applied migrations 001" in err
    assert (tmp_path / "river.sqlite3").exists()
    with Migrator(str(tmp_path / "river.sqlite3")) as m:
        assert m.validate().ok


def test_custom_schema_on_postgres(capsys: pytest.CaptureFixture[str], migrated_pg_url: str) -> None:
    import psycopg

    with psycopg.connect(migrated_pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA bench_custom")
    code, out, err = run(capsys, "--database-url", migrated_pg_url, "--schema", "bench_custom", "-n", "300",
                         "--json", "--driver", "trio")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["jobs"] == 300 and figures["migrated"]  # the schema had no River tables yet
    with psycopg.connect(migrated_pg_url, autocommit=True) as conn:
        rows = conn.execute("SELECT kind, state::text, count(*) FROM bench_custom.river_job GROUP BY 1, 2")
        assert rows.fetchall() == [(BENCH_KIND, "completed", 300)]


@pytest.mark.parametrize("argv, message", [
    (["--duration", "2s", "-n", "10"], "not allowed with argument"),
    (["--duration", "soon"], "invalid duration"),
    (["-n", "0"], "must be at least 1"),
    (["--max-workers", "0"], "must be between 1 and 10000"),
    (["--max-workers", "10001"], "must be between 1 and 10000"),
    (["--driver", "tokio"], "invalid choice"),
    (["--loop", "uvloop"], "--loop uvloop is an asyncio event loop; the sync driver has its own"),
    (["--driver", "trio", "--loop", "uvloop"], "the trio driver has its own"),
    (["--database-url", "sqlite://:memory:", "-n", "10"], "in-memory SQLite"),
])
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err


def test_bulk_insert_progress_bar_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sqlite_template: Path
) -> None:
    class FakeTTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    url = fresh_sqlite(tmp_path, sqlite_template)
    terminal = FakeTTY()
    monkeypatch.setattr(sys, "stderr", terminal)
    plan = BenchPlan(url=url, schema=None, database="sqlite", driver="sync", total_jobs=12_000)
    notes = io.StringIO()
    tally = cli_bench.prepare(plan, wipe=False, info=notes)
    assert tally.inserted == 12_000
    assert "bench: inserting jobs [" in terminal.getvalue()
    assert "100% 12000/12000" in terminal.getvalue()
    assert "bench: inserted 12,000 jobs" in notes.getvalue()
    assert states(url) == {(BENCH_KIND, "available"): 12_000}


def test_installed_command(tmp_path: Path, sqlite_template: Path) -> None:
    url = fresh_sqlite(tmp_path, sqlite_template)
    env = {k: v for k, v in os.environ.items() if k != "RIVER_DATABASE_URL"}
    proc = subprocess.run([str(RIVER), "bench", "--num-total-jobs", "500", "--json", "--database-url", url],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert figures["jobs"] == 500 and figures["jobs_per_sec"] > 0
    assert states(url) == {(BENCH_KIND, "completed"): 500}


@pytest.mark.parametrize("driver, signum", [("sync", signal.SIGINT), ("trio", signal.SIGTERM),
                                            ("asyncio", signal.SIGINT)])
def test_a_signal_ends_an_open_ended_run_with_its_summary(
    tmp_path: Path, sqlite_template: Path, driver: str, signum: int
) -> None:
    url = fresh_sqlite(tmp_path, sqlite_template)
    proc = subprocess.Popen(
        [str(RIVER), "bench", "--database-url", url, "--driver", driver, "--max-workers", "50"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # A shell's background jobs ignore SIGINT, and children inherit that: restore it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:  # no duration: it runs until signalled
            seen.append(line)
            if PERIOD_LINE.match(line.rstrip("\n")):
                break
        proc.send_signal(signum)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(seen) + rest
    assert proc.returncode == 0, err
    assert "bench: signal received; stopping" in out and f"{driver} driver on sqlite, continuous" in out
    final = FINAL_LINE.search(out)
    assert final is not None and int(final.group(1)) > 0, out


# ---------------------------------------------------------------- the measuring core


def test_benchmark_args_match_go() -> None:
    assert BenchmarkArgs.kind == "benchmark"
    assert encode_args(BenchmarkArgs(42)) == b'{"num":42}'
    assert BENCH_KIND in bench.bench_workers()
    queue = bench.bench_queues(123)["default"]
    assert queue.max_workers == 123
    assert (queue.fetch_cooldown, queue.fetch_poll_interval) == (timedelta(milliseconds=2),
                                                                 timedelta(milliseconds=20))


def test_percentile_and_latency() -> None:
    assert bench.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert bench.percentile([1.0, 2.0], 0.5) == 1.5
    assert bench.percentile([7.0], 0.99) == 7.0
    assert bench.percentile([0.0, 10.0], 0.95) == pytest.approx(9.5)
    assert bench.percentile([], 0.5) != bench.percentile([], 0.5)  # NaN
    lat = bench.latency_of([float(i) for i in range(100, 0, -1)], "src")
    assert lat == Latency(p50=50.5, p95=pytest.approx(95.05), p99=pytest.approx(99.01), count=100,
                          source="src")
    assert bench.latency_of([], "src") is None
    assert Latency(0.0015, 0.002, 0.01, 3, "s").to_json() == {
        "p50": 1.5, "p95": 2.0, "p99": 10.0, "count": 3, "source": "s"}


def test_peak_rss_is_measured() -> None:
    assert 1 < bench.peak_rss_mb() < 100_000


def test_tally_pairs_inserts_with_completions_in_either_order() -> None:
    tally = Tally(track_latency=True, backlog_min=10)
    tally.add_inserted([1, 2], at=0.0)
    tally.start(1.0)
    tally.add_finished(1, at=1.5)
    tally.add_finished(3, at=2.0)  # its insert_many has not returned yet
    tally.add_inserted([3], at=1.25)
    assert sorted(tally.latencies()) == [0.75, 1.5]
    assert (tally.worked, tally.inserted) == (2, 3)
    period = tally.take_period(3.0)
    assert period == Period(worked=2, inserted=1, seconds=2.0, total_worked=2)
    assert period.jobs_per_sec == 1.0
    tally.end(3.5)
    tally.add_finished(2, at=4.0)  # after the end: not part of the run
    assert tally.worked == 2
    assert tally.measured_seconds(3.5) == 1.0  # start to the last job worked, as Go measures


def test_tally_ignores_completions_before_start_and_takes_ages_in_burn_down() -> None:
    tally = Tally(track_latency=False)
    tally.add_bulk(5)
    tally.add_finished(1, at=0.5, age=0.1)
    assert tally.worked == 0
    tally.start(1.0)
    tally.add_finished(2, at=1.5, age=0.3)
    assert tally.latencies() == [0.3] and tally.worked == 1
    assert tally.measured_seconds(9.0) == 0.5
    assert Tally(track_latency=False).measured_seconds(2.0) == 0.0


def test_tally_measures_process_cpu_between_start_and_end() -> None:
    readings = iter([10.0, 12.5, 99.0])
    tally = Tally(track_latency=False, cpu_clock=lambda: next(readings))
    assert tally.cpu_seconds() == 0.0  # not started
    tally.start(0.0)
    tally.end(1.0)
    assert tally.cpu_seconds() == 2.5  # later readings are not part of the run
    assert tally.cpu_seconds() == 2.5
    running = Tally(track_latency=False, cpu_clock=iter([1.0, 1.75]).__next__)
    running.start(0.0)
    assert running.cpu_seconds() == 0.75  # still counting: up to now


def test_backlog_follows_max_workers_then_the_rate() -> None:
    tally = Tally(track_latency=True, backlog_min=100)
    assert tally.backlog_shortfall() == 100
    tally.add_inserted(list(range(60)), at=0.0)
    assert tally.backlog_shortfall() == 40
    tally.start(0.0)
    for i in range(50):
        tally.add_finished(i, at=0.5)
    tally.take_period(0.5)  # 100 jobs/s: a second of work is 100 jobs
    assert tally.backlog_shortfall() == 90
    tally.add_inserted(list(range(60, 1060)), at=0.6)
    for i in range(60, 1060):
        tally.add_finished(i, at=1.0)
    tally.take_period(1.0)  # 2,000 jobs/s now
    assert tally.backlog_shortfall() == 2000 - 10


def _event(kind: EventKind, state: JobState, job_id: int = 1, created_at: datetime | None = None) -> Event:
    job = JobRow(id=job_id, kind=BENCH_KIND, encoded_args=b"{}", state=state, created_at=created_at)
    return Event(kind=kind, job=job)


def test_on_event_counts_finished_jobs_only() -> None:
    tally = Tally(track_latency=False)
    tally.start(0.0)
    created = datetime.now(UTC) - timedelta(seconds=5)
    bench.on_event(tally, _event(EventKind.JOB_COMPLETED, JobState.COMPLETED, 1, created))
    bench.on_event(tally, _event(EventKind.JOB_FAILED, JobState.RETRYABLE, 2))  # will run again
    bench.on_event(tally, _event(EventKind.JOB_FAILED, JobState.DISCARDED, 3))
    bench.on_event(tally, _event(EventKind.JOB_CANCELLED, JobState.CANCELLED, 4))
    bench.on_event(tally, Event(kind=EventKind.QUEUE_PAUSED, queue="default"))
    assert tally.worked == 3
    [age] = tally.latencies()
    assert 5 <= age < 60


def test_a_collector_batch_counts_as_its_events_one_by_one() -> None:
    from river_sync.events import EventHub

    created = datetime.now(UTC) - timedelta(seconds=5)
    events = [_event(EventKind.JOB_COMPLETED, JobState.COMPLETED, 1, created),
              _event(EventKind.JOB_FAILED, JobState.RETRYABLE, 2),
              _event(EventKind.JOB_FAILED, JobState.DISCARDED, 3, created),
              Event(kind=EventKind.QUEUE_PAUSED, queue="default"),
              _event(EventKind.JOB_CANCELLED, JobState.CANCELLED, 4)]
    hub = EventHub()
    sub = hub.subscribe()
    hub.publish_all(events)
    batch = bench.drain(sub, sub.get(timeout=1))
    assert batch == events
    hub.publish_all(events[:2])
    sub.close()
    assert bench.drain(sub, sub.get(timeout=1)) == events[:2]  # stops at the end as well
    one_by_one, at_once = Tally(track_latency=False), Tally(track_latency=False)
    one_by_one.start(0.0)
    at_once.start(0.0)
    for event in events:
        bench.on_event(one_by_one, event)
    bench.on_events(at_once, batch)
    assert at_once.worked == one_by_one.worked == 3
    assert len(at_once.latencies()) == len(one_by_one.latencies()) == 2


def test_output_lines_and_json() -> None:
    assert bench.period_line(Period(worked=1500, inserted=0, seconds=1.0, total_worked=4500)) == (
        "bench: jobs worked [       1500 ], inserted [          0 ], job/sec [     1500.0 ], "
        "total worked [       4500 ] [1.00s]")
    result = BenchResult(driver="trio", database="postgres", mode="burn-down", jobs=2000, inserted=2000,
                         seconds=4.0, latency=Latency(0.1, 0.2, 0.3, 2000, LATENCY_QUEUED),
                         peak_rss_mb=80.25, max_workers=2000, cpu_seconds=0.125)
    lines = bench.final_lines(result)
    assert FINAL_LINE.match(lines[0]) and "overall job/sec [      500.0 ]" in lines[0]
    assert lines[1] == (f"bench: latency {LATENCY_QUEUED}: p50 100.0 ms, p95 200.0 ms, p99 300.0 ms "
                        "(2000 jobs)")
    assert lines[2] == "bench: client CPU 62.5 us/job (0.12s of process CPU for 2000 jobs, all threads)"
    assert lines[3] == "bench: trio driver on postgres, burn-down, max workers 2000, peak RSS 80 MB"
    data = result.to_json()
    assert data["client_cpu_us_per_job"] == 62.5 and data["client_cpu_seconds"] == 0.125
    assert data["jobs_per_sec"] == 500.0 and data["latency_ms"]["p99"] == 300.0
    assert data["peak_rss_mb"] == 80.2 or data["peak_rss_mb"] == 80.3
    empty = dataclasses_replace(result, jobs=0, seconds=0.0, latency=None, dropped_events=4)
    assert empty.jobs_per_sec == 0.0 and empty.to_json()["latency_ms"] is None
    assert empty.cpu_us_per_job is None and empty.to_json()["client_cpu_us_per_job"] is None
    assert not any("client CPU" in line for line in bench.final_lines(empty))
    assert "no job was both inserted and completed" in bench.final_lines(empty)[1]
    assert "4 completion events were dropped" in bench.final_lines(empty)[-1]


def dataclasses_replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)


def test_bench_plan_modes() -> None:
    common: dict[str, Any] = {"url": "sqlite://x", "schema": None, "database": "sqlite", "driver": "sync"}
    assert BenchPlan(**common, total_jobs=5).mode == "burn-down"
    assert BenchPlan(**common, duration=2.0).mode == "continuous"
    assert BenchPlan(**common).mode == "continuous"
    assert BenchPlan(**common).max_workers == 2000


def test_fast_insert_intents_batch_and_number_jobs() -> None:
    intents = list(bench.fast_insert_intents("postgres", 12, batch=5))
    assert [len(i.jobs) for i in intents] == [5, 5, 2]
    nums = [json.loads(p.encoded_args)["num"] for i in intents for p in i.jobs]
    assert nums == list(range(1, 13))
    assert {p.kind for i in intents for p in i.jobs} == {BENCH_KIND}


def test_database_helpers(url: str) -> None:
    with Database.from_url(url, pool_size=1) as db:
        assert bench.count_jobs(db) == 0
        calls: list[int] = []
        rate = bench.fast_insert(db, 30, batch=20, on_batch=calls.append)
        assert rate > 0 and calls == [20, 10]
        assert bench.count_jobs(db) == 30 and bench.count_completed(db) == 0
        with db.executor() as ex:
            ex.conn.execute("UPDATE river_job SET state = 'completed', finalized_at = created_at "
                            + ("+ interval '2 seconds'" if db.dialect.name == "postgres" else "")
                            + " WHERE id IN (SELECT id FROM river_job ORDER BY id LIMIT 4)")
        assert bench.count_completed(db) == 4
        assert bench.db_latencies(db) == [pytest.approx(2.0 if db.dialect.name == "postgres" else 0.0)] * 4
        assert bench.delete_jobs(db) == 30
        assert bench.count_jobs(db) == 0


# ---------------------------------------------------------------- --processes


@pytest.mark.parametrize("driver", DRIVERS)
def test_processes_compare_one_worker_process_with_n(
    capsys: pytest.CaptureFixture[str], url: str, driver: str
) -> None:
    code, out, err = run(capsys, "--database-url", url, "--num-total-jobs", "300", "--processes", "2",
                         "--json", "--driver", driver, "--max-workers", "50")
    assert code == 0, err
    figures = json.loads(out)
    assert (figures["driver"], figures["mode"]) == (driver, "processes")
    assert [r["processes"] for r in figures["runs"]] == [1, 2]
    for r in figures["runs"]:
        assert r["jobs"] == 300 and r["seconds"] > 0 and r["client_cpu_us_per_job"] > 0
        assert r["jobs_per_sec"] == pytest.approx(300 / r["seconds"], rel=0.01)
    assert figures["scaling"] == pytest.approx(
        figures["runs"][1]["jobs_per_sec"] / figures["runs"][0]["jobs_per_sec"], rel=0.01)
    assert states(url) == {(BENCH_KIND, "completed"): 300}  # the second load, all worked
    assert "bench: 2 process(es):" in err


def test_processes_need_a_burn_down(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, _, err = run(capsys, "--database-url", url, "--processes", "2", "--duration", "1s")
    assert code == 2 and "--processes needs --num-total-jobs" in err


def test_process_run_figures() -> None:
    from river_tools.bench_processes import ProcessRun, scaling

    one, two = ProcessRun(1, 1000, 2.0, 0.05), ProcessRun(2, 1000, 1.25, 0.06)
    assert (one.jobs_per_sec, one.client_cpu_us_per_job) == (500.0, 50.0)
    assert scaling([one, two]) == pytest.approx(1.6)
    assert two.to_json() == {"processes": 2, "jobs": 1000, "seconds": 1.25, "jobs_per_sec": 800.0,
                             "client_cpu_us_per_job": 60.0}
    assert scaling([ProcessRun(1, 0, 0.0, 0.0), two]) == 0.0


# ---------------------------------------------------------------- --driver asyncio in its own processes
# `river bench` with a sitecustomize first on the path, so in the bench process and in every worker
# process it starts: each anyio.run says which event loop module runs it, and at exit the process
# says how many trio modules it loaded (none, for asyncio).

PROBE = """
import atexit
import os
import sys

import anyio
import sniffio

real_run = anyio.run


def probed_run(fn, *args, **kwargs):
    async def probe(*inner):
        if sniffio.current_async_library() == "asyncio":
            import asyncio
            loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
            print(f"probe {os.getpid()}: running on {loop}", file=sys.stderr, flush=True)
        return await fn(*inner)
    return real_run(probe, *args, **kwargs)


def trio_modules():
    n = sum(1 for name in sys.modules if name == "trio" or name.startswith("trio."))
    print(f"probe {os.getpid()}: trio modules loaded: {n}", file=sys.stderr, flush=True)


anyio.run = probed_run
atexit.register(trio_modules)
"""


def probed_bench(probe_dir: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    (probe_dir / "sitecustomize.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "RIVER_DATABASE_URL"}
    env["PYTHONPATH"] = f"{probe_dir}:{Path(__file__).parents[2]}"
    return subprocess.run([str(RIVER), "bench", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def probe_lines(stderr: str, what: str) -> list[str]:
    """What each probed process said about ``what``, one entry per process."""
    return [line.split(": ", 1)[1] for line in stderr.splitlines()
            if line.startswith("probe ") and line.split(": ", 1)[1].startswith(what)]


def test_asyncio_driver_without_river_asyncio_fails_clearly_and_deletes_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setitem(sys.modules, "river_asyncio", None)  # what a missing package raises
    insert_other(url, 3)
    code, _, err = run(capsys, "--database-url", url, "-n", "10", "--driver", "asyncio", "--wipe")
    assert code == 1, err
    assert "river_asyncio is not installed: --driver asyncio needs it" in err
    assert states(url) == {("not_a_benchmark", "available"): 3}  # refused before the wipe


def test_client_class_imports_the_driver_package_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    import river_trio
    from river_tools.bench_async import DriverUnavailableError, client_class

    assert client_class("trio") is river_trio.Client
    monkeypatch.setitem(sys.modules, "river_asyncio", None)
    with pytest.raises(DriverUnavailableError, match="river_asyncio is not installed"):
        client_class("asyncio")
    with pytest.raises(ValueError, match="no async driver 'sync'"):
        client_class("sync")


@pytest.mark.parametrize("loop", ["default", "uvloop"])
def test_asyncio_driver_burns_down_in_an_asyncio_loop_without_trio(
    url: str, loop: str, tmp_path: Path
) -> None:
    proc = probed_bench(tmp_path, "--driver", "asyncio", "--loop", loop, "-n", "500", "--json",
                        "--max-workers", "50", "--database-url", url)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert (figures["driver"], figures["jobs"], figures["inserted"]) == ("asyncio", 500, 500)
    assert figures["database"] == ("postgres" if url.startswith("postgres") else "sqlite")
    assert figures["jobs_per_sec"] > 0 and figures["client_cpu_us_per_job"] > 0 and figures["peak_rss_mb"] > 0
    ran_on = "uvloop" if loop == "uvloop" else "asyncio"
    assert probe_lines(proc.stderr, "running on") == [f"running on {ran_on}"], proc.stderr
    assert probe_lines(proc.stderr, "trio modules") == ["trio modules loaded: 0"], proc.stderr
    assert states(url) == {(BENCH_KIND, "completed"): 500}


def test_asyncio_driver_processes_load_no_trio(tmp_path: Path, sqlite_template: Path) -> None:
    url = fresh_sqlite(tmp_path, sqlite_template)
    proc = probed_bench(tmp_path, "--driver", "asyncio", "--loop", "uvloop", "-n", "200", "--processes", "2",
                        "--json", "--max-workers", "20", "--database-url", url, timeout=180)
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert (figures["driver"], figures["mode"]) == ("asyncio", "processes")
    assert [(r["processes"], r["jobs"]) for r in figures["runs"]] == [(1, 200), (2, 200)]
    # The supervisor and the 1 + 2 worker processes it started; each worker ran its client on uvloop.
    assert probe_lines(proc.stderr, "running on") == ["running on uvloop"] * 3, proc.stderr
    assert probe_lines(proc.stderr, "trio modules") == ["trio modules loaded: 0"] * 4, proc.stderr


def test_worker_command_passes_the_loop() -> None:
    from river_tools.bench_processes import worker_command

    plan = BenchPlan(url="sqlite://x.db", schema=None, database="sqlite", driver="asyncio", loop="uvloop")
    argv = worker_command(plan)
    assert argv[argv.index("--driver") + 1] == "asyncio" and argv[-2:] == ["--loop", "uvloop"]


def test_benchmark_rounds_include_asyncio_once_river_asyncio_is_importable(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import rounds

    monkeypatch.setattr(rounds.importlib.util, "find_spec", lambda name: None)
    assert not rounds.asyncio_available()
    monkeypatch.undo()
    assert rounds.asyncio_available()  # the real river_asyncio of this checkout
