"""A database to look at: River's schema with queues, a leader and jobs in every state.

``python -m river_ui.demo sqlite://river-ui-demo.sqlite3`` fills a database (migrating it
first) so the dashboard has something to show; the browser tests and the screenshot
script (tools/dashboard_screenshots.py) use the same data. Rows go in through
``InsertFullJobs`` (any column values), so finished and failed jobs need no worker.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from river_db.migrator import Migrator
from river_protocol.flow_control import QueueLimits
from river_protocol.golang.gotime import format_rfc3339nano
from river_protocol.intents import FullJobRow, InsertFullJobs, LeaderElect, PauseQueue, UpsertQueue
from river_protocol.migrations import LINE_MAIN, LINE_PYTHON
from river_protocol.states import JobState
from river_protocol.workflow import DEPS, TASK, WORKFLOW_ID, WORKFLOW_NAME
from river_sync import Client

QUEUES = ("default", "email", "reports")
PAUSED_QUEUE = "reports"
LEADER_ID = "worker-1.example_2026_01_01T00_00_00_000000"
TRACE = (
    'Traceback (most recent call last):\n  File "app/jobs.py", line 42, in send_email\n'
    "    smtp.send(message)\nConnectionRefusedError: [Errno 111] Connection refused"
)


def attempt_error(at: datetime, attempt: int, error: str, trace: str = "") -> bytes:
    """One element of ``river_job.errors`` as River stores it."""
    return json.dumps(
        {"at": format_rfc3339nano(at), "attempt": attempt, "error": error, "trace": trace}
    ).encode()


@dataclass(frozen=True, slots=True)
class Seeded:
    """What ``seed_demo`` inserted: the ids by state, in insertion order."""

    ids: dict[JobState, list[int]]


def insert_rows(client: Client, rows: Sequence[FullJobRow]) -> list[int]:
    """Insert ``rows`` as they are (in one transaction); their new ids in order."""
    with client.database.transaction() as ex:
        return [job.id for job in ex.run(InsertFullJobs(tuple(rows)))]


def demo_rows(now: datetime) -> list[FullJobRow]:
    """Jobs in every state across ``QUEUES``, some finished over the last hour (for the chart)."""
    rows: list[FullJobRow] = []
    kinds = ("send_email", "build_report", "sync_account")
    # An hour of finished work, busier in the middle: completed mostly, a few discarded and cancelled.
    moments = [
        now - timedelta(minutes=60 - minute) + timedelta(seconds=9 * k + 3)
        for minute in range(60)
        for k in range(1 + minute * 7 % 4 + (3 if 20 <= minute < 35 else 0))
    ]
    for i, at in enumerate(moments):
        state = (
            JobState.DISCARDED if i % 17 == 5 else JobState.CANCELLED if i % 23 == 7 else JobState.COMPLETED
        )
        queue = QUEUES[i % 3]
        errors = (
            (attempt_error(at, 1, "boom: upstream returned 502", TRACE),)
            if state is JobState.DISCARDED
            else ()
        )
        rows.append(
            FullJobRow(
                kind=kinds[i % 3],
                encoded_args=json.dumps({"customer_id": 1000 + i}).encode(),
                state=state,
                queue=queue,
                attempt=1,
                max_attempts=1 if errors else 25,
                attempted_at=at - timedelta(seconds=2),
                attempted_by=("worker-1",),
                created_at=at - timedelta(seconds=5),
                scheduled_at=at - timedelta(seconds=5),
                finalized_at=at,
                errors=errors,
                tags=("demo",),
                metadata=json.dumps(
                    {"output": {"sent": True}} if state is JobState.COMPLETED and i % 10 == 0 else {}
                ).encode(),
            )
        )
    for i in range(12):
        rows.append(
            FullJobRow(
                kind=kinds[i % 3],
                encoded_args=json.dumps({"customer_id": 2000 + i}).encode(),
                state=JobState.AVAILABLE,
                queue=QUEUES[i % 3],
                priority=1 + i % 4,
                created_at=now - timedelta(minutes=12 - i),
                scheduled_at=now - timedelta(minutes=12 - i),
                tags=("demo", "urgent") if i % 4 == 0 else ("demo",),
            )
        )
    for i in range(3):
        rows.append(
            FullJobRow(
                kind="build_report",
                encoded_args=b'{"report":"monthly"}',
                state=JobState.RUNNING,
                queue=QUEUES[i],
                attempt=1,
                attempted_at=now - timedelta(seconds=30),
                attempted_by=("worker-1",),
                created_at=now - timedelta(minutes=1),
                scheduled_at=now - timedelta(minutes=1),
            )
        )
    for i in range(4):
        rows.append(
            FullJobRow(
                kind="send_email",
                encoded_args=b'{"customer_id":7}',
                state=JobState.SCHEDULED,
                queue="email",
                created_at=now,
                scheduled_at=now + timedelta(hours=i + 1),
            )
        )
    rows.append(
        FullJobRow(
            kind="sync_account",
            encoded_args=b'{"account":"acme"}',
            state=JobState.RETRYABLE,
            queue="default",
            attempt=2,
            attempted_at=now - timedelta(minutes=3),
            attempted_by=("worker-1",),
            created_at=now - timedelta(minutes=20),
            scheduled_at=now + timedelta(minutes=4),
            errors=(
                attempt_error(now - timedelta(minutes=15), 1, "timeout after 30s"),
                attempt_error(now - timedelta(minutes=3), 2, "ConnectionRefusedError: [Errno 111]", TRACE),
            ),
            tags=("billing",),
        )
    )
    rows.append(
        FullJobRow(
            kind="send_email",
            encoded_args=b'{"customer_id":8}',
            state=JobState.PENDING,
            queue="email",
            created_at=now,
            scheduled_at=now,
        )
    )
    for minutes in (15, 30, 45):  # a periodic job's last runs
        at = now - timedelta(minutes=minutes)
        rows.append(
            FullJobRow(
                kind="hourly_cleanup",
                encoded_args=b"{}",
                state=JobState.COMPLETED,
                queue="default",
                attempt=1,
                attempted_at=at,
                created_at=at,
                scheduled_at=at,
                finalized_at=at,
                metadata=b'{"periodic":true,"river:periodic_job_id":"cleanup"}',
            )
        )
    return rows


def _task(workflow_id: str, workflow_name: str, task: str, deps: tuple[str, ...]) -> bytes:
    meta: dict[str, object] = {WORKFLOW_ID: workflow_id, WORKFLOW_NAME: workflow_name, TASK: task}
    if deps:
        meta[DEPS] = list(deps)
    return json.dumps(meta).encode()


def workflow_rows(now: datetime) -> list[FullJobRow]:
    """Two workflows in the ``reports`` queue: one failed (a discarded task cancelled its
    dependents), one under way; their tasks carry this project's ``river_py:`` metadata."""
    at = now - timedelta(minutes=30)
    done: dict[str, Any] = {"attempt": 1, "attempted_at": at, "finalized_at": at + timedelta(seconds=20)}
    failed = (attempt_error(at, 1, "refunds API returned 500", TRACE),)
    plan: list[tuple[str, str, str, tuple[str, ...], JobState, dict[str, Any]]] = [
        ("wf_nightly_report", "nightly report", "extract", (), JobState.COMPLETED, done),
        ("wf_nightly_report", "nightly report", "transform_orders", ("extract",), JobState.COMPLETED, done),
        (
            "wf_nightly_report",
            "nightly report",
            "transform_refunds",
            ("extract",),
            JobState.DISCARDED,
            {**done, "errors": failed, "max_attempts": 1},
        ),
        (
            "wf_nightly_report",
            "nightly report",
            "load",
            ("transform_orders", "transform_refunds"),
            JobState.CANCELLED,
            {"finalized_at": at + timedelta(seconds=21)},
        ),
        (
            "wf_nightly_report",
            "nightly report",
            "notify",
            ("load",),
            JobState.CANCELLED,
            {"finalized_at": at + timedelta(seconds=21)},
        ),
        ("wf_signup_42", "signup", "create_account", (), JobState.COMPLETED, done),
        ("wf_signup_42", "signup", "send_welcome", ("create_account",), JobState.AVAILABLE, {}),
        (
            "wf_signup_42",
            "signup",
            "provision_storage",
            ("create_account",),
            JobState.RUNNING,
            {"attempt": 1, "attempted_at": now - timedelta(seconds=5)},
        ),
        ("wf_signup_42", "signup", "finish", ("send_welcome", "provision_storage"), JobState.PENDING, {}),
    ]
    return [
        FullJobRow(
            kind=f"report_{task}" if wid == "wf_nightly_report" else f"signup_{task}",
            encoded_args=b"{}",
            state=state,
            queue="reports",
            created_at=at,
            scheduled_at=at,
            metadata=_task(wid, name, task, deps),
            **extra,
        )
        for wid, name, task, deps, state, extra in plan
    ]


def seed_demo(database_url: str, *, now: datetime | None = None) -> Seeded:
    """Migrate ``database_url`` (River's line and ours) and fill it: ``demo_rows``, two
    workflows, queues (one paused, two with flow-control limits) and a leader."""
    now = now or datetime.now(UTC)
    for line in (LINE_MAIN, LINE_PYTHON):  # River's tables, then ours (flow control's limits)
        with Migrator(database_url, line=line) as migrator:
            migrator.migrate_up()
    client = Client(database_url, leader_election=False, notifications=False)
    try:
        rows = demo_rows(now) + workflow_rows(now)
        ids = insert_rows(client, rows)
        with client.database.transaction() as ex:
            for name in QUEUES:
                ex.run(UpsertQueue(name, now=now - timedelta(hours=2)))
            ex.run(PauseQueue(PAUSED_QUEUE))
            ex.run(LeaderElect(LEADER_ID, ttl=timedelta(hours=1)))
        client.queues.set_limits("email", QueueLimits(global_limit=10, local_limit=2))
        client.queues.set_limits("reports", QueueLimits(rate_allowed=100, rate_period=timedelta(minutes=1)))
    finally:
        client.close()
    by_state: dict[JobState, list[int]] = {s: [] for s in JobState}
    for row, job_id in zip(rows, ids, strict=True):
        by_state[row.state].append(job_id)
    return Seeded(by_state)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m river_ui.demo DATABASE_URL", file=sys.stderr)
        return 2
    seeded = seed_demo(args[0])
    print(", ".join(f"{state.value}: {len(ids)}" for state, ids in seeded.ids.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
