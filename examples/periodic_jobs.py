"""Periodic jobs: inserted on a schedule by whichever client is the leader.

Every client that may lead (leader election on, the default) should carry the
same periodic job definitions; only the elected leader enqueues them, so a
schedule fires once however many processes run it. A schedule is an interval
(``timedelta``) or a cron expression (River's: five fields, or ``@daily`` and
friends, times in UTC). ``run_on_start`` also inserts once as soon as a
client becomes leader. The ``id`` is stored in each job's metadata.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from river_db.migrator import Migrator
from river_sync import Client, EventKind, PeriodicJob, QueueConfig, WorkContext, Workers


@dataclass
class HeartbeatArgs:
    kind: ClassVar[str] = "heartbeat"


@dataclass
class MorningReportArgs:
    kind: ClassVar[str] = "morning_report"
    audience: str = "ops"


workers = Workers()


@workers.job(HeartbeatArgs)
def heartbeat(ctx: WorkContext, args: HeartbeatArgs) -> None:
    print(f"heartbeat job {ctx.job.id} (periodic job {ctx.job.metadata.get('river:periodic_job_id')!r})")


@workers.job(MorningReportArgs)
def morning_report(ctx: WorkContext, args: MorningReportArgs) -> None:
    print(f"morning report for {args.audience}")


PERIODIC_JOBS = [
    # Every second, and once right away when this client becomes leader.
    PeriodicJob(timedelta(seconds=1), HeartbeatArgs, run_on_start=True, id="heartbeat"),
    # 07:00 UTC on weekdays; the constructor may also return (args, InsertOpts), or None to skip a run.
    PeriodicJob("0 7 * * MON-FRI", lambda: MorningReportArgs(audience="ops"), id="morning_report"),
]


def database_url(argv: list[str]) -> str:
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("RIVER_DATABASE_URL"):
        return os.environ["RIVER_DATABASE_URL"]
    return "sqlite://" + os.path.join(tempfile.mkdtemp(prefix="river-example-"), "river.sqlite3")


def main(argv: list[str] | None = None) -> int:
    url = database_url(sys.argv if argv is None else argv)
    with Migrator(url) as migrator:
        migrator.migrate_up()

    client = Client(
        url,
        workers=workers,
        queues={"default": QueueConfig(max_workers=10)},
        periodic_jobs=PERIODIC_JOBS,
    )
    with client.subscribe([EventKind.JOB_COMPLETED]) as completed, client:
        if not client.wait_leader(timeout=15):
            print("this client did not become leader: another process leads and enqueues the jobs")
            return 1
        print("this client is the leader: it enqueues the periodic jobs")
        for _ in range(3):
            completed.get(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
