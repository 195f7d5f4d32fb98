"""Workflows on Postgres (issue 34): a fan-out into one fan-in against as many independent
jobs, and how soon a dependent starts after its last dep completed.

``python -m benchmarks workflows [--jobs N] [--samples N] [--max-workers N] [--quick]``

Each measurement gets a fresh migrated database (``benchmarks.fresh_state``) and one
``river_sync.Client`` in this process working the ``default`` queue.

- **fan-out/fan-in:** ``--jobs`` (10,000) tasks without deps and one task depending on all of
  them, inserted as one workflow while the client runs; the time from the insert's end to
  the fan-in's completion, against the time the same number of independent jobs
  (``insert_many``) takes to complete in the same run. Target: at most 1.5x.
- **promotion latency:** ``--samples`` (200) two-task chains inserted one at a time; per
  chain the dependent's ``attempted_at`` minus its dep's ``finalized_at`` (clocks of one
  host: the database's and this process's), p50 and p95, with River's defaults and with the low-latency
  settings (``fetch_cooldown`` 1 ms on the client and the queue, the leader's
  ``workflow_promoter_interval`` unchanged: the completer promotes). Targets: p95 <= 1 s
  with the defaults, <= 50 ms low-latency.

Figures only, never assertions; the lead runs it on an idle machine.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

JOBS = 10_000
SAMPLES = 200
MAX_WORKERS = 100
INSERT_BATCH = 1_000
FAN_IN_TARGET = 1.5
DEFAULT_P95_TARGET_MS = 1000.0
LOW_LATENCY_P95_TARGET_MS = 50.0
DEADLINE = 600.0


@dataclass
class Noop:
    kind: ClassVar[str] = "bench_wf_noop"
    n: int = 0


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks workflows")
    parser.add_argument("--jobs", type=int, default=JOBS, help="fan-out width, and the independent jobs")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="two-task chains for the latency")
    parser.add_argument("--max-workers", type=int, default=MAX_WORKERS, help="the client's default queue")
    parser.add_argument("--quick", action="store_true", help="200 jobs and 20 samples, to check the harness")
    args = parser.parse_args(list(argv))
    if args.quick:
        args.jobs, args.samples = 200, 20
    for name in ("jobs", "samples", "max_workers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by nearest rank; ``values`` need not be sorted."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]


def _client(url: str, max_workers: int, *, low_latency: bool) -> Any:
    from river_sync import Client, MaintenanceConfig, QueueConfig, Workers

    workers = Workers()
    workers.job(Noop)(lambda ctx, args: None)
    cooldown = timedelta(milliseconds=1) if low_latency else timedelta(milliseconds=100)
    return Client(url, workers=workers, fetch_cooldown=cooldown,
                  queues={"default": QueueConfig(max_workers=max_workers, fetch_cooldown=cooldown)},
                  maintenance=MaintenanceConfig(reindexer=False))


def _wait_state(client: Any, job_ids: Sequence[int], started: float) -> float:
    from river_protocol.intents import CountJobs, JobListFilter
    from river_sync import JobState

    flt = JobListFilter(ids=tuple(job_ids)) if len(job_ids) < 100 else JobListFilter()
    while True:
        counts = client.database.run(CountJobs(filter=flt), readonly=True)
        done = sum(n for (state, _, _), n in counts.items() if state is JobState.COMPLETED)
        if done >= len(job_ids):
            return time.monotonic() - started
        if time.monotonic() - started > DEADLINE:
            raise TimeoutError(f"{done}/{len(job_ids)} completed after {DEADLINE} s")
        time.sleep(0.01)


def independent_seconds(url: str, jobs: int, max_workers: int) -> float:
    from river_sync import InsertManyParams

    with _client(url, max_workers, low_latency=False) as client:
        ids: list[int] = []
        for first in range(0, jobs, INSERT_BATCH):
            batch = [InsertManyParams(Noop(n)) for n in range(first, min(jobs, first + INSERT_BATCH))]
            ids += [r.job.id for r in client.insert_many(batch)]
        return _wait_state(client, ids, time.monotonic())


def fan_in_seconds(url: str, jobs: int, max_workers: int) -> float:
    from river_sync import Workflow

    wf = Workflow(name="fan")
    parts = [wf.add(f"part_{n}", Noop(n)) for n in range(jobs)]
    wf.add("fan_in", Noop(-1), deps=parts)
    with _client(url, max_workers, low_latency=False) as client:
        inserted = client.insert_workflow(wf)
        started = time.monotonic()
        client.wait_job(inserted.job("fan_in"), timeout=DEADLINE)
        return time.monotonic() - started


def promotion_latencies_ms(url: str, samples: int, max_workers: int, *, low_latency: bool) -> list[float]:
    from river_sync import Workflow

    latencies = []
    with _client(url, max_workers, low_latency=low_latency) as client:
        for n in range(samples):
            wf = Workflow(name="pair")
            first = wf.add("first", Noop(n))
            wf.add("second", Noop(n), deps=[first])
            inserted = client.insert_workflow(wf)
            second = client.wait_job(inserted.job("second"), timeout=60)
            dep = client.jobs.get(inserted.job("first").id)
            latencies.append((second.attempted_at - dep.finalized_at).total_seconds() * 1000)
    return latencies


def report_lines(results: dict[str, Any]) -> list[str]:
    lines = []
    independent, fan_in = results.get("independent_s"), results.get("fan_in_s")
    if independent and fan_in:
        ratio = fan_in / independent
        verdict = "met" if ratio <= FAN_IN_TARGET else "missed"
        lines.append(f"fan-out/fan-in of {results['jobs']:,}: {fan_in:.2f} s; independent jobs: "
                     f"{independent:.2f} s; x{ratio:.2f} [target <= {FAN_IN_TARGET}: {verdict}]")
    for name, target in (("defaults", DEFAULT_P95_TARGET_MS), ("low_latency", LOW_LATENCY_P95_TARGET_MS)):
        values = results.get(f"latency_{name}_ms")
        if values:
            p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
            verdict = "met" if p95 <= target else "missed"
            label = name.replace("_", "-")
            lines.append(f"promotion latency, {label} ({len(values)} chains): p50 {p50:.1f} ms, "
                         f"p95 {p95:.1f} ms, mean {statistics.fmean(values):.1f} ms "
                         f"[target p95 <= {target:.0f} ms: {verdict}]")
    return lines


def main(argv: Sequence[str] = ()) -> dict[str, Any]:
    from benchmarks.fresh_state import FreshDatabases
    from benchmarks.sync_driver import Scratch

    args = parse_args(argv)
    scratch = Scratch()
    fresh = FreshDatabases(scratch)
    results: dict[str, Any] = {"jobs": args.jobs}
    try:
        results["independent_s"] = independent_seconds(fresh.postgres("wf_independent"), args.jobs,
                                                       args.max_workers)
        results["fan_in_s"] = fan_in_seconds(fresh.postgres("wf_fan_in"), args.jobs, args.max_workers)
        for low in (False, True):
            name = "low_latency" if low else "defaults"
            results[f"latency_{name}_ms"] = promotion_latencies_ms(
                fresh.postgres(f"wf_latency_{name}"), args.samples, args.max_workers, low_latency=low)
    finally:
        scratch.close()
    for line in report_lines(results):
        print(line)
    return results
