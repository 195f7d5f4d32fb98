"""Burn-down of the same no-op load by each system, over interleaved rounds (issue 9's table).

``python -m benchmarks rounds [--jobs N] [--rounds R] [--max-workers N] [--no-sqlite] [--no-peers]``

Each round runs every system once, in the same order, each in its own process on
its own scratch database: ``river bench -n N --json`` for river_sync and
river_trio (the CLI a user runs, as River Go's ``river bench``; its worker
process tunes the garbage collector as ``river work`` does), and pgqueuer at the
configurations found fastest here (batch 500 with 1,000 concurrent tasks,
batch 1,000 with 2,000, batch 100; "pgqueuer best" is whichever has the best
median in the run) and at its default batch. The machine is shared and noisy,
so the figures are medians over the rounds and the comparisons are ratios of
medians from this one run.

Printed, never asserted: jobs/s, client CPU per job (the worker process's CPU
time over jobs), and the ratios issue 9 sets targets for.

River Go joins the rounds when ``RIVER_GO_BIN`` (or ``--river-go``) names a
River Go CLI binary, built from River's own source (``go build ./cmd/river`` in
River's repository at v0.43.0); nothing of it is in this repository. Its
``river bench -n N`` inserts, then works the jobs with 2,000 workers, cooldown
2 ms and poll 20 ms, as ours does; its jobs/s is its own "overall job/sec", and
its CPU is the process's from its first progress line (printed as its client
starts, after the inserts) to its exit. Without the binary, the figure
recorded in issue 9 is shown instead, marked as such.
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
from typing import Any

from benchmarks.sync_driver import TARGETS, Scratch, _run_child

RIVER_GO_RECORDED = TARGETS["river_go"]  # jobs/s, issue 9's measurement on this machine
PGQUEUER_CONFIGS = {  # label -> (batch_size, max_concurrent_tasks)
    "pgqueuer batch 500, 1,000 tasks": (500, 1000),
    "pgqueuer batch 1,000, 2,000 tasks": (1000, 2000),
    "pgqueuer batch 100": (100, None),
    "pgqueuer default (batch 10)": (10, None),
}
PGQUEUER_DEFAULT = "pgqueuer default (batch 10)"  # the others compete for "best"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class System:
    name: str
    run: Callable[[], dict[str, Any]]
    rates: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def record(self, result: dict[str, Any]) -> None:
        if "error" in result:
            self.errors.append(str(result["error"]))
            return
        self.rates.append(float(result["jobs_per_sec"]))
        cpu = result.get("client_cpu_us_per_job")
        if cpu is not None:
            self.cpus.append(float(cpu))
        rss = result.get("peak_rss_mb")
        if rss is not None:
            self.rss.append(float(rss))

    @property
    def rate(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    @property
    def cpu(self) -> float | None:
        return statistics.median(self.cpus) if self.cpus else None


def river_bench(url: str, n: int, driver: str, max_workers: int, timeout: float = 600.0) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "river_tools.cli", "bench", "--database-url", url, "-n", str(n),
           "--json", "--wipe", "--driver", driver, "--max-workers", str(max_workers)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-2:]
        # Go's CLI prints its error and then its usage: the error line, else the last lines.
        said = [line for line in tail if "error" in line.lower()] or list(tail)[-2:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(said[:2])}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


_GO_OVERALL = re.compile(r"overall job/sec \[\s*([0-9.]+)\s*\]")


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def river_go_bench(binary: str, url: str, n: int, timeout: float = 600.0) -> dict[str, Any]:
    """One ``river bench -n N`` of River Go: its own jobs/s, and its CPU while it works."""
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
                started = _process_cpu(proc.pid)
            match = _GO_OVERALL.search(line)
            if match:
                rate = float(match.group(1))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        killer.cancel()
    _, status, usage = os.wait4(proc.pid, 0)  # its rusage: Popen.wait would discard it
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or rate is None or started is None:
        # Go's CLI prints its error and then its usage: the error line, else the last lines.
        said = [line for line in tail if "error" in line.lower()] or list(tail)[-2:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(said[:2])}
    cpu = usage.ru_utime + usage.ru_stime - started
    return {"jobs_per_sec": rate, "client_cpu_us_per_job": cpu / n * 1e6}


def river_drivers() -> tuple[str, ...]:
    """``river bench``'s drivers to run: asyncio once river_asyncio can be imported (issue 16)."""
    return ("sync", "trio") + (("asyncio",) if importlib.util.find_spec("river_asyncio") else ())


def systems(opts: argparse.Namespace, scratch: Scratch) -> list[System]:
    out: list[System] = []
    pg = scratch.postgres("rounds")
    if opts.river_go:
        # Its own database: River Go's bench empties river_job with TRUNCATE and VACUUM FULL.
        go_db = scratch.postgres("river_go")
        subprocess.run([sys.executable, "-m", "river_tools.cli", "migrate-up", "--database-url", go_db],
                       check=True, capture_output=True, cwd=ROOT)  # our migrations: Go works on our schema
        out.append(System("River Go / postgres", lambda: river_go_bench(opts.river_go, go_db, opts.jobs)))
    for driver in river_drivers():
        out.append(System(f"river_{driver} / postgres",
                          lambda d=driver: river_bench(pg, opts.jobs, d, opts.max_workers)))
    if not opts.no_sqlite:
        lite = scratch.sqlite("rounds")
        for driver in river_drivers():
            out.append(System(f"river_{driver} / sqlite",
                              lambda d=driver: river_bench(lite, opts.jobs, d, opts.max_workers)))
    if not opts.no_peers:
        peer_db = scratch.postgres("pgqueuer")
        for label, (batch, tasks) in PGQUEUER_CONFIGS.items():
            args = ["child-pgqueuer-burn", peer_db, str(opts.jobs), str(batch), str(tasks or "none")]
            out.append(System(label, lambda a=args: _run_child(a)))
    return out


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "-" if value is None else format(value, spec)


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"x{a / b:.2f}"


def report(all_systems: Sequence[System], rounds: int) -> None:
    print(f"\n   {'system':<42} {'jobs/s (median)':>16} {'client CPU us/job':>18} {'peak RSS MB':>12}"
          "   rounds")
    for s in all_systems:
        shown = " ".join(f"{r:,.0f}" for r in s.rates)
        rss = _fmt(max(s.rss), ".0f") if s.rss else "-"
        print(f"   {s.name:<42} {_fmt(s.rate):>16} {_fmt(s.cpu, '.1f'):>18} {rss:>12}   {shown}")
        for error in dict.fromkeys(s.errors):
            print(f"      failed: {error}")
    by = {s.name: s for s in all_systems}
    sync_pg, trio_pg = by.get("river_sync / postgres"), by.get("river_trio / postgres")
    go = by.get("River Go / postgres")
    tuned = [s for s in all_systems if s.name in PGQUEUER_CONFIGS and s.name != PGQUEUER_DEFAULT
             and s.rate is not None]
    best = max(tuned, key=lambda s: s.rate or 0.0, default=None)
    print(f"\n== ratios of medians over {rounds} interleaved rounds (issue 9's targets in brackets)")
    if sync_pg is not None:
        print(f"   river_sync client CPU {_fmt(sync_pg.cpu, '.1f')} us/job [<= {TARGETS['cpu_us_sync']:g}]")
        if best is not None:
            print(f"   river_sync / pgqueuer best ({best.name}): {_ratio(sync_pg.rate, best.rate)} [>= "
                  f"x{TARGETS['burn_vs_pgqueuer']:g}]")
        if go is not None and go.rate is not None:
            print(f"   river_sync / River Go: {_ratio(sync_pg.rate, go.rate)} [>= x0.8]; "
                  f"client CPU per job {_ratio(sync_pg.cpu, go.cpu)} of Go's")
        else:
            print(f"   river_sync / River Go (recorded in issue 9, {RIVER_GO_RECORDED:,} jobs/s; not "
                  f"measured here: set RIVER_GO_BIN): {_ratio(sync_pg.rate, RIVER_GO_RECORDED)} [>= x0.8]")
    if trio_pg is not None:
        print(f"   river_trio client CPU {_fmt(trio_pg.cpu, '.1f')} us/job [<= {TARGETS['cpu_us_trio']:g}]")
        if sync_pg is not None:
            print(f"   river_trio / river_sync: {_ratio(trio_pg.rate, sync_pg.rate)} [>= x0.8]")
        if go is not None and go.rate is not None:
            print(f"   river_trio / River Go: {_ratio(trio_pg.rate, go.rate)}")
    asyncio_pg = by.get("river_asyncio / postgres")
    if asyncio_pg is not None and trio_pg is not None:
        print(f"   river_asyncio / river_trio: {_ratio(asyncio_pg.rate, trio_pg.rate)} [>= x1.00]; "
              f"client CPU {_fmt(asyncio_pg.cpu, '.1f')} us/job")
    for driver in river_drivers():
        lite, pg = by.get(f"river_{driver} / sqlite"), by.get(f"river_{driver} / postgres")
        if lite is not None and pg is not None:
            print(f"   river_{driver} sqlite / postgres: {_ratio(lite.rate, pg.rate)} [>= x0.8]")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks rounds")
    parser.add_argument("--jobs", type=int, default=50_000, help="no-op jobs per burn-down (issue 9: 50,000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-workers", type=int, default=2_000, help="as River Go's bench")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--river-go", metavar="BINARY", default=os.environ.get("RIVER_GO_BIN"),
                        help="a River Go CLI binary to include (default: $RIVER_GO_BIN)")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the harness")
    opts = parser.parse_args(list(argv))
    if opts.quick:
        opts.jobs, opts.rounds = 2_000, 1
    return opts


def main(argv: Sequence[str] = ()) -> None:
    opts = parse_args(argv)
    print(f"burn-down rounds: {opts.jobs:,} no-op jobs, max_workers {opts.max_workers}, "
          f"{opts.rounds} interleaved rounds; python {sys.version.split()[0]}; {os.cpu_count()} CPUs")
    scratch = Scratch()
    try:
        all_systems = systems(opts, scratch)
        for number in range(1, opts.rounds + 1):
            for s in all_systems:
                result = s.run()
                s.record(result)
                cpu = result.get("client_cpu_us_per_job") or 0.0
                last = (f"failed: {result['error']}" if "error" in result else
                        f"{result['jobs_per_sec']:,.0f} jobs/s, {cpu:.1f} us/job")
                print(f"   round {number}: {s.name}: {last}", flush=True)
    finally:
        scratch.close()
    report(all_systems, opts.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
