"""Leader-run maintenance on both drivers, real Postgres and SQLite: scheduler, job cleaner
(retentions, -1 keeps), queue cleaner, SQLite notification cleaner, leader-only."""

from __future__ import annotations

from datetime import timedelta

import pytest

from river_protocol.intents import FullJobRow, InsertFullJobs, ListQueues, UpsertQueue
from river_sync import Database, JobSnooze, JobState, Workers
from tests.drivers.behaviour.support import leader_client
from tests.drivers.harness import Harness
from tests.drivers.leader_support import (
    WAIT,
    ago,
    all_jobs,
    db_time,
    execute,
    fast_maintenance,
    wait_until,
)
from tests.drivers.test_client_support import Task


def _workers(h: Harness) -> Workers:
    return h.workers(lambda args: None, Task)


def _insert(db: Database, *rows: FullJobRow) -> list[int]:
    result = db.run(InsertFullJobs(rows))
    return [r.id for r in result]


def _states(db: Database) -> dict[int, JobState]:
    return {j.id: j.state for j in all_jobs(db)}


def test_scheduler_makes_due_jobs_available(h: Harness, client_db_url: str) -> None:
    with Database.from_url(client_db_url) as db:
        # Queue "elsewhere" isn't worked, so an available job stays available.
        due_scheduled, due_retryable, later = _insert(
            db,
            FullJobRow(kind="task", queue="elsewhere", state=JobState.SCHEDULED, scheduled_at=ago(seconds=5)),
            FullJobRow(kind="task", queue="elsewhere", state=JobState.RETRYABLE, scheduled_at=ago(seconds=1),
                       attempt=1),
            FullJobRow(kind="task", queue="elsewhere", state=JobState.SCHEDULED, scheduled_at=ago(hours=-1)),
        )
        with leader_client(h, client_db_url, _workers(h)) as client:
            assert client.wait_leader(True, WAIT)
            wait_until(
                lambda: {_states(db)[due_scheduled], _states(db)[due_retryable]} == {JobState.AVAILABLE},
                "the scheduler to make both due jobs available",
            )
            assert _states(db)[later] is JobState.SCHEDULED


def test_snoozed_job_comes_back_through_the_scheduler(h: Harness, client_db_url: str) -> None:
    runs: list[str] = []

    def work(args: Task) -> None:
        runs.append(args.name)
        if len(runs) == 1:
            raise JobSnooze(timedelta(milliseconds=200))

    with leader_client(h, client_db_url, h.workers(work, Task)) as client:
        sub = client.subscribe(["job_completed"])
        assert client.wait_leader(True, WAIT)
        job_id = client.insert(Task("snooze")).job.id
        # Snoozed for 200 ms: only the leader's scheduler makes it available again.
        event = sub.get(timeout=WAIT)
        assert event.job.id == job_id and event.job.attempt == 1
    assert runs == ["snooze", "snooze"]


def test_job_cleaner_honours_retentions(h: Harness, client_db_url: str) -> None:
    maintenance = fast_maintenance(
        completed_retention=timedelta(hours=1), cancelled_retention=-1,
        discarded_retention=timedelta(hours=1),
    )
    with Database.from_url(client_db_url) as db:
        old = ago(hours=2)
        old_completed, new_completed, old_cancelled, old_discarded, old_running = _insert(
            db,
            FullJobRow(kind="task", state=JobState.COMPLETED, finalized_at=old, attempt=1),
            FullJobRow(kind="task", state=JobState.COMPLETED, finalized_at=ago(minutes=1), attempt=1),
            FullJobRow(kind="task", state=JobState.CANCELLED, finalized_at=ago(days=30), attempt=1),
            FullJobRow(kind="task", state=JobState.DISCARDED, finalized_at=old, attempt=1),
            FullJobRow(kind="task", queue="elsewhere", state=JobState.RUNNING, attempt=1, attempted_at=old),
        )
        with leader_client(h, client_db_url, _workers(h), maintenance=maintenance):
            wait_until(lambda: not {old_completed, old_discarded} & set(_states(db)),
                       "the cleaner to delete old completed and discarded jobs")
            # One statement covers all states: the run that deleted those also judged these.
            assert set(_states(db)) == {new_completed, old_cancelled, old_running}


def test_queue_cleaner_deletes_stale_queues(h: Harness, client_db_url: str) -> None:
    with Database.from_url(client_db_url) as db:
        db.run(UpsertQueue("stale", now=ago(days=2)))
        db.run(UpsertQueue("fresh", now=ago(hours=1)))

        def names() -> set[str]:
            return {q.name for q in db.run(ListQueues(), readonly=True)}

        assert {"stale", "fresh"} <= names()
        with leader_client(h, client_db_url, _workers(h)):
            wait_until(lambda: "stale" not in names(), "the queue cleaner to delete the stale queue")
            assert {"fresh", "default"} <= names()


@pytest.mark.parametrize("client_db_url", ["sqlite"], indirect=True)  # the outbox is SQLite's alone
def test_sqlite_notification_cleaner(h: Harness, client_db_url: str) -> None:
    with Database.from_url(client_db_url) as db:
        sql = "INSERT INTO river_notification (topic, payload, created_at) VALUES (?, ?, ?)"
        execute(db, "", sql, ("test_topic", "old", db_time(db, ago(minutes=10))))
        execute(db, "", sql, ("test_topic", "new", db_time(db, ago(minutes=1))))

        def payloads() -> list[str]:
            with db.executor(readonly=True) as ex:
                rows = ex.conn.execute("SELECT payload FROM river_notification WHERE topic = 'test_topic'")
                return sorted(r[0] for r in rows.fetchall())

        assert payloads() == ["new", "old"]
        with leader_client(h, client_db_url, _workers(h)):
            wait_until(lambda: payloads() == ["new"], "the notification cleaner to delete the old row")


def test_only_the_leader_maintains(h: Harness, client_db_url: str) -> None:
    # A follower (leader election on but beaten to it) and a non-voter never run the cleaner.
    with Database.from_url(client_db_url) as db:
        (old_completed,) = _insert(db, FullJobRow(kind="task", state=JobState.COMPLETED,
                                                  finalized_at=ago(days=3), attempt=1))
        execute(db, "INSERT INTO river_leader (leader_id, elected_at, expires_at) "
                    "VALUES ('elsewhere', now(), now() + interval '1 hour')",
                "INSERT INTO river_leader (leader_id, elected_at, expires_at) VALUES (?, ?, ?)",
                () if db.dialect.name == "postgres" else
                ("elsewhere", db_time(db, ago()), db_time(db, ago(hours=-1))))
        follower = leader_client(h, client_db_url, _workers(h))
        non_voter = leader_client(h, client_db_url, _workers(h), leader_election=False)
        with follower, non_voter:
            # Both work jobs (so both are fully up; the follower's first elect ran at start).
            done = follower.insert(Task("probe")).job.id
            wait_until(lambda: _states(db)[done] is JobState.COMPLETED, "the probe job to complete")
            assert not follower.is_leader and not non_voter.is_leader
            assert old_completed in _states(db)
        execute(db, "DELETE FROM river_leader", "DELETE FROM river_leader")
        with leader_client(h, client_db_url, _workers(h)) as leader:
            assert leader.wait_leader(True, WAIT)
            wait_until(lambda: old_completed not in _states(db), "the leader to clean")
