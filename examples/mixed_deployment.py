"""A Python service sharing one River database with a Go service (runs without Go).

The guide is docs/guides/go-river.md ("Working beside Go River"); this is its configuration in code:

- the Python client works its own queue (``python``); the Go service works
  ``default``. Both may insert jobs for the other side: a job goes to the
  queue of the language that works its kind.
- ``fetch_only_known_kinds=True``: even if a job of a Go-only kind lands in
  the Python queue by mistake, this client never claims it (and so never fails
  it with "job kind is not registered").
- leader election: ``follower_client`` never runs for leader, which is always
  safe; ``leader_eligible_client`` may lead, so it must know every kind
  (River's rescuer discards stuck jobs of kinds the leader doesn't know) and
  carry the same periodic jobs and maintenance settings as the Go service.

The Go side is simulated by inserting the jobs Go would insert.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

from river_db.migrator import Migrator
from river_sync import (
    Client,
    EventKind,
    InsertOpts,
    JobRow,
    PeriodicJob,
    QueueConfig,
    WorkContext,
    Workers,
)

PYTHON_QUEUE = "python"
GO_QUEUE = "default"  # what the Go service's Config.Queues lists

# ---------------------------------------------------------------- kinds Python works


@dataclass
class ScoreLeadArgs:
    kind: ClassVar[str] = "score_lead"
    lead_id: int

    @staticmethod
    def insert_opts() -> InsertOpts:
        # Routes every insert of this kind to Python, whichever language inserts it
        # (the Go struct's InsertOpts() should name the same queue).
        return InsertOpts(queue=PYTHON_QUEUE)


# ---------------------------------------------------------------- kinds the Go service works


@dataclass
class SendInvoiceArgs:
    """Mirror of the Go service's args struct: same kind, same JSON field names."""

    kind: ClassVar[str] = "send_invoice"
    invoice_id: int


@dataclass
class NightlyRollupArgs:
    kind: ClassVar[str] = "nightly_rollup"


GO_KINDS: tuple[type, ...] = (SendInvoiceArgs, NightlyRollupArgs)

# Identical to the Go service's PeriodicJobs: whichever client leads enqueues them.
PERIODIC_JOBS = [
    PeriodicJob(
        timedelta(hours=24), NightlyRollupArgs, id="nightly_rollup", run_on_start=True,
        opts=InsertOpts(queue=GO_QUEUE),
    ),
]


def score_lead(ctx: WorkContext, args: ScoreLeadArgs) -> None:
    print(f"python: scored lead {args.lead_id}")


def go_only(ctx: WorkContext, args: Any) -> None:
    # Registered so a Python leader knows the kind; never claimed while Go kinds stay in Go queues.
    raise RuntimeError(f"{ctx.job.kind} is worked by the Go service; it was put in a Python queue")


def python_workers(*, every_kind: bool) -> Workers:
    workers = Workers()
    workers.job(ScoreLeadArgs)(score_lead)
    if every_kind:
        for args_type in GO_KINDS:
            workers.job(args_type)(go_only)
    return workers


def follower_client(url: str) -> Client:
    """Never leads: maintenance and periodic jobs stay with the Go service."""
    return Client(
        url,
        workers=python_workers(every_kind=False),
        queues={PYTHON_QUEUE: QueueConfig(max_workers=20)},
        fetch_only_known_kinds=True,
        leader_election=False,
    )


def leader_eligible_client(url: str) -> Client:
    """May lead: knows every kind and carries the fleet's periodic jobs."""
    return Client(
        url,
        workers=python_workers(every_kind=True),
        queues={PYTHON_QUEUE: QueueConfig(max_workers=20)},
        fetch_only_known_kinds=True,
        periodic_jobs=PERIODIC_JOBS,
    )


def database_url(argv: list[str]) -> str:
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("RIVER_DATABASE_URL"):
        return os.environ["RIVER_DATABASE_URL"]
    return "sqlite://" + os.path.join(tempfile.mkdtemp(prefix="river-example-"), "river.sqlite3")


def show_jobs(client: Client) -> None:
    for job in client.jobs.list().jobs:
        print(f"  job {job.id} {job.kind:<15} queue {job.queue:<8} {job.state}")


def main(argv: list[str] | None = None) -> int:
    url = database_url(sys.argv if argv is None else argv)
    with Migrator(url) as migrator:
        migrator.migrate_up()

    # What the Go service would insert: one job for Python, one for itself.
    with Client(url) as inserter:
        inserter.insert(ScoreLeadArgs(lead_id=1))
        inserter.insert(SendInvoiceArgs(invoice_id=7), InsertOpts(queue=GO_QUEUE))
        # A misrouted Go job in the Python queue: fetch_only_known_kinds leaves it alone.
        misrouted = inserter.insert(SendInvoiceArgs(invoice_id=8), InsertOpts(queue=PYTHON_QUEUE)).job

    print("follower (leader election off):")
    follower = follower_client(url)
    with follower.subscribe([EventKind.JOB_COMPLETED]) as completed, follower:
        completed.get(timeout=10)
        show_jobs(follower)

    # A client that registers the Go kinds would claim that misrouted job: with a leader-eligible
    # Python client, keeping Go kinds out of Python queues is what protects them.
    with Client(url) as admin:
        admin.jobs.delete(misrouted.id)

    print("leader-eligible (every kind registered, the fleet's periodic jobs):")
    eligible = leader_eligible_client(url)
    with eligible:
        if eligible.wait_leader(timeout=15):
            # With no Go service running, this client leads and enqueues the fleet's periodic job.
            rollup = wait_for_kind(eligible, NightlyRollupArgs.kind)
            print(f"  leader: enqueued {rollup.kind} into queue {rollup.queue} for the Go service")
        show_jobs(eligible)
    return 0


def wait_for_kind(client: Client, kind: str) -> JobRow:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        page = client.jobs.list(kinds=[kind])
        if page.jobs:
            return page.jobs[0]
        time.sleep(0.05)
    raise TimeoutError(f"no {kind} job was enqueued")


if __name__ == "__main__":
    sys.exit(main())
