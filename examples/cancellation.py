"""Cancel a running job from anywhere with ``client.jobs.cancel``; the worker notices via its token.

Python threads can't be interrupted, so cancellation is cooperative: the
client sets the job's cancellation token and the worker checks it
(``ctx.cancelled``, ``ctx.token.wait(seconds)``, ``ctx.raise_if_cancelled()``).
A worker that gives up by raising ``WorkCancelled`` (what
``raise_if_cancelled`` raises) ends the job as ``cancelled``.

The cancelling client learns about its own jobs at once; other clients hear
about it through Postgres LISTEN/NOTIFY. On SQLite a job running in another
process keeps running, and is cancelled instead of retried if it fails.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import ClassVar

from river_db.migrator import Migrator
from river_sync import Client, EventKind, QueueConfig, WorkContext, Workers


@dataclass
class ExportArgs:
    kind: ClassVar[str] = "export_table"
    table: str


workers = Workers()
export_started = threading.Event()


@workers.job(ExportArgs)
def export_table(ctx: WorkContext, args: ExportArgs) -> None:
    export_started.set()
    for chunk in range(1_000_000):
        # One chunk of real work would go here; between chunks, look at the token.
        if ctx.token.wait(0.05):
            why = ctx.cancel_cause.value if ctx.cancel_cause else "unknown"
            print(f"export of {args.table} stopped after {chunk} chunks (cause: {why})")
            ctx.raise_if_cancelled()


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
    with client.subscribe([EventKind.JOB_CANCELLED]) as cancelled, client:
        job = client.insert(ExportArgs(table="orders")).job
        export_started.wait(10)

        row = client.jobs.cancel(job.id)
        # A running job isn't cancelled on the spot: the row records the request.
        print(f"cancel requested; job {row.id} is {row.state} until its worker gives up")

        event = cancelled.get(timeout=10)
        assert event.job is not None
        print(f"job {event.job.id} is {event.job.state}: {event.job.errors[-1].error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
