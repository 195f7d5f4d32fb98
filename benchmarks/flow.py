"""Flow control on Postgres (issue 31, "Performance"): what a concurrency limit costs.

``python -m benchmarks flow [--jobs N] [--partitions N] [--global-limit N] [--max-workers N]
[--hot-jobs N] [--fetch-cooldown-ms N] [--rounds N] [--quick]``

Each measurement gets a fresh database migrated on River's line and on the ``python`` line, and
one ``river_sync.Client`` in this process working the ``default`` queue with ``--max-workers``
(2,000) no-op workers.

- **burn-down, limited vs unlimited:** ``--jobs`` (20,000) jobs spread over ``--partitions``
  (1,000) values of one args member are inserted, then worked to the end; the same with
  ``ConcurrencyConfig(global_limit=--global-limit (50), partition by that member)``.
  Interleaved over ``--rounds`` (3): jobs/s of each and their ratio (target: limited at least
  70 % of unlimited), with the Postgres server's CPU per job (all local ``postgres``
  processes, ``benchmarks.server_cpu``), which is mostly the claim statement's.
- **one hot partition:** ``--hot-jobs`` (10,000) jobs of one partition under
  ``global_limit=1``: they must run strictly one at a time (each starts no earlier than the
  one before it finished, checked from ``attempted_at`` and ``finalized_at``); the gap between
  one's end and the next one's start, p50 and p95. The next job starts at the queue's next
  fetch, which River spaces at least ``fetch_cooldown`` apart (100 ms by default,
  ``--fetch-cooldown-ms``), so the gap is about that cooldown less the job's own time.

Each figure is printed with the 1-minute load average read when it was taken.

A queue with no limits runs River's claim statement unchanged: ``python -m benchmarks rounds``
measures it (its A/B against the previous release is the 3 % target).

Figures only, never assertions; the lead runs it on an idle machine.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from benchmarks.workflows import percentile

JOBS = 20_000
PARTITIONS = 1_000
GLOBAL_LIMIT = 50
MAX_WORKERS = 2_000
HOT_JOBS = 10_000
HOT_QUEUE = "hot"
FETCH_COOLDOWN_MS = 100  # River's default
ROUNDS = 3
INSERT_BATCH = 5_000
LIMITED_TARGET = 0.70
DEADLINE = 1800.0


@dataclass
class Noop:
    kind: ClassVar[str] = "bench_flow_noop"
    p: int = 0


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks flow")
    parser.add_argument("--jobs", type=int, default=JOBS, help="burn-down jobs per run")
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="values of the partition member")
    parser.add_argument("--global-limit", type=int, default=GLOBAL_LIMIT, help="per partition, limited runs")
    parser.add_argument("--max-workers", type=int, default=MAX_WORKERS, help="the client's queue")
    parser.add_argument("--hot-jobs", type=int, default=HOT_JOBS,
                        help="jobs of the one hot partition (0: skip)")
    parser.add_argument("--fetch-cooldown-ms", type=int, default=FETCH_COOLDOWN_MS,
                        help="the hot partition's client (River's default: 100)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved unlimited/limited pairs")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the harness")
    args = parser.parse_args(list(argv))
    if args.quick:
        args.jobs, args.partitions, args.hot_jobs, args.rounds = 500, 20, 50, 1
    for name in ("jobs", "partitions", "global_limit", "max_workers", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.hot_jobs < 0:
        parser.error("--hot-jobs must be at least 0")
    if args.fetch_cooldown_ms < 1:
        parser.error("--fetch-cooldown-ms must be at least 1")
    return args


def queue_config(max_workers: int, global_limit: int | None,
                 fetch_cooldown_ms: int = FETCH_COOLDOWN_MS) -> Any:
    """The benchmark's queue: unlimited, or limited per value of ``p``."""
    from datetime import timedelta

    from river_sync import ConcurrencyConfig, PartitionConfig, QueueConfig

    concurrency = None if global_limit is None else ConcurrencyConfig(
        global_limit=global_limit, partition=PartitionConfig(by_args=["p"]))
    return QueueConfig(max_workers=max_workers, concurrency=concurrency,
                       fetch_cooldown=timedelta(milliseconds=fetch_cooldown_ms))


def gaps_ms(runs: Sequence[tuple[Any, Any]]) -> tuple[list[float], int]:
    """From (attempted_at, finalized_at) pairs: the gaps between one run's end and the next
    one's start in start order, and how many runs started before the previous one ended."""
    ordered = sorted(runs, key=lambda r: r[0])
    gaps, overlaps = [], 0
    for (_, end), (start, _) in itertools.pairwise(ordered):
        gap = (start - end).total_seconds() * 1000
        overlaps += gap < 0
        gaps.append(gap)
    return gaps, overlaps


def _fresh(fresh: Any, tag: str) -> str:
    from river_db.migrator import Migrator

    url: str = fresh.postgres(tag)
    with Migrator(url, line="python") as migrator:
        migrator.migrate_up()
    return url


def burn_down(url: str, jobs: int, partitions: int, max_workers: int,
              global_limit: int | None) -> tuple[float, float | None]:
    """Seconds to work ``jobs`` inserted jobs, and the Postgres CPU seconds meanwhile."""
    from benchmarks.server_cpu import ServerCpu
    from river_sync import Client, InsertManyParams, Workers

    with Client(url) as inserter:
        for first in range(0, jobs, INSERT_BATCH):
            inserter.insert_many([InsertManyParams(Noop(n % partitions))
                                  for n in range(first, min(jobs, first + INSERT_BATCH))])
    workers = Workers()
    workers.job(Noop)(lambda ctx, args: None)
    cpu = ServerCpu()
    client = Client(url, workers=workers, queues={"default": queue_config(max_workers, global_limit)})
    cpu.start()
    started = time.monotonic()
    with client:
        _wait_done(client, jobs, started)
        elapsed = time.monotonic() - started
    return elapsed, cpu.stop()


def _wait_done(client: Any, jobs: int, started: float, queue: str = "default") -> None:
    from river_protocol.intents import CountJobs
    from river_sync import JobState

    while True:
        counts = client.database.run(CountJobs(), readonly=True)
        done = sum(n for (state, q, _), n in counts.items() if state is JobState.COMPLETED and q == queue)
        if done >= jobs:
            return
        if time.monotonic() - started > DEADLINE:
            raise TimeoutError(f"not done after {DEADLINE} s")
        time.sleep(0.01)


def hot_partition(url: str, jobs: int, max_workers: int,
                  fetch_cooldown_ms: int = FETCH_COOLDOWN_MS) -> tuple[list[float], int]:
    """``jobs`` of one partition under global_limit=1: (gaps in ms, overlapping starts)."""
    from river_protocol.intents import JobListFilter, ListJobs
    from river_sync import Client, InsertManyParams, InsertOpts, Workers

    workers = Workers()
    workers.job(Noop)(lambda ctx, args: None)
    queues = {HOT_QUEUE: queue_config(max_workers, 1, fetch_cooldown_ms)}
    with Client(url, workers=workers, queues=queues) as client:
        client.insert_many([InsertManyParams(Noop(0), InsertOpts(queue=HOT_QUEUE)) for _ in range(jobs)])
        _wait_done(client, jobs, time.monotonic(), HOT_QUEUE)
        only_hot = JobListFilter(queues=(HOT_QUEUE,))
        rows = client.database.run(ListJobs(filter=only_hot, limit=jobs + 1), readonly=True)
    return gaps_ms([(r.attempted_at, r.finalized_at) for r in rows])


def report_lines(results: dict[str, Any]) -> list[str]:
    lines = []
    pairs = results.get("pairs", [])
    for i, pair in enumerate(pairs, start=1):
        jobs = results["jobs"]
        free_rate, limited_rate = jobs / pair["unlimited_s"], jobs / pair["limited_s"]
        ratio = limited_rate / free_rate
        verdict = "met" if ratio >= LIMITED_TARGET else "missed"
        line = (f"round {i}: unlimited {free_rate:,.0f} jobs/s, global_limit={results['global_limit']} "
                f"{limited_rate:,.0f} jobs/s: {ratio:.0%} [target >= {LIMITED_TARGET:.0%}: {verdict}]")
        if pair.get("unlimited_cpu") is not None and pair.get("limited_cpu") is not None:
            line += (f"; Postgres CPU {pair['unlimited_cpu'] / jobs * 1e6:.0f} vs "
                     f"{pair['limited_cpu'] / jobs * 1e6:.0f} us/job")
        if pair.get("load") is not None:
            line += f"; load {pair['load']:.2f}"
        lines.append(line)
    gaps = results.get("hot_gaps_ms")
    if gaps:
        overlaps = results.get("hot_overlaps", 0)
        cooldown = results.get("fetch_cooldown_ms", FETCH_COOLDOWN_MS)
        p50, p95 = percentile(gaps, 0.5), percentile(gaps, 0.95)
        line = (f"hot partition (global_limit=1, {len(gaps) + 1:,} jobs, fetch_cooldown {cooldown} ms): "
                f"gap end->next start p50 {p50:.2f} ms, p95 {p95:.2f} ms; "
                f"{'strictly one at a time' if not overlaps else f'{overlaps} OVERLAPPING starts'}")
        if results.get("hot_load") is not None:
            line += f"; load {results['hot_load']:.2f}"
        lines.append(line)
    return lines


def main(argv: Sequence[str] = ()) -> dict[str, Any]:
    import os

    from benchmarks.fresh_state import FreshDatabases
    from benchmarks.scratch import Scratch

    args = parse_args(argv)
    scratch = Scratch()
    fresh = FreshDatabases(scratch)
    results: dict[str, Any] = {"jobs": args.jobs, "global_limit": args.global_limit, "pairs": [],
                               "fetch_cooldown_ms": args.fetch_cooldown_ms}
    try:
        load = os.getloadavg()[0]
        print(f"load average before: {load:.2f}")
        for n in range(args.rounds):
            pair: dict[str, Any] = {}
            for name, limit in (("unlimited", None), ("limited", args.global_limit)):
                seconds, cpu = burn_down(_fresh(fresh, f"flow_{name}_{n}"), args.jobs, args.partitions,
                                         args.max_workers, limit)
                pair[f"{name}_s"], pair[f"{name}_cpu"] = seconds, cpu
            pair["load"] = os.getloadavg()[0]
            results["pairs"].append(pair)
        if args.hot_jobs:
            results["hot_gaps_ms"], results["hot_overlaps"] = hot_partition(
                _fresh(fresh, "flow_hot"), args.hot_jobs, args.max_workers, args.fetch_cooldown_ms)
            results["hot_load"] = os.getloadavg()[0]
    finally:
        scratch.close()
    for line in report_lines(results):
        print(line)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return results

