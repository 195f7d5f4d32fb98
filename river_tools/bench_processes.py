"""``river bench --processes N``: how a burn-down scales from one worker process to N.

The same burn-down runs twice on the same database: once with one worker
process, once with N, each time after a fresh bulk load. Each worker process is
``python -m river_tools.bench_processes URL ...``: it builds its client, says
``ready``, waits for ``go`` on its stdin so that all processes start together,
works until told to stop, and reports the CPU it spent after ``go``. The parent
holds no client: it counts completed rows to know when the load is worked.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import anyio

from river_tools.bench import (
    FETCH_COOLDOWN,
    INSERT_BATCH,
    BenchPlan,
    bench_queues,
    bench_workers,
    count_completed,
    delete_jobs,
    fast_insert,
)
from river_tools.gc_tuning import tune_for_worker

POLL = 0.02  # seconds between counts of completed rows
START_LIMIT = 120.0  # seconds for a worker process to build its client


@dataclasses.dataclass(frozen=True, slots=True)
class ProcessRun:
    """One burn-down with ``processes`` worker processes."""

    processes: int
    jobs: int
    seconds: float
    cpu_seconds: float  # the worker processes' CPU after ``go``, summed

    @property
    def jobs_per_sec(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    @property
    def client_cpu_us_per_job(self) -> float:
        return self.cpu_seconds / self.jobs * 1e6 if self.jobs else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"processes": self.processes, "jobs": self.jobs, "seconds": round(self.seconds, 4),
                "jobs_per_sec": round(self.jobs_per_sec, 1),
                "client_cpu_us_per_job": round(self.client_cpu_us_per_job, 1)}


def scaling(runs: Sequence[ProcessRun]) -> float:
    """Jobs/s of the last run over the first (the N-process run over the 1-process one)."""
    first, last = runs[0].jobs_per_sec, runs[-1].jobs_per_sec
    return last / first if first else 0.0


def worker_command(plan: BenchPlan) -> list[str]:
    argv = [sys.executable, "-m", "river_tools.bench_processes", plan.url, "--driver", plan.driver,
            "--max-workers", str(plan.max_workers)]
    if plan.schema:
        argv += ["--schema", plan.schema]
    if plan.default_gc:
        argv.append("--default-gc")
    if plan.loop != "default":
        argv += ["--loop", plan.loop]
    return argv


def _open_db(plan: BenchPlan) -> Any:
    from river_sync.database import Database

    return Database.from_url(plan.url, schema=plan.schema, pool_size=1)


def run_once(plan: BenchPlan, processes: int, info: TextIO,
             popen: Callable[..., Any] = subprocess.Popen) -> ProcessRun:
    """Bulk-load ``plan.total_jobs`` jobs, then work them with ``processes`` worker processes."""
    total = plan.total_jobs or 0
    with _open_db(plan) as db:
        delete_jobs(db)
        fast_insert(db, total, batch=INSERT_BATCH)
    workers = [popen(worker_command(plan), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for _ in range(processes)]
    try:
        for proc in workers:
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a bench worker process did not start (said {line!r}, "
                                   f"exit {proc.poll()})")
        started = time.perf_counter()
        for proc in workers:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        with _open_db(plan) as db:
            while count_completed(db) < total:
                time.sleep(POLL)
        seconds = time.perf_counter() - started
        cpu = 0.0
        for proc in workers:
            proc.stdin.write("stop\n")
            proc.stdin.flush()
            report = json.loads(proc.stdout.readline())
            cpu += float(report["cpu_seconds"])
            proc.wait(timeout=60)
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    run = ProcessRun(processes, total, seconds, cpu)
    print(f"bench: {processes} process(es): {run.jobs_per_sec:,.0f} jobs/s, "
          f"{run.client_cpu_us_per_job:.1f} us client CPU per job", file=info, flush=True)
    return run


def run_scaling(plan: BenchPlan, processes: int, info: TextIO) -> list[ProcessRun]:
    """The burn-down with 1 process, then with ``processes``."""
    return [run_once(plan, n, info) for n in dict.fromkeys((1, processes))]


# ---------------------------------------------------------------- the worker process


def _serve(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> None:
    queues = bench_queues(args.max_workers)
    if not args.default_gc:
        tune_for_worker()
    if args.driver != "sync":
        _serve_async(args, stdin, stdout)
        return
    from river_sync.client import Client

    client = Client(args.url, schema=args.schema, workers=bench_workers(), queues=queues,
                    fetch_cooldown=FETCH_COOLDOWN)
    stdout.write("ready\n")
    stdout.flush()
    stdin.readline()
    cpu0 = time.process_time()
    client.start()
    stdin.readline()
    client.stop()
    stdout.write(json.dumps({"cpu_seconds": time.process_time() - cpu0}) + "\n")
    stdout.flush()


def _serve_async(args: argparse.Namespace, stdin: TextIO, stdout: TextIO) -> None:
    from river_tools import async_runner
    from river_tools.bench_async import client_class, new_client

    client_cls = client_class(args.driver)
    plan = BenchPlan(url=args.url, schema=args.schema, database="", driver=args.driver,
                     max_workers=args.max_workers)

    async def main() -> None:
        client = new_client(client_cls, plan)
        stdout.write("ready\n")
        stdout.flush()
        await anyio.to_thread.run_sync(stdin.readline)
        cpu0 = time.process_time()
        async with client:
            await anyio.to_thread.run_sync(stdin.readline)
        stdout.write(json.dumps({"cpu_seconds": time.process_time() - cpu0}) + "\n")
        stdout.flush()

    async_runner.run(main, backend=async_runner.backend_of(client_cls), loop=args.loop)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m river_tools.bench_processes")
    parser.add_argument("url")
    parser.add_argument("--driver", choices=("sync", "trio", "asyncio"), default="sync")
    parser.add_argument("--loop", choices=("default", "uvloop"), default="default")
    parser.add_argument("--max-workers", type=int, required=True)
    parser.add_argument("--schema")
    parser.add_argument("--default-gc", action="store_true")
    _serve(parser.parse_args(argv), sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
