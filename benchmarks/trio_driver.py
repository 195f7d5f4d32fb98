"""The trio driver under load on Postgres and SQLite, printed in ``sync_driver``'s format.

``python -m benchmarks trio [--jobs N] [--only postgres|sqlite] [--quick]``
(or ``python -m benchmarks.trio_driver ...``)

Same methodology as ``benchmarks/sync_driver.py`` (its helpers are reused), so
the two print side by side:

- insert throughput through ``river_trio.Client``: one ``insert`` per call;
  ``insert_many`` of 1,000; the fast path (``InsertJobsFast`` through
  ``AsyncDatabase``), planning included;
- burn-down of N no-op ``async def`` jobs by one client process
  (max_workers 100), with River's default fetch cooldown (100 ms) and with
  River's benchmark settings (cooldown 2 ms, poll 20 ms), and that process's
  peak RSS;
- insert-to-completion latency at a steady 100 jobs/s with notifications on:
  ``created_at`` -> ``finalized_at`` of the row, and, client side, insert call
  -> worker start and insert call -> completion event. The inserting process
  uses ``river_trio.Client`` too.

Each measured process is a subprocess (``python -m benchmarks.trio_driver
child-...``); every database is a scratch one, dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import trio

from benchmarks.scratch import Scratch
from benchmarks.sync_driver import (
    BULK_BATCH,
    BURN_MAX_WORKERS,
    CHILD_TIMEOUT,
    LATENCY_RATE,
    TARGETS,
    Noop,
    _empty_jobs,
    _fmt_rate,
    _migrated,
    _ms,
    _peak_rss_mb,
    _queue,
    _section,
    latency_run,
)
from river_tools.gc_tuning import tune_for_worker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _async_workers(fn: Any = None) -> Any:
    from river_trio import Workers

    async def noop(args: Noop) -> None:
        return None

    workers = Workers()
    workers.job(Noop)(fn or noop)
    return workers


async def _completed_async(db: Any) -> int:
    from river_protocol.intents import CountJobs

    counts = await db.run(CountJobs(), readonly=True)
    return sum(n for (state, _q, _k), n in counts.items() if state.value == "completed")


# ---------------------------------------------------------------- inserts (in process)


async def _fast_insert(url: str, n: int, batch: int = BULK_BATCH) -> float:
    from river_tools.bench import fast_insert_intents
    from river_trio import AsyncDatabase

    async with await AsyncDatabase.from_url(url) as db:
        start = time.perf_counter()
        for intent in fast_insert_intents(db.dialect.name, n, Noop, batch=batch):
            await db.run(intent)
        return n / (time.perf_counter() - start)


async def _bench_inserts(url: str, n_single: int, n_bulk: int) -> dict[str, float]:
    from river_trio import Client

    out: dict[str, float] = {}
    client = Client(url, workers=_async_workers())
    try:
        await client.insert(Noop(-1))  # connections and statements warm
        start = time.perf_counter()
        for i in range(n_single):
            await client.insert(Noop(i))
        out["single"] = n_single / (time.perf_counter() - start)
        start = time.perf_counter()
        for first in range(0, n_bulk, BULK_BATCH):
            await client.insert_many([Noop(i) for i in range(first, min(n_bulk, first + BULK_BATCH))])
        out["many"] = n_bulk / (time.perf_counter() - start)
    finally:
        await client.aclose()
    out["fast"] = await _fast_insert(url, n_bulk)
    return out


def bench_inserts(url: str, n_single: int, n_bulk: int) -> dict[str, float]:
    result: dict[str, float] = trio.run(_bench_inserts, url, n_single, n_bulk)
    return result


# ---------------------------------------------------------------- children


def _child_cmd(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "benchmarks.trio_driver", *args]


def _run_child(args: Sequence[str], timeout: float = CHILD_TIMEOUT) -> dict[str, Any]:
    """Run a child mode; its last stdout line is a JSON result."""
    try:
        proc = subprocess.run(_child_cmd(args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


async def child_burn(
    url: str, n: int, max_workers: int, cooldown_ms: float, poll_ms: float
) -> dict[str, Any]:
    from river_trio import AsyncDatabase, Client

    rss_idle = _peak_rss_mb()
    tune_for_worker()  # a worker process, as `river work` runs one
    client = Client(url, workers=_async_workers(),
                    queues={"default": _queue(max_workers, cooldown_ms, poll_ms)})
    async with await AsyncDatabase.from_url(url, pool_size=1) as watch, trio.open_nursery() as nursery:
        start, cpu = time.perf_counter(), time.process_time()
        await nursery.start(client.run)
        while await _completed_async(watch) < n:
            await trio.sleep(0.01)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        await client.stop()
    return {"elapsed": elapsed, "rate": n / elapsed, "cpu_us_per_job": cpu / n * 1e6,
            "rss_mb": _peak_rss_mb(), "rss_idle_mb": rss_idle}


LOOP_JOBS = 2_000
LOOP_TICK = 0.005  # seconds


async def child_loop_gaps(url: str) -> dict[str, Any]:
    """How late a task sleeping 5 ms at a time wakes while the client works ``LOOP_JOBS`` jobs
    (max_workers 100, cooldown 5 ms): whether the client ever holds the loop."""
    from river_trio import Client

    tune_for_worker()
    done = trio.Event()
    count = 0

    async def work(args: Noop) -> None:
        nonlocal count
        count += 1
        if count == LOOP_JOBS:
            done.set()

    gaps: list[float] = []

    async def ticker() -> None:
        last = trio.current_time()
        while True:
            await trio.sleep(LOOP_TICK)
            now = trio.current_time()
            gaps.append(now - last - LOOP_TICK)
            last = now

    queue = _queue(BURN_MAX_WORKERS, 5.0, 50.0)
    client = Client(url, workers=_async_workers(work), queues={"default": queue},
                    fetch_cooldown=timedelta(milliseconds=5))
    async with client, trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        with trio.fail_after(CHILD_TIMEOUT):
            await done.wait()
        nursery.cancel_scope.cancel()
    gaps.sort()
    return {"ticks": len(gaps), "p99_ms": gaps[int(len(gaps) * 0.99)] * 1000 if gaps else None,
            "max_ms": gaps[-1] * 1000 if gaps else None}


async def child_latency(url: str, out_path: str, cooldown_ms: float, poll_ms: float) -> dict[str, Any]:
    """Works jobs until stdin closes; writes {job id: [start, completion event]} (epoch seconds)."""
    from river_trio import Client, EventKind

    starts: dict[int, float] = {}
    done: dict[int, float] = {}

    async def work(ctx: Any, args: Noop) -> None:
        starts[ctx.job.id] = time.time()

    queues = {"default": _queue(BURN_MAX_WORKERS, cooldown_ms, poll_ms)}
    tune_for_worker()
    client = Client(url, workers=_async_workers(work), queues=queues,
                    fetch_cooldown=timedelta(milliseconds=cooldown_ms))
    sub = client.subscribe([EventKind.JOB_COMPLETED], maxsize=1_000_000)

    async def collect() -> None:
        async for event in sub:
            if event.job is not None:
                done[event.job.id] = time.time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect)
        await nursery.start(client.run)
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)
        await client.stop()  # closes the subscription, which ends collect()
    with open(out_path, "w") as fh:
        json.dump({str(k): [v, done.get(k)] for k, v in starts.items()}, fh)
    return {"jobs": len(starts)}


def _child_main(argv: list[str]) -> int:
    mode, rest = argv[0], argv[1:]
    if mode == "child-burn":
        result = trio.run(child_burn, rest[0], int(rest[1]), int(rest[2]), float(rest[3]), float(rest[4]))
    elif mode == "child-latency":
        result = trio.run(child_latency, rest[0], rest[1], float(rest[2]), float(rest[3]))
    elif mode == "child-loop-gaps":
        result = trio.run(child_loop_gaps, rest[0])
    else:
        raise SystemExit(f"unknown child mode {mode!r}")
    print(json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------- burn-down and latency (parent)


def bench_loop_gaps(url: str) -> dict[str, Any]:
    _empty_jobs(url)
    trio.run(_fast_insert, url, LOOP_JOBS)
    return _run_child(["child-loop-gaps", url])


def bench_burn(url: str, n: int, cooldown_ms: float, poll_ms: float) -> dict[str, Any]:
    _empty_jobs(url)
    trio.run(_fast_insert, url, n)
    return _run_child(["child-burn", url, str(n), str(BURN_MAX_WORKERS), str(cooldown_ms), str(poll_ms)])


async def _insert_steadily(url: str, n: int, cooldown_ms: float) -> dict[int, float]:
    from river_trio import Client

    inserted: dict[int, float] = {}
    client = Client(url, workers=_async_workers(), fetch_cooldown=timedelta(milliseconds=cooldown_ms))
    try:
        await client.insert(Noop(-1))  # warm; ignored below
        t0 = trio.current_time()
        for i in range(n):
            await trio.sleep_until(t0 + i / LATENCY_RATE)
            at = time.time()
            inserted[(await client.insert(Noop(i))).job.id] = at
    finally:
        await client.aclose()
    return inserted


def bench_latency(url: str, seconds: float, cooldown_ms: float, poll_ms: float) -> dict[str, Any]:
    return latency_run(
        url, int(seconds * LATENCY_RATE),
        lambda out_path: _child_cmd(["child-latency", url, out_path, str(cooldown_ms), str(poll_ms)]),
        lambda n: trio.run(_insert_steadily, url, n, cooldown_ms),
    )


# ---------------------------------------------------------------- report


def run_system(system: str, scratch: Scratch, opts: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {}
    url = _migrated(scratch, system, "trio")
    with _section(f"river-trio / {system}: inserts"):
        ins = bench_inserts(url, opts.single, opts.jobs)
        res["insert"] = ins
        fast_name = "COPY (InsertJobsFast)" if system == "postgres" else "multi-row (InsertJobsFast)"
        print(f"   insert, one per call            {_fmt_rate(ins['single'])} jobs/s")
        print(f"   insert_many x{BULK_BATCH:<5}              {_fmt_rate(ins['many'])} jobs/s")
        print(f"   {fast_name:<30}  {_fmt_rate(ins['fast'])} jobs/s")
    for label, cooldown, poll in (("River defaults: cooldown 100 ms, poll 1 s", 100.0, 1000.0),
                                  ("River's bench settings: cooldown 2 ms, poll 20 ms", 2.0, 20.0)):
        with _section(f"river-trio / {system}: burn-down of {opts.jobs:,} no-op async jobs, "
                      f"max_workers {BURN_MAX_WORKERS}, {label}"):
            burn = bench_burn(url, opts.jobs, cooldown, poll)
            res.setdefault("burn", []).append(burn)
            if "error" in burn:
                print(f"   failed: {burn['error']}")
            else:
                print(f"   {burn['rate']:,.0f} jobs/s ({burn['elapsed']:.2f} s), client CPU "
                      f"{burn['cpu_us_per_job']:.1f} us/job; worker process peak RSS "
                      f"{burn['rss_mb']:.0f} MB ({burn['rss_idle_mb']:.0f} MB before start)")
    with _section(f"river-trio / {system}: loop responsiveness while working {LOOP_JOBS:,} jobs "
                  f"(a task sleeping {LOOP_TICK * 1000:g} ms at a time)"):
        gaps = bench_loop_gaps(url)
        res["loop_gaps"] = gaps
        if "error" in gaps:
            print(f"   failed: {gaps['error']}")
        elif gaps["ticks"]:
            print(f"   {gaps['ticks']} wake-ups; late by p99 {gaps['p99_ms']:.1f} ms, "
                  f"max {gaps['max_ms']:.1f} ms")
    # With notifications on, the poll is only a fallback; a poll's claim in flight delays the
    # claim a notification asks for, so the last setting keeps River's 1 s poll.
    for label, cooldown, poll in (("cooldown 100 ms, poll 1 s", 100.0, 1000.0),
                                  ("cooldown 2 ms, poll 20 ms", 2.0, 20.0),
                                  ("cooldown 2 ms, poll 1 s", 2.0, 1000.0)):
        with _section(f"river-trio / {system}: latency at {LATENCY_RATE} jobs/s for "
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


def _summary(ours: dict[str, dict[str, Any]]) -> None:
    print("\n== summary, river-trio (targets from issue 9; reported, not asserted)")
    for system, res in ours.items():
        burns = [b for b in res.get("burn", []) if "error" not in b]
        best = max((b["rate"] for b in burns), default=None)
        cpu = min((b["cpu_us_per_job"] for b in burns), default=None)
        if cpu is not None:
            print(f"   {system:<8} client CPU     {cpu:10.1f} us/job at max_workers 100 (the target, <= "
                  f"{TARGETS['cpu_us_trio']:g} on postgres, is for the rounds table's 2,000 workers)")
        rss = max((b["rss_mb"] for b in burns), default=None)
        lats = [lat for lat in res.get("latency", []) if "error" not in lat]
        p95 = min((lat["db"][1] * 1000 for lat in lats), default=None)
        print(f"   {system:<8} burn-down best {_fmt_rate(best)} jobs/s at max_workers 100 (the "
              f"target against river_sync is in the rounds table)")
        print(f"   {system:<8} fast insert    {_fmt_rate(res['insert']['fast'])} jobs/s "
              f"(target >= {TARGETS['copy']:,})")
        if p95 is not None:
            print(f"   {system:<8} p95 created->finalized {p95:8.1f} ms, best config "
                  f"(target <= {TARGETS['p95_ms']} ms)")
        if rss is not None:
            print(f"   {system:<8} peak RSS       {rss:10.0f} MB (target < {TARGETS['rss_mb']:.0f} MB)")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks trio")
    parser.add_argument("--jobs", type=int, default=20_000, help="burn-down and bulk insert size")
    parser.add_argument("--single", type=int, default=2_000, help="jobs inserted one per call")
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    parser.add_argument("--only", choices=("postgres", "sqlite"))
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the harness")
    opts = parser.parse_args(list(argv))
    if opts.quick:
        opts.jobs, opts.single, opts.latency_seconds = 2_000, 200, 2.0
    return opts


def main(argv: Sequence[str] = ()) -> None:
    opts = parse_args(argv)
    systems = [opts.only] if opts.only else ["postgres", "sqlite"]
    print(f"trio driver: {opts.jobs:,} jobs; python {sys.version.split()[0]}; {os.cpu_count()} CPUs")
    scratch = Scratch()
    ours: dict[str, dict[str, Any]] = {}
    try:
        for system in systems:
            try:
                ours[system] = run_system(system, scratch, opts)
            except Exception as exc:  # e.g. Postgres unreachable: report and go on
                print(f"   {system} not measured: {type(exc).__name__}: {exc}")
    finally:
        scratch.close()
    _summary(ours)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("child-"):
        sys.exit(_child_main(sys.argv[1:]))
    main(sys.argv[1:])
