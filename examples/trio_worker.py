"""The trio client: async workers as trio tasks, a job timeout enforced by a cancel scope, a clean stop.

``river_trio`` has the same names as ``river_sync``; calls that do I/O are
awaited. Each async job runs inside a cancel scope: when its timeout passes
(or it is cancelled remotely, or the client stops hard) the worker is
interrupted at its next ``await``, and the job is recorded as River records a
timeout (``context deadline exceeded``). Leaving ``async with client`` is a
soft stop: no new jobs are fetched and running ones are allowed to finish.

    python examples/trio_worker.py                                  # embedded SQLite
    python examples/trio_worker.py postgresql://localhost/river_dev
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

import trio

import river_trio
from river_db.migrator import Migrator
from river_trio import EventKind, InsertOpts, QueueConfig, WorkContext, Workers


@dataclass
class FetchArgs:
    kind: ClassVar[str] = "fetch_page"
    page: str
    seconds: float  # how long the pretend download takes


@dataclass
class DigestArgs:
    kind: ClassVar[str] = "build_digest"
    pages: int


workers = Workers()
digest_started: dict[str, trio.Event] = {}  # set up inside trio.run


# Any single fetch may take at most 1 s; the client cancels the job's scope when it overruns.
@workers.job(FetchArgs, timeout=timedelta(seconds=1))
async def fetch_page(ctx: WorkContext, args: FetchArgs) -> None:
    try:
        await trio.sleep(args.seconds)  # a real worker would await an HTTP client here
    except trio.Cancelled:
        # Cleanup may go here (shielded if it awaits); re-raising lets the client record the timeout.
        print(f"page {args.page}: cancelled by its 1 s timeout")
        raise
    ctx.record_output({"page": args.page, "bytes": len(args.page) * 1000})


@workers.job(DigestArgs)
async def build_digest(ctx: WorkContext, args: DigestArgs) -> None:
    digest_started["event"].set()
    await trio.sleep(0.3)
    print(f"digest of {args.pages} pages built (the soft stop waited for it)")


def database_url(argv: list[str]) -> str:
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("RIVER_DATABASE_URL"):
        return os.environ["RIVER_DATABASE_URL"]
    return "sqlite://" + os.path.join(tempfile.mkdtemp(prefix="river-example-"), "river.sqlite3")


async def run(url: str) -> None:
    client = river_trio.Client(url, workers=workers, queues={"default": QueueConfig(max_workers=10)})
    finished: dict[int, str] = {}
    # Subscribe before starting so no event can slip past.
    with client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED]) as events:
        async with client:
            pages = [FetchArgs("home", 0.1), FetchArgs("about", 0.2), FetchArgs("huge", 30.0)]
            # max_attempts=1: a timed-out fetch is discarded instead of retried (to keep this short).
            inserted = await client.insert_many(
                [river_trio.InsertManyParams(p, InsertOpts(max_attempts=1)) for p in pages]
            )
            with trio.fail_after(10):
                async for event in events:
                    assert event.job is not None
                    error = f" ({event.job.errors[-1].error})" if event.job.errors else ""
                    finished[event.job.id] = f"{event.job.state.value}{error}"
                    if len(finished) == len(inserted):
                        break
            digest_started["event"] = trio.Event()
            await client.insert(DigestArgs(pages=len(pages)))
            await digest_started["event"].wait()
            print("stopping the client (soft stop) while the digest job runs")
        print("client stopped cleanly")
    for result, page in zip(inserted, pages, strict=True):
        print(f"job {result.job.id} fetch {page.page}: {finished[result.job.id]}")


def main(argv: list[str] | None = None) -> int:
    url = database_url(sys.argv if argv is None else argv)
    with Migrator(url) as migrator:
        migrator.migrate_up()
    trio.run(run, url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
