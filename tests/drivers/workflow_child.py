"""One worker process of the workflow fleet (``workflow_fleet.py``): a client of one driver.

``python workflow_child.py URL DRIVER RECORD_FILE``, DRIVER one of ``sync``, ``trio``,
``asyncio``. Prints ``ready`` once its client works, then works ``wf_fleet_task`` jobs
(each sleeps its ``ms``) until stdin closes, then stops its client and exits 0. Every
execution appends ``job_id`` to RECORD_FILE before it sleeps, so the parent sees runs
that a SIGKILL cut short. Leader election, the rescuer and the workflow promoter run on
short intervals, so a killed process's running tasks are rescued and a killed leader's
sweep is taken over within seconds.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from datetime import timedelta
from typing import Any, ClassVar

MS = timedelta(milliseconds=1)


@dataclasses.dataclass
class FleetTask:
    kind: ClassVar[str] = "wf_fleet_task"
    ms: int = 0


def settings() -> dict[str, Any]:
    from river_sync import LeaderElectionConfig, MaintenanceConfig, QueueConfig

    return {
        "queues": {"default": QueueConfig(max_workers=8, fetch_cooldown=5 * MS, fetch_poll_interval=50 * MS)},
        "fetch_cooldown": 5 * MS,
        "job_timeout": 500 * MS,
        "leader_election": LeaderElectionConfig(interval=200 * MS, jitter=50 * MS, ttl=1500 * MS),
        "maintenance": MaintenanceConfig(
            stagger_start=False, reindexer=False, rescue_after=timedelta(seconds=1),
            rescuer_interval=200 * MS, scheduler_interval=100 * MS, workflow_promoter_interval=200 * MS,
        ),
    }


def workers(record_path: str) -> Any:
    from river_sync import Workers

    lock = threading.Lock()
    record = open(record_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def work(ctx: Any, args: FleetTask) -> None:  # a plain function: a thread on every driver
        with lock:
            record.write(f"{ctx.job.id}\n")
        time.sleep(args.ms / 1000)

    all_workers = Workers()
    all_workers.job(FleetTask)(work)
    return all_workers


def run_sync(url: str, record: str) -> None:
    from river_sync import Client

    client = Client(url, workers=workers(record), **settings())
    client.start()
    print("ready", flush=True)
    sys.stdin.read()
    client.stop()


def run_async(url: str, record: str, driver: str) -> None:
    import anyio
    import anyio.to_thread

    if driver == "trio":
        from river_trio import Client
    else:
        from river_asyncio import Client

    async def main() -> None:
        client = Client(url, workers=workers(record), **settings())
        async with client:
            print("ready", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)

    anyio.run(main, backend=driver)


def main(argv: list[str]) -> int:
    url, driver, record = argv
    if driver == "sync":
        run_sync(url, record)
    else:
        run_async(url, record, driver)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
