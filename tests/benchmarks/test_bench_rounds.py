"""``python -m benchmarks rounds``: the machinery, not the speed.

Every run starts from a fresh copy of a migrated template; the systems' order rotates;
the load average is read (and waited on) before each round; the table carries medians,
spreads, ratios and load marks. The end-to-end run is tiny (200 jobs, one round).
"""

from __future__ import annotations

import argparse
import io
import re
import sqlite3
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from benchmarks import rounds
from benchmarks.fresh_state import FreshDatabases, wait_for_quiet
from benchmarks.rounds import Sample, System, parse_args, rotated, table_lines
from benchmarks.scratch import Scratch, pg_admin_url

SPREAD = r"[\d,.]+-[\d,.]+"


@pytest.fixture
def fresh() -> Iterator[FreshDatabases]:
    scratch = Scratch()
    try:
        yield FreshDatabases(scratch)
    finally:
        scratch.close()


def _databases_named(prefix: str) -> set[str]:
    with psycopg.connect(pg_admin_url(), autocommit=True) as admin:
        rows = admin.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (prefix + "%",))
        return {r[0] for r in rows.fetchall()}


# ---------------------------------------------------------------- the same state for every run


@pytest.mark.postgres
def test_postgres_copies_are_migrated_empty_independent_and_unvacuumed(fresh: FreshDatabases) -> None:
    first, second = fresh.postgres("one"), fresh.postgres("two")
    assert first != second
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute("INSERT INTO river_job (args, kind, max_attempts) VALUES ('{}', 'k', 1)")
        options = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'river_job'").fetchone()
        assert options is not None and "autovacuum_enabled=off" in options[0]
        toast = conn.execute("SELECT t.reloptions FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid "
                             "WHERE c.relname = 'river_job'").fetchone()
        assert toast is not None and "autovacuum_enabled=off" in toast[0]
        # A new database starts with no statistics: nothing carried from earlier runs.
        stats = conn.execute("SELECT n_dead_tup, last_autovacuum, last_autoanalyze FROM pg_stat_user_tables "
                             "WHERE relname = 'river_job'").fetchone()
        assert stats == (0, None, None)
    with psycopg.connect(second) as conn:
        assert conn.execute("SELECT count(*) FROM river_job").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM river_migration").fetchone()[0] > 0  # type: ignore[index]
    fresh.release(first)
    names = {url.rsplit("/", 1)[1] for url in (first, second)}
    assert names & _databases_named("river_bench_") == {second.rsplit("/", 1)[1]}


def test_sqlite_copies_are_migrated_empty_and_independent(fresh: FreshDatabases) -> None:
    first, second = fresh.sqlite("one"), fresh.sqlite("two")
    path_one, path_two = first.removeprefix("sqlite:///"), second.removeprefix("sqlite:///")
    with sqlite3.connect(path_one) as conn:  # the stdlib's SQLite may lack jsonb(): no river_job insert
        conn.execute("CREATE TABLE marker (x)")
    conn.close()
    with sqlite3.connect(path_two) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'marker'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM river_job").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM river_migration").fetchone()[0] > 0
    conn.close()
    fresh.release(first)
    import os

    assert not os.path.exists(path_one) and os.path.exists(path_two)


# ---------------------------------------------------------------- order and load


def test_rotated_is_a_latin_square() -> None:
    items = ["go", "sync", "trio", "pgqueuer"]
    orders = [rotated(items, r) for r in range(1, len(items) + 1)]
    assert orders[0] == items
    for position in range(len(items)):
        assert sorted(order[position] for order in orders) == sorted(items)
    assert rotated(items, len(items) + 1) == items  # the cycle repeats
    assert rotated([], 3) == []


def _fake_clock(loads: list[float]) -> tuple[dict[str, float], object, object, object]:
    state = {"now": 0.0}

    def loadavg() -> tuple[float, float, float]:
        return (loads.pop(0) if len(loads) > 1 else loads[0], 0.0, 0.0)

    def sleep(seconds: float) -> None:
        state["now"] += seconds

    return state, loadavg, sleep, lambda: state["now"]


def test_wait_for_quiet_returns_at_once_on_a_quiet_machine() -> None:
    _, loadavg, sleep, clock = _fake_clock([0.3])
    assert wait_for_quiet(loadavg=loadavg, sleep=sleep, clock=clock) == (0.3, 0.0)  # type: ignore[arg-type]


def test_wait_for_quiet_polls_until_the_load_falls() -> None:
    _, loadavg, sleep, clock = _fake_clock([1.8, 1.4, 0.9, 0.2])
    load, waited = wait_for_quiet(poll=5.0, max_wait=120.0, loadavg=loadavg, sleep=sleep,  # type: ignore[arg-type]
                                  clock=clock)
    assert (load, waited) == (0.9, 10.0)


def test_wait_for_quiet_gives_up_after_max_wait() -> None:
    _, loadavg, sleep, clock = _fake_clock([3.0])
    load, waited = wait_for_quiet(poll=5.0, max_wait=20.0, loadavg=loadavg, sleep=sleep,  # type: ignore[arg-type]
                                  clock=clock)
    assert load == 3.0 and waited == 20.0


# ---------------------------------------------------------------- the table


def _system(name: str, *runs: tuple[Any, ...]) -> System:
    """Runs of (load, jobs/s, client CPU, peak RSS[, server CPU]); no server CPU, no key."""
    s = System(name, fresh=lambda: "", run=lambda url: {})
    for number, (load, rate, cpu, rss, *server) in enumerate(runs, 1):
        result = {"jobs_per_sec": rate, "client_cpu_us_per_job": cpu, "peak_rss_mb": rss}
        if server:
            result["server_cpu_us_per_job"] = server[0]
        s.samples.append(Sample(number, load, result))
    return s


def test_table_has_medians_spreads_ratios_to_go_and_load_marks() -> None:
    go = _system("River Go / postgres",
                 (0.2, 10_000, 30.0, 40, 50.0), (1.5, 12_000, 32.0, 41, 40.0), (0.4, 11_000, 31.0, 39, 45.0))
    sync = _system("river_sync / postgres",
                   (0.2, 9_000, 45.0, 60, 36.0), (1.5, 5_000, 60.0, 70, 44.0), (0.4, 11_000, 40.0, 65, 40.5))
    failing = System("river_trio / postgres", fresh=lambda: "", run=lambda url: {})
    failing.samples.append(Sample(1, 0.1, {"error": "exit 1: boom"}))
    header, go_line, sync_line, trio_line, error_line = table_lines([go, sync, failing])
    assert "jobs/s" in header and "min-max" in header and "x Go" in header and "peak RSS MB" in header
    assert "PG CPU us/job" in header
    assert go_line.split()[4:7] == ["11,000", "10,000-12,000", "x1.00"]
    assert go_line.split()[10:13] == ["45.0", "40.0-50.0", "x1.00"]
    fields = sync_line.split()
    assert fields[3:9] == ["9,000", "5,000-11,000", "x0.82", "45.0", "40.0-60.0", "x1.45"]
    assert fields[9:13] == ["40.5", "36.0-44.0", "x0.90", "70"]  # Postgres CPU per job, then RSS
    assert fields[13:] == ["r1:9,000", "r2:5,000*", "r3:11,000"]  # round 2 ran at load >= 1
    assert trio_line.split()[3:] == ["-"] * 10
    assert error_line.strip() == "failed: exit 1: boom"


def test_table_shows_no_server_cpu_where_none_was_measured() -> None:
    # pgqueuer's runs carry no key; a remote server's runs carry None; Go's ran with a local one.
    go = _system("River Go / postgres", (0.2, 10_000, 30.0, 40, 50.0))
    pgqueuer = _system("pgqueuer batch 100", (0.2, 8_000, 70.0, 90))
    remote = _system("river_trio / postgres", (0.2, 9_000, 40.0, 60, None))
    _, go_line, pgqueuer_line, remote_line = table_lines([go, pgqueuer, remote])
    assert go_line.split()[10:13] == ["50.0", "50.0-50.0", "x1.00"]
    for line in (pgqueuer_line, remote_line):
        fields = line.split()
        assert fields[9:12] == ["-", "-", "-"] and fields[3] != "-", line  # the rest still shown
    out = io.StringIO()
    rounds.report([go, remote], [(1, 0.2, 0.0)], out=out)
    assert "river_trio / River Go: jobs/s x0.90 [>= x1.00]; client CPU per job x1.33 [<= x1.00]; " \
           "Postgres CPU per job -" in out.getvalue()


def test_paired_ratios_divide_by_go_in_the_same_round_only() -> None:
    # Round 2 ran slower for both (host noise): paired, sync is x0.90 in every round it shares.
    go = _system("River Go / postgres",
                 (0.2, 10_000, 30.0, 40, 50.0), (0.2, 5_000, 60.0, 40, 100.0), (0.2, 12_000, 25.0, 40, 40.0))
    sync = _system("river_sync / postgres",
                   (0.2, 9_000, 33.0, 60, 45.0), (0.2, 4_500, 66.0, 60, 90.0))
    sync.samples.append(Sample(3, 0.2, {"error": "exit 1: boom"}))  # a failed run pairs with nothing
    assert rounds.paired_ratios(sync, go, "jobs_per_sec") == pytest.approx([0.9, 0.9])
    assert rounds.paired_ratios(sync, go, "client_cpu_us_per_job") == pytest.approx([1.1, 1.1])
    (line,) = rounds.paired_lines([go, sync])
    assert line.split(maxsplit=3)[3] == ("jobs/s x0.90 (0.90-0.90); client CPU x1.10 (1.10-1.10); "
                                         "Postgres CPU x0.90 (0.90-0.90); client+Postgres CPU -")
    # The medians alone say otherwise: 6,750 against 10,000 jobs/s.
    assert table_lines([go, sync])[2].split()[5] == "x0.68"


def test_paired_ratios_need_go_and_skip_what_was_not_measured() -> None:
    sync = _system("river_sync / postgres", (0.2, 9_000, 33.0, 60))
    assert rounds.paired_lines([sync]) == []  # no Go in the run
    go = _system("River Go / postgres", (0.2, 10_000, 30.0, 40, 50.0))
    (line,) = rounds.paired_lines([go, sync])
    assert line.endswith("Postgres CPU -; client+Postgres CPU -")  # sync's run carried no server figure
    out = io.StringIO()
    rounds.report([go, sync], [(1, 0.2, 0.0)], out=out)
    assert "== ratios to River Go within each round" in out.getvalue()
    out = io.StringIO()
    rounds.report([sync], [(1, 0.2, 0.0)], out=out)
    assert "within each round" not in out.getvalue()


def test_whole_cpu_is_client_plus_server_on_postgres_and_the_client_alone_on_sqlite() -> None:
    pg = rounds.with_whole_cpu({"client_cpu_us_per_job": 20.0, "server_cpu_us_per_job": 40.5},
                               "postgresql://h/db")
    assert pg["whole_cpu_us_per_job"] == pytest.approx(60.5)
    assert pg["client_cpu_us_per_job"] == 20.0  # the rest kept
    unmeasured = {"client_cpu_us_per_job": 20.0, "server_cpu_us_per_job": None}
    assert rounds.with_whole_cpu(unmeasured, "postgres://h/db")["whole_cpu_us_per_job"] is None
    lite = rounds.with_whole_cpu({"client_cpu_us_per_job": 33.0}, "sqlite:///tmp/x.sqlite3")
    assert lite["whole_cpu_us_per_job"] == 33.0  # SQLite's engine is inside the client process
    assert rounds.with_whole_cpu({"error": "exit 1"}, "sqlite:///x")["whole_cpu_us_per_job"] is None


def test_sqlite_target_compares_the_client_and_the_whole_cpu_with_postgres() -> None:
    def whole(name: str, client: float, server: float | None) -> System:
        s = System(name, fresh=lambda: "", run=lambda url: {})
        url = "sqlite:///x" if name.endswith("sqlite") else "postgresql://h/db"
        s.samples.append(Sample(1, 0.2, rounds.with_whole_cpu(
            {"jobs_per_sec": 20_000.0, "client_cpu_us_per_job": client, "server_cpu_us_per_job": server,
             "peak_rss_mb": 50.0}, url)))
        return s

    go = whole("River Go / postgres", 18.0, 40.0)
    pg, lite = whole("river_sync / postgres", 20.0, 40.0), whole("river_sync / sqlite", 30.0, None)
    out = io.StringIO()
    rounds.report([go, pg, lite], [(1, 0.2, 0.0)], out=out)
    text = out.getvalue()
    assert "river_sync sqlite: client CPU per job x1.50 of postgres's [<= x1.00]; x0.50 of postgres's " \
           "client+server CPU" in text, text
    assert "client+Postgres CPU per job x1.03" in text, text  # (20 + 40) / (18 + 40)
    assert "client+Postgres CPU x1.03 (1.03-1.03)" in text, text


# ---------------------------------------------------------------- options


def test_options(monkeypatch: pytest.MonkeyPatch) -> None:
    quick = parse_args(["--quick", "--systems", "sync,pgqueuer", "--no-peers"])
    assert (quick.jobs, quick.rounds, quick.load_wait, quick.systems) == (2_000, 1, 0.0, ["sync"])
    full = parse_args(["-n", "300", "--rounds", "5", "--river-go", "/path/to/river"])
    assert (full.jobs, full.rounds, full.load_wait) == (300, 5, 120.0)
    assert ("asyncio" in full.systems) == rounds.asyncio_available()
    assert {"go", "sync", "trio", "pgqueuer"} <= set(full.systems)
    monkeypatch.delenv("RIVER_GO_BIN", raising=False)
    assert "go" not in parse_args(["--systems", "go,sync"]).systems  # no binary, no Go
    with pytest.raises(SystemExit):
        parse_args(["--systems", "sync,celery"])
    with pytest.raises(SystemExit):
        parse_args(["--rounds", "0"])


def test_selection_by_database_and_system() -> None:
    opts = argparse.Namespace(systems=["go", "sync", "trio"], only="sqlite", no_sqlite=False,
                              river_go="/bin/true", jobs=10, max_workers=10)
    names = [s.name for s in rounds.systems(opts, FreshDatabases(Scratch()))]
    assert names == ["river_sync / sqlite", "river_trio / sqlite"]  # Go and pgqueuer are Postgres only
    opts.only, opts.no_sqlite = None, True
    names = [s.name for s in rounds.systems(opts, FreshDatabases(Scratch()))]
    assert names == ["River Go / postgres", "river_sync / postgres", "river_trio / postgres"]


# ---------------------------------------------------------------- end to end


@pytest.mark.postgres
def test_rounds_end_to_end(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The databases this run makes, by name: another test running beside it (the latency
    # bench's) makes databases with the same prefixes, so a before/after listing is not ours.
    made: list[str] = []
    real_postgres = Scratch.postgres

    def recording(self: Scratch, tag: str, **kwargs: Any) -> str:
        url: str = real_postgres(self, tag, **kwargs)
        made.append(urlsplit(url).path.lstrip("/"))
        return url

    monkeypatch.setattr(Scratch, "postgres", recording)
    measured = rounds.main(["-n", "200", "--rounds", "1", "--systems", "sync", "--load-wait", "0",
                            "--max-workers", "50"])
    out = capsys.readouterr().out
    assert [s.name for s in measured] == ["river_sync / postgres", "river_sync / sqlite"]
    assert all(len(s.rates) == 1 and not s.errors for s in measured), out
    assert re.search(r"^   round 1: load average \d+\.\d\d after waiting \d+ s", out, re.M)
    assert re.search(r"^   load average \(1 min\) before each round: r1 \d+\.\d\d\*?$", out, re.M)
    table = out[out.index("== medians"):]
    for name in ("river_sync / postgres", "river_sync / sqlite"):
        server = rf"([\d.]+) +({SPREAD}) +-" if name.endswith("postgres") else "- +- +-"  # SQLite: none
        row = re.search(rf"^   {re.escape(name)} +([\d,]+) +({SPREAD}) +- +([\d.]+) +({SPREAD}) +- +"
                        rf"{server} +(\d+) +r1:[\d,]+\*?$", table, re.M)
        assert row is not None, table
    assert re.search(r"^   round 1: river_sync / postgres: [\d,]+ jobs/s, [\d.]+ us/job, "
                     r"Postgres [\d.]+ us/job$", out, re.M), out
    assert "River Go not measured in this run" in out
    assert any(name.startswith("river_bench_template_") for name in made), made
    assert any(name.startswith("river_bench_river_sync_") for name in made), made
    left = {name for name in made if _databases_named(name)}
    assert left == set()  # every copy and template dropped


@pytest.mark.postgres
def test_copies_are_made_without_checkpoint_when_the_role_may_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from urllib.parse import urlsplit, urlunsplit

    role, admin_url = "river_bench_role_" + uuid.uuid4().hex[:8], pg_admin_url()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CREATEDB')
    try:
        parts = urlsplit(admin_url)
        netloc = f"{role}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        monkeypatch.setenv("RIVER_BENCH_DATABASE_URL", urlunsplit((parts.scheme, netloc, parts.path, "", "")))
        scratch = Scratch()
        try:
            fresh = FreshDatabases(scratch)
            url = fresh.postgres("unprivileged")
            assert fresh.checkpoint_refused is not None and "CHECKPOINT" in fresh.checkpoint_refused
            with psycopg.connect(url) as conn:
                assert conn.execute("SELECT count(*) FROM river_job").fetchone() == (0,)
        finally:
            scratch.close()
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_run_rounds_rotates_the_order_and_gives_each_run_its_own_database() -> None:
    calls: list[tuple[str, str]] = []
    made: list[str] = []

    class Databases:
        def release(self, url: str) -> None:
            calls.append(("release", url))

    def system(name: str) -> System:
        def fresh() -> str:
            made.append(f"{name}#{len(made)}")
            return made[-1]

        def run(url: str) -> dict[str, float]:
            calls.append(("run", url))
            return {"jobs_per_sec": 1000.0, "client_cpu_us_per_job": 10.0, "peak_rss_mb": 50.0}

        return System(name, fresh, run)

    systems = [system("a"), system("b"), system("c")]
    out = io.StringIO()
    loads = rounds.run_rounds(systems, Databases(), argparse.Namespace(rounds=3, load_wait=0.0),  # type: ignore[arg-type]
                              out=out)
    assert [n for n, _, _ in loads] == [1, 2, 3]
    ran = [url.split("#")[0] for kind, url in calls if kind == "run"]
    assert ran == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    # Each run on a database of its own, released right after it.
    assert calls == [(kind, url) for url in made for kind in ("run", "release")]
    assert all([s.round for s in x.samples] == [1, 2, 3] for x in systems)
    assert all(s.load == loads[s.round - 1][1] for x in systems for s in x.samples)
    assert out.getvalue().count("load average") == 3
