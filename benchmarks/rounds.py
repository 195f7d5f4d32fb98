"""Burn-down of the same no-op load by each system, over interleaved rounds (issue 19's table).

``python -m benchmarks rounds [-n N] [--rounds R] [--max-workers N] [--only postgres|sqlite]
[--systems go,sync,trio,asyncio,pgqueuer] [--no-peers] [--load-wait S] [--quick]``

Each round runs every system once, each in its own process: ``river bench -n N
--json`` for river_sync, river_trio and river_asyncio when it is installed (the
CLI a user runs, as River Go's ``river bench``; its worker process tunes the
garbage collector as ``river work`` does), on Postgres and on SQLite; River Go's
own bench; and pgqueuer at the configurations found fastest here (batch 500 with
1,000 concurrent tasks, batch 1,000 with 2,000, batch 100; "pgqueuer best" is
whichever has the best median in the run) and at its default batch.

Every run starts from the same database state: a database (or SQLite file) of its
own, copied from a migrated template just before it, after a CHECKPOINT, with
autovacuum off, and dropped after it. ``benchmarks.fresh_state`` records the
drift this removes (dead tuples and statistics carried between rounds,
autovacuum and checkpoints landing in some rounds only, a fixed order of
systems). The order of systems rotates by one place per round, so order effects
spread evenly over the systems. Before each round the 1-minute load average is
read; at 1 or more the round waits (up to ``--load-wait``, default 120 s) for it
to fall, and runs anyway after that, its figures marked ``*`` in the table.

Printed, never asserted: each system's median jobs/s and client CPU per job (the
worker process's CPU time over jobs) with their spread (min-max) over the
rounds, its peak RSS, the ratios to River Go's medians, and issue 19's targets.
"PG CPU us/job" is the Postgres server's CPU per job in the work phase: the CPU
of every local process named ``postgres*`` (backends, WAL writer, checkpointer...;
``benchmarks.server_cpu``) from the start of the work (the line announcing the
burn-down for ours, the first progress line for River Go) to the run's end. It
needs the server on this machine ("-" otherwise, and for SQLite and pgqueuer); on
a small machine the server and the client share the cores, so it explains jobs/s.
Below the table, each system's ratios to River Go taken within each round (its
figure over Go's in the same round), as a median and min-max over the rounds: a
host that drifts between rounds (a virtual machine's neighbours) moves both sides
of such a ratio together, where it moves each median on its own.

River Go joins the rounds when ``RIVER_GO_BIN`` (or ``--river-go``) names a
River Go CLI binary, built from River's own source (``go build ./cmd/river`` in
River's repository at v0.43.0); nothing of it is in this repository. Its
``river bench -n N`` inserts, then works the jobs with 2,000 workers, cooldown
2 ms and poll 20 ms, as ours does; its jobs/s is its own "overall job/sec", and
its CPU is the process's from its first progress line (printed as its client
starts, after the inserts) to its exit. Without the binary, the figure
recorded in issue 19 is named instead, marked as such.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from benchmarks.fresh_state import LOAD_LIMIT, LOAD_WAIT, FreshDatabases, wait_for_quiet
from benchmarks.scratch import Scratch
from benchmarks.server_cpu import ServerCpu, process_cpu
from benchmarks.sync_driver import _run_child
from river_db.urls import dialect_of_url

T = TypeVar("T")

RIVER_GO_RECORDED = 17_510  # jobs/s, issue 19's measurement of River Go v0.43 on this machine
RIVER_GO_RECORDED_CPU = 31.0  # its client CPU, us/job
SQLITE_RECORDED = {"sync": 12_736, "trio": 13_826}  # jobs/s, the top of issue 19's SQLite ranges
RSS_TARGET_MB = 100.0  # at 2,000 workers
PGQUEUER_CONFIGS = {  # label -> (batch_size, max_concurrent_tasks)
    "pgqueuer batch 500, 1,000 tasks": (500, 1000),
    "pgqueuer batch 1,000, 2,000 tasks": (1000, 2000),
    "pgqueuer batch 100": (100, None),
    "pgqueuer default (batch 10)": (10, None),
}
PGQUEUER_DEFAULT = "pgqueuer default (batch 10)"  # the others compete for "best"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Sample:
    """One run of one system: its result and the load average read before its round."""

    round: int
    load: float
    result: dict[str, Any]

    @property
    def loaded(self) -> bool:
        return self.load >= LOAD_LIMIT

    @property
    def ok(self) -> bool:
        return "error" not in self.result


@dataclass
class System:
    """A system measured in the rounds: ``fresh()`` makes the database a run starts from
    (a copy of a migrated template), ``run(url)`` measures one run on it."""

    name: str
    fresh: Callable[[], str]
    run: Callable[[str], dict[str, Any]]
    samples: list[Sample] = field(default_factory=list)

    def _values(self, key: str) -> list[float]:
        return [float(s.result[key]) for s in self.samples if s.ok and s.result.get(key) is not None]

    @property
    def rates(self) -> list[float]:
        return self._values("jobs_per_sec")

    @property
    def cpus(self) -> list[float]:
        return self._values("client_cpu_us_per_job")

    @property
    def server_cpus(self) -> list[float]:
        return self._values("server_cpu_us_per_job")

    @property
    def whole_cpus(self) -> list[float]:
        return self._values("whole_cpu_us_per_job")

    @property
    def rss(self) -> list[float]:
        return self._values("peak_rss_mb")

    @property
    def errors(self) -> list[str]:
        return [str(s.result["error"]) for s in self.samples if not s.ok]

    @property
    def rate(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    @property
    def cpu(self) -> float | None:
        return statistics.median(self.cpus) if self.cpus else None

    @property
    def server_cpu(self) -> float | None:
        return statistics.median(self.server_cpus) if self.server_cpus else None

    @property
    def whole_cpu(self) -> float | None:
        return statistics.median(self.whole_cpus) if self.whole_cpus else None

    @property
    def peak_rss(self) -> float | None:
        return max(self.rss) if self.rss else None


def rotated(items: Sequence[T], round_number: int) -> list[T]:
    """``items`` in round ``round_number``'s order (1-based): rotated by one place per round,
    a Latin square, so over ``len(items)`` rounds each item runs once in every position and
    follows every other one once."""
    if not items:
        return []
    k = (round_number - 1) % len(items)
    return [*items[k:], *items[:k]]


def with_whole_cpu(result: dict[str, Any], url: str) -> dict[str, Any]:
    """``result`` with ``whole_cpu_us_per_job``: all the CPU a job cost on this machine, the
    client's and the database's. On SQLite the engine runs inside the client process, so its
    client CPU is already the whole; on Postgres it is the client's plus the server's, and
    unknown (None) when the server's was not measured. Comparing SQLite's client CPU with
    Postgres's client CPU alone charges SQLite for the work Postgres's server does."""
    client, server = result.get("client_cpu_us_per_job"), result.get("server_cpu_us_per_job")
    if client is None:
        whole = None
    elif dialect_of_url(url) == "postgres":
        whole = None if server is None else float(client) + float(server)
    else:
        whole = float(client)
    return {**result, "whole_cpu_us_per_job": whole}


def river_bench(url: str, n: int, driver: str, max_workers: int, timeout: float = 600.0,
                server: Callable[[], ServerCpu] = ServerCpu) -> dict[str, Any]:
    """One ``river bench -n N --json``: its JSON figures, plus the Postgres server's CPU per
    job from its work phase (from the line announcing the burn-down, printed after the
    inserts as the client starts, to its exit) when the database is Postgres."""
    cmd = [sys.executable, "-m", "river_tools.cli", "bench", "--database-url", url, "-n", str(n),
           "--json", "--wipe", "--driver", driver, "--max-workers", str(max_workers)]
    measure = server() if dialect_of_url(url) == "postgres" else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    tail: deque[str] = deque(maxlen=50)

    def read_stderr(stream: TextIO) -> None:  # progress and notes; an unread pipe would stall it
        for line in stream:
            tail.append(line.strip())
            if measure is not None and line.startswith("bench: ") and "burn-down until" in line:
                measure.start()

    reader = threading.Thread(target=read_stderr, args=(proc.stderr,), name="bench-stderr", daemon=True)
    reader.start()
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    killer = threading.Timer(timeout, kill)
    killer.start()
    try:
        stdout = proc.stdout.read()
        proc.wait()
        reader.join()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        killer.cancel()
        seconds = measure.stop() if measure is not None else None
    if timed_out.is_set():
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        last = [line for line in tail if line] or stdout.strip().splitlines()
        said = [line for line in last[-2:] if "error" in line.lower()] or last[-2:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(said[:2])}
    result: dict[str, Any] = json.loads(lines[-1])
    result["server_cpu_us_per_job"] = None if seconds is None else seconds / n * 1e6
    return with_whole_cpu(result, url)


_GO_OVERALL = re.compile(r"overall job/sec \[\s*([0-9.]+)\s*\]")


def river_go_bench(binary: str, url: str, n: int, timeout: float = 600.0,
                   server: Callable[[], ServerCpu] = ServerCpu) -> dict[str, Any]:
    """One ``river bench -n N`` of River Go: its own jobs/s, and its CPU and the Postgres
    server's while it works."""
    measure = server()
    # One stream: an unread stderr pipe would stall Go's logger once full, and the bench with it.
    proc = subprocess.Popen([binary, "bench", "--database-url", url, "--num-total-jobs", str(n)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started: float | None = None
    rate: float | None = None
    tail: deque[str] = deque(maxlen=50)
    assert proc.stdout is not None
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        for line in proc.stdout:
            tail.append(line.strip())
            if started is None and line.startswith("bench: jobs worked"):
                started = process_cpu(proc.pid)
                measure.start()
            match = _GO_OVERALL.search(line)
            if match:
                rate = float(match.group(1))
    except BaseException:
        proc.kill()
        proc.wait()
        measure.stop()
        raise
    finally:
        killer.cancel()
    _, status, usage = os.wait4(proc.pid, 0)  # its rusage: Popen.wait would discard it
    seconds = measure.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or rate is None or started is None:
        # Go's CLI prints its error and then its usage: the error line, else the last lines.
        said = [line for line in tail if "error" in line.lower()] or list(tail)[-2:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(said[:2])}
    cpu = usage.ru_utime + usage.ru_stime - started
    return with_whole_cpu({"jobs_per_sec": rate, "client_cpu_us_per_job": cpu / n * 1e6,
                           "server_cpu_us_per_job": None if seconds is None else seconds / n * 1e6,
                           "peak_rss_mb": usage.ru_maxrss / 1024}, url)  # KiB on Linux


def asyncio_available() -> bool:
    """Whether the asyncio client is installed here (``river bench --driver asyncio`` runs it)."""
    return importlib.util.find_spec("river_asyncio") is not None


def _databases(opts: argparse.Namespace) -> list[str]:
    if opts.only:
        return [opts.only]
    return ["postgres"] if opts.no_sqlite else ["postgres", "sqlite"]


def systems(opts: argparse.Namespace, fresh: FreshDatabases) -> list[System]:
    """What ``opts`` selects, each with how its runs get a fresh database."""
    out: list[System] = []
    chosen = set(opts.systems)
    databases = _databases(opts)
    if "go" in chosen and opts.river_go and "postgres" in databases:
        # A copy of the template our migrations made: Go works on our schema (and resets
        # its table itself, TRUNCATE and VACUUM FULL, as it always does).
        out.append(System("River Go / postgres", lambda: fresh.postgres("river_go"),
                          lambda url: river_go_bench(opts.river_go, url, opts.jobs)))
    drivers = [d for d in ("sync", "trio", "asyncio") if d in chosen]
    for database in databases:
        for driver in drivers:
            def make(db: str = database, d: str = driver) -> str:
                url: str = getattr(fresh, db)(f"river_{d}")
                return url

            def run(url: str, d: str = driver) -> dict[str, Any]:
                return river_bench(url, opts.jobs, d, opts.max_workers)

            out.append(System(f"river_{driver} / {database}", make, run))
    if "pgqueuer" in chosen and "postgres" in databases:
        for label, (batch, tasks) in PGQUEUER_CONFIGS.items():
            def run_pgqueuer(url: str, b: int = batch, t: int | None = tasks) -> dict[str, Any]:
                return _run_child(["child-pgqueuer-burn", url, str(opts.jobs), str(b), str(t or "none")])

            # pgqueuer installs its own schema (in the child, before its timed part).
            out.append(System(label, lambda: fresh.scratch.postgres("pgqueuer"), run_pgqueuer))
    return out


def run_rounds(all_systems: Sequence[System], fresh: FreshDatabases, opts: argparse.Namespace,
               out: TextIO | None = None) -> list[tuple[int, float, float]]:
    """Every round: wait for a quiet machine, then each system once, in that round's order,
    each on a database made for it and dropped after it. Returns (round, load, waited)."""
    out = out or sys.stdout
    loads: list[tuple[int, float, float]] = []
    for number in range(1, opts.rounds + 1):
        load, waited = wait_for_quiet(limit=LOAD_LIMIT, max_wait=opts.load_wait)
        loads.append((number, load, waited))
        mark = " (under load: figures marked *)" if load >= LOAD_LIMIT else ""
        print(f"   round {number}: load average {load:.2f} after waiting {waited:.0f} s{mark}",
              file=out, flush=True)
        for s in rotated(all_systems, number):
            url = s.fresh()
            try:
                result = s.run(url)
            finally:
                fresh.release(url)
            s.samples.append(Sample(number, load, result))
            cpu = result.get("client_cpu_us_per_job") or 0.0
            server = result.get("server_cpu_us_per_job")
            last = (f"failed: {result['error']}" if "error" in result else
                    f"{result['jobs_per_sec']:,.0f} jobs/s, {cpu:.1f} us/job"
                    + ("" if server is None else f", Postgres {server:.1f} us/job"))
            print(f"   round {number}: {s.name}: {last}", file=out, flush=True)
    return loads


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _spread(values: Sequence[float], spec: str = ",.0f") -> str:
    return f"{min(values):{spec}}-{max(values):{spec}}" if values else "-"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"x{a / b:.2f}"


TABLE_HEADER = (f"   {'system':<36} {'jobs/s':>8} {'min-max':>15} {'x Go':>6} {'CPU us/job':>11} "
                f"{'min-max':>12} {'x Go':>6} {'PG CPU us/job':>13} {'min-max':>12} {'x Go':>6} "
                f"{'peak RSS MB':>12}   rounds (jobs/s; * = load >= 1)")


def table_lines(all_systems: Sequence[System]) -> list[str]:
    """One line per system: medians, spreads (min-max), ratios to River Go's medians when it
    ran, peak RSS, and each round's jobs/s, marked * when taken at load >= 1."""
    go = next((s for s in all_systems if s.name.startswith("River Go")), None)
    go_rate, go_cpu, go_server = (go.rate, go.cpu, go.server_cpu) if go is not None else (None, None, None)
    lines = [TABLE_HEADER]
    for s in all_systems:
        shown = " ".join(f"r{x.round}:{x.result['jobs_per_sec']:,.0f}" + ("*" if x.loaded else "")
                         for x in s.samples if x.ok)
        lines.append(f"   {s.name:<36} {_fmt(s.rate):>8} {_spread(s.rates):>15} {_ratio(s.rate, go_rate):>6} "
                     f"{_fmt(s.cpu, '.1f'):>11} {_spread(s.cpus, '.1f'):>12} {_ratio(s.cpu, go_cpu):>6} "
                     f"{_fmt(s.server_cpu, '.1f'):>13} {_spread(s.server_cpus, '.1f'):>12} "
                     f"{_ratio(s.server_cpu, go_server):>6} "
                     f"{_fmt(s.peak_rss, '.0f'):>12}   {shown}")
        for error in dict.fromkeys(s.errors):
            lines.append(f"      failed: {error}")
    return lines


RATIO_KEYS = (("jobs/s", "jobs_per_sec"), ("client CPU", "client_cpu_us_per_job"),
              ("Postgres CPU", "server_cpu_us_per_job"), ("client+Postgres CPU", "whole_cpu_us_per_job"))


def paired_ratios(system: System, go: System, key: str) -> list[float]:
    """``system``'s ``key`` over Go's in each round both ran: a round's systems run minutes
    apart, so a host that slows down or speeds up between rounds moves both sides of a ratio
    together, where it moves each median on its own."""
    theirs = {x.round: x.result.get(key) for x in go.samples if x.ok}
    out = []
    for x in system.samples:
        mine, base = x.result.get(key) if x.ok else None, theirs.get(x.round)
        if mine is not None and base:
            out.append(float(mine) / float(base))
    return out


def paired_lines(all_systems: Sequence[System]) -> list[str]:
    """Per system: the median (min-max) of its per-round ratios to River Go; none without Go."""
    go = next((s for s in all_systems if s.name.startswith("River Go")), None)
    if go is None or not go.rates:
        return []
    lines = []
    for s in all_systems:
        if s is go:
            continue
        parts = []
        for label, key in RATIO_KEYS:
            ratios = paired_ratios(s, go, key)
            parts.append(f"{label} " + (f"x{statistics.median(ratios):.2f} ({_spread(ratios, '.2f')})"
                                        if ratios else "-"))
        lines.append(f"   {s.name:<36} " + "; ".join(parts))
    return lines


def report(all_systems: Sequence[System], loads: Sequence[tuple[int, float, float]],
           out: TextIO | None = None) -> None:
    out = out or sys.stdout
    rounds = len(loads)
    print(f"\n== medians over {rounds} interleaved rounds, spread min-max; each run on a fresh copy of "
          "a migrated database; x Go: ratio to River Go / postgres's median", file=out)
    print("   load average (1 min) before each round: " + ", ".join(
        f"r{n} {load:.2f}" + ("*" if load >= LOAD_LIMIT else "") for n, load, _ in loads), file=out)
    if any(load >= LOAD_LIMIT for _, load, _ in loads):
        print(f"   * rounds taken at load >= {LOAD_LIMIT:g}: not evidence of speed", file=out)
    for line in table_lines(all_systems):
        print(line, file=out)
    paired = paired_lines(all_systems)
    if paired:
        print("\n== ratios to River Go within each round: median (min-max) over the rounds", file=out)
        for line in paired:
            print(line, file=out)
    by = {s.name: s for s in all_systems}
    go = by.get("River Go / postgres")
    tuned = [s for s in all_systems if s.name in PGQUEUER_CONFIGS and s.name != PGQUEUER_DEFAULT
             and s.rate is not None]
    best = max(tuned, key=lambda s: s.rate or 0.0, default=None)
    print("\n== issue 19's targets (reported, not asserted)", file=out)
    if go is None or go.rate is None:
        print(f"   River Go not measured in this run (set RIVER_GO_BIN); issue 19 recorded "
              f"{RIVER_GO_RECORDED:,} jobs/s at {RIVER_GO_RECORDED_CPU:g} us/job", file=out)
    for driver in ("sync", "trio", "asyncio"):
        pg, lite = by.get(f"river_{driver} / postgres"), by.get(f"river_{driver} / sqlite")
        if pg is not None and go is not None and go.rate is not None:
            print(f"   river_{driver} / River Go: jobs/s {_ratio(pg.rate, go.rate)} [>= x1.00]; client CPU "
                  f"per job {_ratio(pg.cpu, go.cpu)} [<= x1.00]; Postgres CPU per job "
                  f"{_ratio(pg.server_cpu, go.server_cpu)}; client+Postgres CPU per job "
                  f"{_ratio(pg.whole_cpu, go.whole_cpu)}", file=out)
        if pg is not None and best is not None:
            print(f"   river_{driver} / pgqueuer best ({best.name}): {_ratio(pg.rate, best.rate)}", file=out)
        for s in (pg, lite):
            if s is not None and s.peak_rss is not None:
                print(f"   {s.name} peak RSS {s.peak_rss:.0f} MB [<= {RSS_TARGET_MB:g}]", file=out)
        if lite is not None and pg is not None:
            print(f"   river_{driver} sqlite: client CPU per job {_ratio(lite.cpu, pg.cpu)} of "
                  f"postgres's [<= x1.00]; {_ratio(lite.whole_cpu, pg.whole_cpu)} of postgres's "
                  "client+server CPU (SQLite's engine runs in the client process)", file=out)
        recorded = SQLITE_RECORDED.get(driver)
        if lite is not None and recorded:
            print(f"   river_{driver} sqlite: {_ratio(lite.rate, recorded)} of the {recorded:,} jobs/s "
                  "issue 19 recorded [>= x1.50]", file=out)


SYSTEM_CHOICES = ("go", "sync", "trio", "asyncio", "pgqueuer")


def _system_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SYSTEM_CHOICES))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(SYSTEM_CHOICES)}; "
                                         f"got {text!r}")
    return names


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks rounds")
    parser.add_argument("-n", "--jobs", type=int, default=50_000,
                        help="no-op jobs per burn-down (issue 19: 50,000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-workers", type=int, default=2_000, help="as River Go's bench")
    parser.add_argument("--only", choices=("postgres", "sqlite"), help="one database (default: both)")
    parser.add_argument("--no-sqlite", action="store_true", help="Postgres only (as --only postgres)")
    parser.add_argument("--no-peers", action="store_true", help="without pgqueuer")
    parser.add_argument("--systems", type=_system_list, default=None, metavar="LIST",
                        help=f"comma-separated subset of {','.join(SYSTEM_CHOICES)} (default: all; asyncio "
                        "when river_asyncio is installed, go when a binary is given)")
    parser.add_argument("--river-go", metavar="BINARY", default=os.environ.get("RIVER_GO_BIN"),
                        help="a River Go CLI binary to include (default: $RIVER_GO_BIN)")
    parser.add_argument("--load-wait", type=float, default=None, metavar="SECONDS",
                        help=f"wait at most this long before each round for the load average to fall "
                        f"under {LOAD_LIMIT:g} (default: {LOAD_WAIT:g}; 0 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test of the harness: 2,000 jobs, 1 round, no waiting for quiet")
    opts = parser.parse_args(list(argv))
    if opts.jobs < 1 or opts.rounds < 1:
        parser.error("--jobs and --rounds must be at least 1")
    if opts.quick:
        opts.jobs, opts.rounds = min(opts.jobs, 2_000), 1
    if opts.load_wait is None:
        opts.load_wait = 0.0 if opts.quick else LOAD_WAIT
    if opts.systems is None:
        opts.systems = [name for name in SYSTEM_CHOICES if name != "asyncio" or asyncio_available()]
    if opts.no_peers:
        opts.systems = [name for name in opts.systems if name != "pgqueuer"]
    if not opts.river_go:  # River Go runs only from a binary built from River's source
        opts.systems = [name for name in opts.systems if name != "go"]
    return opts


def main(argv: Sequence[str] = ()) -> list[System]:
    opts = parse_args(argv)
    print(f"burn-down rounds: {opts.jobs:,} no-op jobs, max_workers {opts.max_workers}, "
          f"{opts.rounds} interleaved rounds; python {sys.version.split()[0]}; {os.cpu_count()} CPUs; "
          f"systems {','.join(opts.systems)} on {' and '.join(_databases(opts))}", flush=True)
    scratch = Scratch()
    try:
        fresh = FreshDatabases(scratch)
        all_systems = systems(opts, fresh)
        loads = run_rounds(all_systems, fresh, opts)
    finally:
        scratch.close()
    report(all_systems, loads)
    if fresh.checkpoint_refused:
        print(f"   note: no CHECKPOINT before the Postgres runs ({fresh.checkpoint_refused}); grant the "
              "bench's role pg_checkpoint for runs that start with no checkpoint owed")
    return all_systems


if __name__ == "__main__":
    main(sys.argv[1:])
