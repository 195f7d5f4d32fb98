"""One worker process of the flow-control process tests (tests/drivers/test_flow_processes.py and
benchmarks' slow script): a client of DRIVER working queue ``limited`` under a global limit.

``python flow_child.py DRIVER URL RECORD_FILE GLOBAL_LIMIT MAX_WORKERS JOB_MS [RATE_ALLOWED PERIOD_MS]``

DRIVER is ``sync``, ``trio`` or ``asyncio``; GLOBAL_LIMIT 0 means no concurrency limit, and
RATE_ALLOWED PERIOD_MS add a rate limit over the whole queue. Prints ``ready`` once the client
works, then works ``flow_job`` jobs (each takes JOB_MS) until its stdin closes; then stops the
client and exits 0.
Every execution appends its job id to RECORD_FILE, so the parent sees each run, even one whose
outcome never reached the database (a SIGKILLed process). Leader election and the rescuer run
fast, so a killed process's jobs come back within seconds.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from datetime import datetime, timedelta
from typing import Any, ClassVar

from river_sync import (
    ConcurrencyConfig,
    LeaderElectionConfig,
    MaintenanceConfig,
    PartitionConfig,
    QueueConfig,
    RateLimit,
    Workers,
)

MS = timedelta(milliseconds=1)
QUEUE = "limited"


class RetryAtOnce:
    """A rescued job is due again at once (River's policy would wait a second or more)."""

    def next_retry(self, job: Any, now: datetime, rand: float) -> datetime:
        return now


@dataclasses.dataclass
class FlowJob:
    kind: ClassVar[str] = "flow_job"
    p: int = 0
    n: int = 0


def settings(global_limit: int, max_workers: int, rate: tuple[int, int] | None = None) -> dict[str, Any]:
    """The client settings every child shares (the queue, leadership and maintenance)."""
    concurrency = ConcurrencyConfig(global_limit=global_limit,
                                    partition=PartitionConfig(by_args=["p"])) if global_limit else None
    rate_limit = RateLimit(allowed=rate[0], period=rate[1] * MS) if rate else None
    return {
        # The rescuer leaves a job alone until its timeout has passed, as well as rescue_after.
        "job_timeout": 500 * MS,
        "retry_policy": RetryAtOnce(),
        "queues": {QUEUE: QueueConfig(
            max_workers=max_workers, fetch_cooldown=5 * MS, fetch_poll_interval=50 * MS,
            concurrency=concurrency, rate_limit=rate_limit,
        )},
        "leader_election": LeaderElectionConfig(interval=200 * MS, jitter=50 * MS, ttl=timedelta(seconds=2)),
        "maintenance": MaintenanceConfig(
            stagger_start=False, reindexer=False, rescue_after=timedelta(seconds=1),
            rescuer_interval=100 * MS, scheduler_interval=100 * MS, job_cleaner_interval=timedelta(hours=1),
        ),
    }


def main(driver: str, url: str, record_path: str, global_limit: int, max_workers: int, job_ms: int,
         rate: tuple[int, int] | None = None) -> int:
    lock = threading.Lock()
    record = open(record_path, "a", buffering=1)  # noqa: SIM115 - closed after the client stops

    def note(job_id: int) -> None:
        with lock:
            record.write(f"{job_id}\n")

    workers = Workers()
    if driver == "sync":
        import river_sync

        def work(ctx: Any, args: FlowJob) -> None:
            note(ctx.job.id)
            time.sleep(job_ms / 1000)

        workers.job(FlowJob)(work)
        with river_sync.Client(url, workers=workers, **settings(global_limit, max_workers, rate)):
            print("ready", flush=True)
            sys.stdin.read()
    else:
        import anyio

        async def async_work(ctx: Any, args: FlowJob) -> None:
            note(ctx.job.id)
            await anyio.sleep(job_ms / 1000)

        workers.job(FlowJob)(async_work)

        async def run() -> None:
            module = __import__(f"river_{driver}")
            async with module.Client(url, workers=workers, **settings(global_limit, max_workers, rate)):
                print("ready", flush=True)
                await anyio.to_thread.run_sync(sys.stdin.read)

        anyio.run(run, backend=driver)
    record.close()
    return 0


if __name__ == "__main__":
    driver, url, record = sys.argv[1:4]
    limit, workers, job_ms = (int(a) for a in sys.argv[4:7])
    rate = (int(sys.argv[7]), int(sys.argv[8])) if len(sys.argv) > 8 else None
    sys.exit(main(driver, url, record, limit, workers, job_ms, rate))
