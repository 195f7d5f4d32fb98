"""``python -m river_tools.demo``: River in one minute, on an embedded SQLite file.

It migrates a database (default ``./river-demo.sqlite3``, recreated on every
run; or ``--database-url``, used as it is, so a second run finds the first
one's jobs and works its own beside them), inserts a handful of jobs that
each show one part of River's job lifecycle, works them with a started
client, and prints what happened to every job: its state, its attempts and
the errors recorded along the way. Exit status 0 when every job ended as
expected.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar, TextIO

from river_db.events import Event, SubscriptionTimeoutError
from river_db.migrator import Migrator
from river_protocol.job import JobRow
from river_protocol.leadership import PeriodicJob
from river_protocol.options import InsertOpts
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts
from river_protocol.work import JobCancel, JobSnooze
from river_protocol.workers import Workers
from river_sync.client import Client, QueueConfig
from river_sync.context import WorkContext

DEFAULT_DATABASE = "river-demo.sqlite3"
DEADLINE_SECONDS = 30.0
RETRY_DELAY = timedelta(seconds=1)
SNOOZE_DELAY = timedelta(seconds=1)

# ---------------------------------------------------------------- job args


@dataclass
class SayHello:
    kind: ClassVar[str] = "say_hello"
    name: str


@dataclass
class UploadReport:
    kind: ClassVar[str] = "upload_report"
    report_id: int


@dataclass
class ShipOrder:
    kind: ClassVar[str] = "ship_order"
    order_id: int


@dataclass
class ChargeCard:
    kind: ClassVar[str] = "charge_card"
    card: str


@dataclass
class SendWelcome:
    kind: ClassVar[str] = "send_welcome"
    user_id: int


@dataclass
class Digest:
    kind: ClassVar[str] = "nightly_digest"


# ---------------------------------------------------------------- workers


class Console:
    """Whole lines only: workers run on their own threads and must not interleave."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def line(self, text: str = "") -> None:
        with self._lock:
            self._out.write(text + "\n")
            self._out.flush()


def build_workers(console: Console) -> Workers:
    workers = Workers()

    def say(ctx: WorkContext, text: str) -> None:
        console.line(f"  [worker] job {ctx.job.id} {ctx.job.kind}: {text}")

    @workers.job(SayHello)
    def say_hello(ctx: WorkContext, args: SayHello) -> None:
        say(ctx, f"hello, {args.name}!")

    def retry_soon(job: JobRow) -> datetime:
        # River's default policy waits attempt⁴ seconds (1 s, 16 s, 81 s...); the
        # demo keeps the retry short so it finishes promptly.
        return datetime.now(UTC) + RETRY_DELAY

    @workers.job(UploadReport, next_retry=retry_soon)
    def upload_report(ctx: WorkContext, args: UploadReport) -> None:
        if ctx.job.attempt == 1:
            say(ctx, f"attempt 1 uploading report {args.report_id}: the storage service is down")
            raise ConnectionError("storage service unavailable")
        say(ctx, f"attempt {ctx.job.attempt} uploading report {args.report_id}: done")

    @workers.job(ShipOrder)
    def ship_order(ctx: WorkContext, args: ShipOrder) -> None:
        # A snooze doesn't consume an attempt; River counts snoozes in metadata.
        if not ctx.job.metadata.get("snoozes"):
            say(ctx, f"order {args.order_id} is not packed yet: snoozing {SNOOZE_DELAY.total_seconds():g} s")
            raise JobSnooze(SNOOZE_DELAY)
        say(ctx, f"order {args.order_id} shipped")

    @workers.job(ChargeCard)
    def charge_card(ctx: WorkContext, args: ChargeCard) -> None:
        say(ctx, f"card {args.card} has expired: cancelling, no retry would help")
        raise JobCancel("card expired")

    @workers.job(SendWelcome)
    def send_welcome(ctx: WorkContext, args: SendWelcome) -> None:
        say(ctx, f"welcome mail sent to user {args.user_id}")

    @workers.job(Digest)
    def digest(ctx: WorkContext, args: Digest) -> None:
        say(ctx, "nightly digest built (inserted by the periodic enqueuer)")

    return workers


# ---------------------------------------------------------------- the demo


@dataclass(frozen=True)
class Expectation:
    job_id: int
    note: str
    state: JobState


def prepare_database(url: str | None, console: Console) -> str:
    if url is None:
        url = DEFAULT_DATABASE
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(url + suffix):
                os.remove(url + suffix)
    with Migrator(url) as migrator:
        applied = migrator.migrate_up().versions
    console.line(f"database: {url} ({len(applied)} migrations applied)")
    return url


def insert_jobs(client: Client, console: Console) -> list[Expectation]:
    console.line()
    console.line("inserting jobs:")
    plan = [
        (SayHello(name="River"), None, "completes on its first attempt", JobState.COMPLETED),
        (UploadReport(report_id=7), None, f"fails once, retried after {RETRY_DELAY.total_seconds():g} s",
         JobState.COMPLETED),
        (ShipOrder(order_id=42), None, f"snoozes {SNOOZE_DELAY.total_seconds():g} s, then completes",
         JobState.COMPLETED),
        (ChargeCard(card="**** 4242"), None, "cancels itself with JobCancel", JobState.CANCELLED),
    ]
    expected: list[Expectation] = []
    for args, opts, note, state in plan:
        job = client.insert(args, opts).job
        console.line(f"  job {job.id:>2} {job.kind:<15} {note}")
        expected.append(Expectation(job.id, note, state))

    # Unique by args: the user id is new on every run (the first job's id), so a second run on
    # the same database inserts its own job rather than finding the last run's.
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    welcome = SendWelcome(user_id=expected[0].job_id)
    first = client.insert(welcome, unique)
    if first.unique_skipped_as_duplicate:
        raise SystemExit(f"demo: {welcome} was skipped as a duplicate of job {first.job.id} "
                         f"({first.job.state}); expected a new job")
    console.line(f"  job {first.job.id:>2} {first.job.kind:<15} unique by args")
    expected.append(Expectation(first.job.id, "unique by args", JobState.COMPLETED))
    again = client.insert(welcome, unique)
    if not again.unique_skipped_as_duplicate:
        raise SystemExit(f"demo: {welcome} inserted again as job {again.job.id}; expected the insert "
                         f"to be skipped as a duplicate of job {first.job.id} (unique by args)")
    console.line(f"  (same args again: skipped as a duplicate of job {again.job.id}; no new row)")
    return expected


def wait_until_done(
    client: Client, expected: list[Expectation], console: Console, *, after_id: int = 0
) -> list[JobRow]:
    """Print job events as they come until every demo job is finalized (the periodic one included).

    ``after_id``: the highest job id before this run; a periodic job of an earlier run on the same
    database has a lower one.
    """
    ids = {e.job_id for e in expected}
    deadline = time.monotonic() + DEADLINE_SECONDS
    with client.subscribe() as events:
        while True:
            rows = _demo_rows(client, ids, after_id)
            if len(rows) == len(ids) + 1 and all(row.finalized for row in rows):
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(unfinished_message(rows, ids))
            try:
                _show(events.get(timeout=min(left, 1.0)), console)
            except SubscriptionTimeoutError:
                continue  # the periodic job may have been inserted meanwhile; look again
        # A job's event follows its commit, so the last ones may still be on their way.
        client.stop()
        for event in events:
            _show(event, console)
    return rows


def _show(event: Event, console: Console) -> None:
    if event.job is not None:
        console.line(f"  [event]  {event.kind.value:<16} job {event.job.id} ({event.job.kind}) "
                     f"-> {event.job.state}")


def _demo_rows(client: Client, ids: set[int], after_id: int) -> list[JobRow]:
    rows = list(client.jobs.list(ids=sorted(ids)).jobs)
    rows += [row for row in client.jobs.list(kinds=[Digest.kind], descending=True, limit=10).jobs
             if row.id > after_id]
    return sorted(rows, key=lambda row: row.id)


def _latest_job_id(client: Client) -> int:
    page = client.jobs.list(descending=True, limit=1).jobs
    return page[0].id if page else 0


def unfinished_message(rows: list[JobRow], ids: set[int]) -> str:
    """Why the demo gave up: each job not finalized in time, with its state and last error."""
    lines = [f"demo: jobs still unfinished after {DEADLINE_SECONDS:g} s:"]
    for row in rows:
        if row.finalized:
            continue
        error = f"; last error: {row.errors[-1].error}" if row.errors else ""
        lines.append(f"  job {row.id} {row.kind} is {row.state} (attempt {row.attempt}/{row.max_attempts}"
                     f"{error})")
    missing = sorted(ids - {row.id for row in rows})
    if missing:
        lines.append(f"  jobs {missing} are gone from the database (deleted by another process?)")
    if not any(row.kind == Digest.kind for row in rows):
        lines.append(f"  the periodic job {Digest.kind} was never inserted: this client was not elected "
                     "leader (is another client leading on this database?)")
    return "\n".join(lines)


def report(rows: list[JobRow], expected: list[Expectation], console: Console) -> bool:
    """One line per job (plus notes); True when every job ended in the state it was meant to."""
    wanted = {e.job_id: e.state for e in expected}
    console.line()
    console.line("what happened:")
    console.line(f"  {'job':>3}  {'kind':<15} {'state':<10} {'attempts':<9} errors")
    ok = True
    for row in rows:
        want = wanted.get(row.id, JobState.COMPLETED)
        ok = ok and row.state is want
        mark = "" if row.state is want else f"   <-- expected {want}"
        errors = "; ".join(f"attempt {e.attempt}: {e.error}" for e in row.errors) or "-"
        attempts = f"{row.attempt}/{row.max_attempts}"
        console.line(f"  {row.id:>3}  {row.kind:<15} {row.state!s:<10} {attempts:<9} {errors}{mark}")
        if row.metadata.get("snoozes"):
            console.line(f"  {'':>3}  {'':<15} snoozed {row.metadata['snoozes']} time(s), no attempt used")
        periodic_id = row.metadata.get("river:periodic_job_id")
        if periodic_id:
            console.line(f"  {'':>3}  {'':<15} inserted by the leader for periodic job {periodic_id!r}")
    return ok


def run(url: str | None, out: TextIO | None = None) -> int:
    """The whole demo on ``url`` (None: the default file, recreated); 0 when all went as expected."""
    console = Console(out or sys.stdout)
    url = prepare_database(url, console)
    digest = PeriodicJob(timedelta(hours=24), Digest, run_on_start=True, id="nightly_digest")
    client = Client(
        url,
        workers=build_workers(console),
        # A short poll picks up the retried and snoozed jobs promptly once their delay is up.
        queues={"default": QueueConfig(max_workers=10, fetch_poll_interval=timedelta(milliseconds=200))},
        periodic_jobs=[digest],
    )
    console.line("periodic job: nightly_digest, every 24 h and once as soon as a leader is elected")
    after_id = _latest_job_id(client)  # a database used before keeps its jobs, and their ids
    with client:
        expected = insert_jobs(client, console)
        console.line()
        console.line("working (the client is started; worker output and events as they happen):")
        rows = wait_until_done(client, expected, console, after_id=after_id)
    ok = report(rows, expected, console)
    console.line()
    console.line("all jobs ended as expected" if ok else "some jobs did not end as expected")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m river_tools.demo",
        description="River in one minute: insert jobs of several kinds, work them, report what happened.",
    )
    parser.add_argument(
        "--database-url", metavar="URL",
        help=f"postgresql://... or a SQLite path/URL (default: ./{DEFAULT_DATABASE}, recreated each run)",
    )
    args = parser.parse_args(argv)
    return run(args.database_url)


if __name__ == "__main__":
    sys.exit(main())
