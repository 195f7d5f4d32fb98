"""The threaded driver under load on Postgres and SQLite, next to its Python peers.

``python -m benchmarks sync [--jobs N] [--only postgres|sqlite] [--no-peers] [--quick]``

Figures (printed, never asserted):

- insert throughput: one ``Client.insert`` per call; ``insert_many`` of 1,000;
  the fast path (``InsertJobsFast`` through ``Database``: COPY on Postgres,
  River's InsertManyFast; a multi-row INSERT on SQLite), planning included;
- burn-down of N no-op jobs by one client process (max_workers 100), with
  River's default fetch cooldown (100 ms) and with River's own benchmark
  settings (cooldown 2 ms, poll 20 ms), and that process's peak RSS;
- insert-to-completion latency at a steady 100 jobs/s with notifications on:
  the row's ``created_at`` -> ``finalized_at`` (what the worker recorded) and,
  client side, insert call -> worker start and insert call -> completion
  event (after the completer's batched commit);
- procrastinate and pgqueuer through the same burn-down and bulk insert
  (installed by nox's bench session only), and ours/theirs ratios.

Each measured process runs in a subprocess (``python -m benchmarks.sync_driver
child-...``), so its RSS and its threads are its own. Every system gets its own
scratch database, dropped at the end. ``--pyspy FILE`` records the burn-down
child with py-spy (raw collapsed stacks, idle threads included).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import timedelta
from typing import Any, ClassVar

from benchmarks.scratch import Scratch
from river_tools.bench import count_completed as _completed
from river_tools.bench import peak_rss_mb as _peak_rss_mb
from river_tools.bench import percentile
from river_tools.gc_tuning import tune_for_worker

BULK_BATCH = 1_000
BURN_MAX_WORKERS = 100
LATENCY_RATE = 100  # jobs per second
CHILD_TIMEOUT = 240.0  # seconds; a stuck child is killed and reported, never awaited forever

TARGETS = {  # issue 9's
    "burn_vs_pgqueuer": 1.3,  # burn-down, same run, pgqueuer at its best configuration
    "river_go": 30_016,  # River Go's `river bench` on this machine, as recorded in issue 9 (no Go here)
    "cpu_us_sync": 20.0,  # client CPU per no-op job, Postgres
    "cpu_us_trio": 35.0,
    "copy": 60_000,
    "p95_ms": 6.0,
    "rss_mb": 100.0,
}


@dataclasses.dataclass
class Noop:
    kind: ClassVar[str] = "bench_noop"
    n: int = 0


def _workers(fn: Callable[..., Any] | None = None) -> Any:
    from river_sync import Workers

    workers = Workers()
    workers.job(Noop)(fn or (lambda args: None))
    return workers


def _queue(max_workers: int, cooldown_ms: float, poll_ms: float) -> Any:
    from river_sync import QueueConfig

    return QueueConfig(
        max_workers=max_workers,
        fetch_cooldown=timedelta(milliseconds=cooldown_ms),
        fetch_poll_interval=timedelta(milliseconds=max(poll_ms, cooldown_ms)),
    )


def _migrated(scratch: Scratch, system: str, tag: str) -> str:
    from river_db.migrator import Migrator

    url = scratch.postgres(tag) if system == "postgres" else scratch.sqlite(tag)
    with Migrator(url) as migrator:
        migrator.migrate_up()
    return url


def _empty_jobs(url: str) -> None:
    from river_sync import Database

    with Database.from_url(url) as db, db.executor() as ex:
        if db.dialect.name == "postgres":
            ex.conn.execute("TRUNCATE river_job, river_queue, river_leader RESTART IDENTITY")
        else:
            for table in ("river_job", "river_queue", "river_leader"):
                ex.conn.execute(f"DELETE FROM {table}")


# ---------------------------------------------------------------- inserts (in process)


def fast_insert(url: str, n: int, batch: int = BULK_BATCH) -> float:
    """Jobs/s through ``InsertJobsFast`` (planning included, as River's InsertManyFast does)."""
    from river_sync import Database
    from river_tools.bench import fast_insert as bulk_insert

    with Database.from_url(url) as db:
        return bulk_insert(db, n, Noop, batch=batch)


def bench_inserts(url: str, n_single: int, n_bulk: int) -> dict[str, float]:
    from river_sync import Client

    out: dict[str, float] = {}
    with Client(url, workers=_workers()) as client:
        client.insert(Noop(-1))  # connections and statements warm
        start = time.perf_counter()
        for i in range(n_single):
            client.insert(Noop(i))
        out["single"] = n_single / (time.perf_counter() - start)
        start = time.perf_counter()
        for first in range(0, n_bulk, BULK_BATCH):
            client.insert_many([Noop(i) for i in range(first, min(n_bulk, first + BULK_BATCH))])
        out["many"] = n_bulk / (time.perf_counter() - start)
    out["fast"] = fast_insert(url, n_bulk)
    return out


# ---------------------------------------------------------------- children


def _run_child(args: Sequence[str], *, python: str | None = None, pyspy: str | None = None,
               timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
    """Run ``python -m benchmarks.sync_driver ARGS``; its last stdout line is a JSON result."""
    cmd = [python or sys.executable, "-m", "benchmarks.sync_driver", *args]
    if pyspy:
        spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
        cmd = [spy, "record", "--idle", "--threads", "-r", "200", "-f", "raw", "-o", pyspy, "--", *cmd]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def child_burn(url: str, n: int, max_workers: int, cooldown_ms: float, poll_ms: float) -> dict[str, Any]:
    from river_sync import Client, Database

    rss_idle = _peak_rss_mb()
    client = Client(url, workers=_workers(), queues={"default": _queue(max_workers, cooldown_ms, poll_ms)})
    tune_for_worker()  # a worker process, as `river work` runs one
    with Database.from_url(url, pool_size=1) as watch:
        start, cpu = time.perf_counter(), time.process_time()
        client.start()
        while _completed(watch) < n:
            time.sleep(0.01)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    client.stop()
    return {"elapsed": elapsed, "rate": n / elapsed, "cpu_us_per_job": cpu / n * 1e6,
            "rss_mb": _peak_rss_mb(), "rss_idle_mb": rss_idle}


def child_latency(url: str, out_path: str, cooldown_ms: float, poll_ms: float) -> dict[str, Any]:
    """Works jobs until stdin closes; writes {job id: [start, completion event]} (epoch seconds)."""
    from river_sync import Client, EventKind

    starts: dict[int, float] = {}

    def work(ctx: Any, args: Noop) -> None:
        starts[ctx.job.id] = time.time()

    queues = {"default": _queue(BURN_MAX_WORKERS, cooldown_ms, poll_ms)}
    tune_for_worker()  # a worker process, as `river work` runs one
    client = Client(url, workers=_workers(work), queues=queues,
                    fetch_cooldown=timedelta(milliseconds=cooldown_ms))
    sub = client.subscribe([EventKind.JOB_COMPLETED], maxsize=1_000_000)
    done: dict[int, float] = {}

    def collect() -> None:
        with suppress(Exception):
            for event in sub:
                if event.job is not None:
                    done[event.job.id] = time.time()

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    client.start()
    print("ready", flush=True)
    sys.stdin.read()
    client.stop()
    collector.join(5)
    with open(out_path, "w") as fh:
        json.dump({str(k): [v, done.get(k)] for k, v in starts.items()}, fh)
    return {"jobs": len(starts)}


def _child_main(argv: list[str]) -> int:
    mode, rest = argv[0], argv[1:]
    if mode == "child-burn":
        result = child_burn(rest[0], int(rest[1]), int(rest[2]), float(rest[3]), float(rest[4]))
    elif mode == "child-latency":
        result = child_latency(rest[0], rest[1], float(rest[2]), float(rest[3]))
    elif mode == "child-peer":
        from benchmarks import sync_peers

        result = sync_peers.run(rest[0], rest[1], int(rest[2]))
    elif mode == "child-pgqueuer-burn":
        import asyncio

        from benchmarks import sync_peers

        tasks = int(rest[3]) if rest[3] != "none" else None
        try:
            result = asyncio.run(sync_peers.pgqueuer_burn(rest[0], int(rest[1]), int(rest[2]), tasks))
        except ImportError as exc:
            result = {"error": f"pgqueuer is not installed here ({exc}); `nox -s bench` installs it"}
    else:
        raise SystemExit(f"unknown child mode {mode!r}")
    print(json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------- burn-down and latency (parent)


def bench_burn(url: str, n: int, cooldown_ms: float, poll_ms: float,
               pyspy: str | None = None) -> dict[str, Any]:
    _empty_jobs(url)
    fast_insert(url, n)
    return _run_child(["child-burn", url, str(n), str(BURN_MAX_WORKERS), str(cooldown_ms), str(poll_ms)],
                      pyspy=pyspy)


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    return percentile(ordered, 0.5), percentile(ordered, 0.95), percentile(ordered, 1.0)


def _db_latencies(url: str) -> list[float]:
    """Seconds from created_at to finalized_at of every completed job."""
    from river_sync import Database
    from river_tools.bench import db_latencies

    with Database.from_url(url) as db:
        return db_latencies(db)


def latency_run(url: str, n: int, child_cmd: Callable[[str], list[str]],
                insert_steadily: Callable[[int], dict[int, float]]) -> dict[str, Any]:
    """Start a worker child (``child_cmd(out_path)``; it prints ``ready``, then records
    start/done times per job id into ``out_path``), insert ``n`` jobs with
    ``insert_steadily`` (job id -> wall time of the insert call) and report percentiles."""
    from river_sync import Database

    _empty_jobs(url)
    fd, out_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen(child_cmd(out_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=root)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        if proc.stdout.readline().strip() != "ready":
            return {"error": "worker process did not start"}
        inserted = insert_steadily(n)
        with Database.from_url(url, pool_size=1) as watch:
            deadline = time.monotonic() + 30
            while _completed(watch) < n + 1 and time.monotonic() < deadline:
                time.sleep(0.02)
        proc.stdin.close()
        proc.wait(timeout=30)
        with open(out_path) as fh:
            seen = {int(k): v for k, v in json.load(fh).items()}
    finally:
        if proc.poll() is None:
            proc.kill()
        os.unlink(out_path)
    to_start = [seen[i][0] - t for i, t in inserted.items() if i in seen]
    to_done = [seen[i][1] - t for i, t in inserted.items() if i in seen and seen[i][1] is not None]
    return {
        "jobs": n, "worked": len(to_start),
        "db": _percentiles(_db_latencies(url)),
        "start": _percentiles(to_start),
        "event": _percentiles(to_done),
    }


def bench_latency(url: str, seconds: float, cooldown_ms: float, poll_ms: float) -> dict[str, Any]:
    from river_sync import Client

    def insert_steadily(n: int) -> dict[int, float]:
        inserted: dict[int, float] = {}
        with Client(url, workers=_workers(), fetch_cooldown=timedelta(milliseconds=cooldown_ms)) as client:
            client.insert(Noop(-1))  # warm; ignored below
            t0 = time.perf_counter()
            for i in range(n):
                delay = t0 + i / LATENCY_RATE - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                at = time.time()
                inserted[client.insert(Noop(i)).job.id] = at
        return inserted

    def child(out_path: str) -> list[str]:
        return [sys.executable, "-m", "benchmarks.sync_driver", "child-latency", url, out_path,
                str(cooldown_ms), str(poll_ms)]

    return latency_run(url, int(seconds * LATENCY_RATE), child, insert_steadily)


# ---------------------------------------------------------------- report


def _fmt_rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:>10,.0f}"


def _ms(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{v * 1000:7.1f}" for v in values)


@contextmanager
def _section(title: str) -> Iterator[None]:
    print(f"\n== {title}", flush=True)
    start = time.perf_counter()
    yield
    print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)


def run_system(system: str, scratch: Scratch, opts: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {}
    url = _migrated(scratch, system, "ours")
    with _section(f"river-python / {system}: inserts"):
        ins = bench_inserts(url, opts.single, opts.jobs)
        res["insert"] = ins
        fast_name = "COPY (InsertJobsFast)" if system == "postgres" else "multi-row (InsertJobsFast)"
        print(f"   insert, one per call            {_fmt_rate(ins['single'])} jobs/s")
        print(f"   insert_many x{BULK_BATCH:<5}              {_fmt_rate(ins['many'])} jobs/s")
        print(f"   {fast_name:<30}  {_fmt_rate(ins['fast'])} jobs/s")
    for label, cooldown, poll in (("River defaults: cooldown 100 ms, poll 1 s", 100.0, 1000.0),
                                  ("River's bench settings: cooldown 2 ms, poll 20 ms", 2.0, 20.0)):
        with _section(f"river-python / {system}: burn-down of {opts.jobs:,} no-op jobs, "
                      f"max_workers {BURN_MAX_WORKERS}, {label}"):
            spy = f"{opts.pyspy}.{system}.{int(cooldown)}" if opts.pyspy else None
            burn = bench_burn(url, opts.jobs, cooldown, poll, pyspy=spy)
            res.setdefault("burn", []).append(burn)
            if "error" in burn:
                print(f"   failed: {burn['error']}")
            else:
                print(f"   {burn['rate']:,.0f} jobs/s ({burn['elapsed']:.2f} s), client CPU "
                      f"{burn['cpu_us_per_job']:.1f} us/job; worker process peak RSS "
                      f"{burn['rss_mb']:.0f} MB ({burn['rss_idle_mb']:.0f} MB before start)")
    # With notifications on, the poll is only a fallback; a poll's claim in flight delays the
    # claim a notification asks for, so the last setting keeps River's 1 s poll.
    for label, cooldown, poll in (("cooldown 100 ms, poll 1 s", 100.0, 1000.0),
                                  ("cooldown 2 ms, poll 20 ms", 2.0, 20.0),
                                  ("cooldown 2 ms, poll 1 s", 2.0, 1000.0)):
        with _section(f"river-python / {system}: latency at {LATENCY_RATE} jobs/s for "
                      f"{opts.latency_seconds:.0f} s, notifications on, {label}"):
            lat = bench_latency(url, opts.latency_seconds, cooldown, poll)
            res.setdefault("latency", []).append(lat)
            if "error" in lat:
                print(f"   failed: {lat['error']}")
                continue
            print(f"   {lat['worked']}/{lat['jobs']} jobs; ms p50 / p95 / max:")
            print(f"   created_at -> finalized_at (row)      {_ms(lat['db'])}")
            print(f"   insert call -> worker start           {_ms(lat['start'])}")
            print(f"   insert call -> completion committed   {_ms(lat['event'])}")
    return res


def run_peers(opts: argparse.Namespace, scratch: Scratch) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for peer in ("pgqueuer", "procrastinate"):
        with _section(f"peer {peer} / postgres: bulk insert and burn-down of {opts.jobs:,} no-op jobs"):
            url = scratch.postgres(peer)
            result = _run_child(["child-peer", peer, url, str(opts.jobs)], timeout=opts.peer_timeout)
            out[peer] = result
            if "error" in result:
                print(f"   not measured: {result['error']}")
                continue
            print(f"   {peer} {result.get('version', '?')}: {result['setup']}")
            print(f"   bulk insert x{BULK_BATCH:<5}                {_fmt_rate(result['insert'])} jobs/s")
            done = result["done"]
            note = "" if done == opts.jobs else f" (only {done:,} done before the time limit)"
            print(f"   burn-down                         {_fmt_rate(result['burn'])} jobs/s{note}; "
                  f"peak RSS {result['rss_mb']:.0f} MB")
    return out


def _summary(ours: dict[str, dict[str, Any]], peers: dict[str, dict[str, Any]]) -> None:
    print("\n== summary (targets from issue 9; reported, not asserted)")
    for system, res in ours.items():
        burns = [b for b in res.get("burn", []) if "error" not in b]
        best = max((b["rate"] for b in burns), default=None)
        cpu = min((b["cpu_us_per_job"] for b in burns), default=None)
        if cpu is not None:
            print(f"   {system:<8} client CPU     {cpu:10.1f} us/job at max_workers 100 (the target, <= "
                  f"{TARGETS['cpu_us_sync']:g} on postgres, is for the rounds table's 2,000 workers)")
        rss = max((b["rss_mb"] for b in burns), default=None)
        lats = [lat for lat in res.get("latency", []) if "error" not in lat]
        p95 = min((lat["db"][1] * 1000 for lat in lats), default=None)
        fast = res["insert"]["fast"]
        print(f"   {system:<8} burn-down best {_fmt_rate(best)} jobs/s at max_workers 100 (the "
              f"targets against pgqueuer's best and River Go are in the rounds table)")
        print(f"   {system:<8} fast insert    {_fmt_rate(fast)} jobs/s (target >= {TARGETS['copy']:,})")
        if p95 is not None:
            print(f"   {system:<8} p95 created->finalized {p95:8.1f} ms, best config "
                  f"(target <= {TARGETS['p95_ms']} ms)")
        if rss is not None:
            print(f"   {system:<8} peak RSS       {rss:10.0f} MB (target < {TARGETS['rss_mb']:.0f} MB)")
    pg = ours.get("postgres")
    if pg is None:
        return
    our_burn = max((b["rate"] for b in pg.get("burn", []) if "error" not in b), default=None)
    our_bulk = pg["insert"]["many"]
    our_fast = pg["insert"]["fast"]
    for peer, result in peers.items():
        if "error" in result:
            print(f"   vs {peer}: not measured ({result['error']})")
            continue
        parts = []
        rates = result.get("variants") or {"burn-down": result.get("burn")}
        for label, rate in rates.items():
            if our_burn is not None and rate:
                parts.append(f"burn-down x{our_burn / rate:.2f} ({label})")
        if result.get("insert"):
            parts.append(f"insert_many x{our_bulk / result['insert']:.2f}, "
                         f"fast insert x{our_fast / result['insert']:.2f} (their bulk insert)")
        print(f"   ours/{peer} (postgres, our max_workers {BURN_MAX_WORKERS}, one round; issue 9's "
              "comparison is the rounds table): " + ", ".join(parts))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks sync")
    parser.add_argument("--jobs", type=int, default=20_000, help="burn-down and bulk insert size")
    parser.add_argument("--single", type=int, default=2_000, help="jobs inserted one per call")
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    parser.add_argument("--only", choices=("postgres", "sqlite"))
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--peer-timeout", type=float, default=150.0, help="seconds per peer")
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the harness")
    parser.add_argument("--pyspy", metavar="FILE", help="record each burn-down child with py-spy")
    opts = parser.parse_args(list(argv))
    if opts.quick:
        opts.jobs, opts.single, opts.latency_seconds, opts.peer_timeout = 2_000, 200, 2.0, 60.0
    return opts


def main(argv: Sequence[str] = ()) -> None:
    opts = parse_args(argv)
    systems = [opts.only] if opts.only else ["postgres", "sqlite"]
    print(f"sync driver: {opts.jobs:,} jobs; python {sys.version.split()[0]}; {os.cpu_count()} CPUs")
    scratch = Scratch()
    ours: dict[str, dict[str, Any]] = {}
    peers: dict[str, dict[str, Any]] = {}
    try:
        for system in systems:
            try:
                ours[system] = run_system(system, scratch, opts)
            except Exception as exc:  # e.g. Postgres unreachable: report and go on
                print(f"   {system} not measured: {type(exc).__name__}: {exc}")
        if not opts.no_peers and "postgres" in ours:
            peers = run_peers(opts, scratch)
    finally:
        scratch.close()
    _summary(ours, peers)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("child-"):
        sys.exit(_child_main(sys.argv[1:]))
    main(sys.argv[1:])
