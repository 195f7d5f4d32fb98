"""Insert a job and work it: the smallest complete River program.

Run it with no argument to use a fresh SQLite file in a temporary directory,
or point it at Postgres::

    python examples/basic_worker.py postgresql://localhost/river_dev
    RIVER_DATABASE_URL=sqlite:///tmp/river.sqlite3 python examples/basic_worker.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import ClassVar

from river_db.migrator import Migrator
from river_sync import Client, EventKind, QueueConfig, WorkContext, Workers


@dataclass
class SortArgs:
    # The kind is the job's name in the database; a Go worker registered for
    # "sort" would work these jobs just as well.
    kind: ClassVar[str] = "sort"
    strings: list[str]


workers = Workers()


@workers.job(SortArgs)
def sort_strings(ctx: WorkContext, args: SortArgs) -> None:
    print(f"sorted strings: {sorted(args.strings)} (job {ctx.job.id}, attempt {ctx.job.attempt})")


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

    client = Client(url, workers=workers, queues={"default": QueueConfig(max_workers=10)})
    # Subscribe before starting so no event can slip past.
    with client.subscribe([EventKind.JOB_COMPLETED]) as completed, client:
        job = client.insert(SortArgs(strings=["whale", "tiger", "bear"])).job
        event = completed.get(timeout=10)
        assert event.job is not None and event.job.id == job.id
        print(f"job {event.job.id} is {event.job.state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
