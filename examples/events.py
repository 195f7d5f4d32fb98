"""Subscribe to client events: what happened to each job this client worked, and to its queues.

``client.subscribe(kinds)`` returns a bounded queue of ``Event`` values.
Job events carry the row as persisted; queue events name the queue. A slow
subscriber never holds the client up: when its queue is full, new events are
dropped and counted in ``subscription.dropped``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from river_db.migrator import Migrator
from river_sync import (
    Client,
    EventKind,
    InsertOpts,
    JobSnooze,
    QueueConfig,
    WorkContext,
    Workers,
)


@dataclass
class ResizeArgs:
    kind: ClassVar[str] = "resize_image"
    path: str


workers = Workers()


@workers.job(ResizeArgs)
def resize(ctx: WorkContext, args: ResizeArgs) -> None:
    if args.path.endswith(".gif"):
        raise ValueError(f"cannot resize {args.path}: animated images are not supported")
    if args.path.startswith("pending/") and not ctx.job.metadata.get("snoozes"):
        raise JobSnooze(timedelta(milliseconds=100))  # not uploaded yet: look again shortly


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

    queue = QueueConfig(max_workers=10, fetch_poll_interval=timedelta(milliseconds=100))
    client = Client(url, workers=workers, queues={"default": queue})
    # Subscribe before starting, so nothing slips past; None would mean every kind.
    kinds = [EventKind.JOB_COMPLETED, EventKind.JOB_FAILED, EventKind.JOB_SNOOZED,
             EventKind.QUEUE_PAUSED, EventKind.QUEUE_RESUMED]
    with client.subscribe(kinds) as events, client:
        client.insert(ResizeArgs(path="cat.png"))
        client.insert(ResizeArgs(path="dance.gif"), InsertOpts(max_attempts=1))
        client.insert(ResizeArgs(path="pending/dog.png"))

        finished = 0
        while finished < 3:
            event = events.get(timeout=10)
            assert event.job is not None
            errors = f" error: {event.job.errors[-1].error}" if event.job.errors else ""
            print(f"{event.kind.value}: job {event.job.id} {event.job.kind} -> {event.job.state}{errors}")
            if event.kind is not EventKind.JOB_SNOOZED:
                finished += 1

        client.queues.pause("default")
        print(f"{events.get(timeout=10).kind.value}: queue default")
        client.queues.resume("default")
        print(f"{events.get(timeout=10).kind.value}: queue default")
        print(f"events dropped: {events.dropped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
