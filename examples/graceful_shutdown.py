"""Graceful shutdown: the first SIGINT/SIGTERM lets running jobs finish, a second cancels them.

``run_until_signalled(client)`` is a worker process's main loop. On the first
signal the client stops fetching and waits for running jobs (a soft stop); on
a second one it sets every running job's cancellation token (a hard stop).
A job that gives up with ``ctx.raise_if_cancelled()`` goes back to
``available`` without using an attempt, and another process picks it up.

To stay self-contained the example signals itself, as River's Go example
does; in production the signals come from Ctrl-C, systemd or Kubernetes.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import ClassVar

from river_db.migrator import Migrator
from river_sync import Client, Database, QueueConfig, WorkContext, Workers, run_until_signalled


@dataclass
class QuickArgs:
    kind: ClassVar[str] = "quick"


@dataclass
class EndlessArgs:
    kind: ClassVar[str] = "endless"


workers = Workers()
quick_started = threading.Event()
quick_done = threading.Event()
endless_started = threading.Event()


@workers.job(QuickArgs)
def quick(ctx: WorkContext, args: QuickArgs) -> None:
    quick_started.set()
    time.sleep(0.5)  # still running when the first signal arrives: the soft stop waits for it
    print(f"quick job {ctx.job.id} finished during the soft stop")
    quick_done.set()


@workers.job(EndlessArgs)
def endless(ctx: WorkContext, args: EndlessArgs) -> None:
    endless_started.set()
    while True:
        # Python threads can't be killed: a long job checks its token between units of work.
        if ctx.token.wait(0.1):
            print(f"endless job {ctx.job.id} cancelled by the hard stop; giving up")
            ctx.raise_if_cancelled()


def send_signals() -> None:
    """Stand-in for an operator pressing Ctrl-C twice."""
    quick_started.wait()
    endless_started.wait()
    print("sending SIGTERM: soft stop")
    os.kill(os.getpid(), signal.SIGTERM)
    quick_done.wait()
    # Two signals sent back to back could merge into one; leave the first time to be handled.
    time.sleep(0.2)
    print("sending SIGTERM again: hard stop")
    os.kill(os.getpid(), signal.SIGTERM)


def database_url(argv: list[str]) -> str:
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("RIVER_DATABASE_URL"):
        return os.environ["RIVER_DATABASE_URL"]
    return "sqlite://" + os.path.join(tempfile.mkdtemp(prefix="river-example-"), "river.sqlite3")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    url = database_url(sys.argv if argv is None else argv)
    with Migrator(url) as migrator:
        migrator.migrate_up()

    # The Database outlives the client so the job rows can be read after it stops.
    with Database.from_url(url) as db:
        client = Client(db, workers=workers, queues={"default": QueueConfig(max_workers=10)})
        quick_job = client.insert(QuickArgs()).job
        endless_job = client.insert(EndlessArgs()).job

        threading.Thread(target=send_signals, daemon=True).start()
        how = run_until_signalled(client)  # starts the client, returns once it has stopped
        print(f"client stopped ({how} stop)")

        for job_id in (quick_job.id, endless_job.id):
            row = client.jobs.get(job_id)
            print(f"job {row.id} ({row.kind}): {row.state}, attempt {row.attempt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
