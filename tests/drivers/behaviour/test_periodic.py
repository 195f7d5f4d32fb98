"""Periodic jobs on both drivers, real Postgres and SQLite: cron and interval schedules, run_on_start,
metadata, constructor results, only the leader enqueues, add/remove at runtime."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from river_protocol.errors import ValidationError
from river_sync import Database, InsertOpts, JobState, PeriodicJob, Workers
from tests.drivers.behaviour.support import leader_client
from tests.drivers.harness import Harness
from tests.drivers.leader_support import WAIT, all_jobs, metadata, wait_until
from tests.drivers.test_client_support import Other, Task

FAST = timedelta(milliseconds=200)
HOUR = timedelta(hours=1)
PARKED = InsertOpts(queue="parked")  # a queue nobody works: periodic rows stay available


def _workers(h: Harness) -> Workers:
    workers = h.workers(lambda args: None, Task)
    workers.job(Other)(h.worker(lambda args: None))
    return workers


def _by_id(db: Database) -> Counter[str]:
    return Counter(str(metadata(j).get("river:periodic_job_id", "")) for j in all_jobs(db)
                   if metadata(j).get("periodic") is True)


def test_schedules_run_on_start_and_metadata(h: Harness, client_db_url: str) -> None:
    jobs = [
        PeriodicJob("@every 1s", lambda: Task("cron"), id="cron", opts=PARKED),
        PeriodicJob(FAST, lambda: (Task("interval"), InsertOpts(queue="parked", priority=3)), id="interval"),
        PeriodicJob(HOUR, lambda: Other(7), id="on_start", run_on_start=True, opts=PARKED),
        PeriodicJob(HOUR, lambda: Other(8), id="not_on_start", opts=PARKED),
        PeriodicJob(FAST, lambda: None, id="skipper"),
        PeriodicJob(FAST, lambda: Task("anon"), opts=PARKED),
    ]
    with Database.from_url(client_db_url) as db, \
            leader_client(h, client_db_url, _workers(h), periodic_jobs=jobs):
        wait_until(lambda: _by_id(db)["cron"] >= 1 and _by_id(db)["interval"] >= 3,
                   "the cron and the interval job to be enqueued")
        counts = _by_id(db)
        rows = all_jobs(db)
    assert counts["on_start"] == 1 and counts["not_on_start"] == 0 and counts["skipper"] == 0
    assert counts[""] >= 1  # no id: periodic, without the id key
    interval = [j for j in rows if metadata(j).get("river:periodic_job_id") == "interval"]
    assert all(j.queue == "parked" and j.priority == 3 and j.args == {"name": "interval"} for j in interval)
    assert all(j.state is JobState.AVAILABLE for j in interval)
    cron = next(j for j in rows if metadata(j).get("river:periodic_job_id") == "cron")
    # @every 1s fires on whole seconds; the row is scheduled at its planned run time.
    assert cron.scheduled_at is not None and cron.scheduled_at.microsecond == 0
    on_start = next(j for j in rows if metadata(j).get("river:periodic_job_id") == "on_start")
    assert on_start.kind == "other" and on_start.args == {"n": 7}
    # (SQLite inserts also carry river:unique_nonce, as Go's SQLite driver writes it.)
    meta = {k: v for k, v in metadata(on_start).items() if k != "river:unique_nonce"}
    assert meta == {"periodic": True, "river:periodic_job_id": "on_start"}


def test_periodic_job_is_worked(h: Harness, client_db_url: str) -> None:
    ran: list[str] = []
    workers = h.workers(lambda args: ran.append(args.name), Task)
    periodic = PeriodicJob(HOUR, lambda: Task("periodic"), run_on_start=True, id="p1")
    with leader_client(h, client_db_url, workers, periodic_jobs=[periodic]) as client:
        assert client.wait_leader(True, WAIT)
        wait_until(lambda: ran, "the periodic job to be worked")
    assert ran == ["periodic"] and not client.is_leader


def test_only_the_leader_enqueues_and_the_follower_takes_over(h: Harness, client_db_url: str) -> None:
    a = leader_client(h, client_db_url, _workers(h), client_id="a",
                      periodic_jobs=[PeriodicJob(FAST, lambda: Task("a"), id="from_a", opts=PARKED)])
    b = leader_client(h, client_db_url, _workers(h), client_id="b",
                      periodic_jobs=[PeriodicJob(FAST, lambda: Task("b"), id="from_b", opts=PARKED,
                                                 run_on_start=True)])
    with Database.from_url(client_db_url) as db:
        try:
            a.start()
            assert a.wait_leader(True, WAIT)
            b.start()
            wait_until(lambda: _by_id(db)["from_a"] >= 3, "the leader's periodic job")
            assert not b.is_leader and _by_id(db)["from_b"] == 0
            a.stop()
            assert b.wait_leader(True, WAIT)
            settled = _by_id(db)["from_a"]
            wait_until(lambda: _by_id(db)["from_b"] >= 3, "the new leader's periodic job")
            assert _by_id(db)["from_a"] == settled  # A stopped enqueuing when it stepped down
        finally:
            a.stop()
            b.stop()


def test_add_and_remove_at_runtime(h: Harness, client_db_url: str) -> None:
    control = PeriodicJob(FAST, lambda: Task("control"), id="control", opts=PARKED)
    with Database.from_url(client_db_url) as db, \
            leader_client(h, client_db_url, _workers(h), periodic_jobs=[control]) as client:
        assert client.wait_leader(True, WAIT)
        assert len(client.periodic_jobs) == 1
        with pytest.raises(ValidationError, match="already registered: control"):
            client.periodic_jobs.add(PeriodicJob(FAST, lambda: Task("dup"), id="control"))
        handle = client.periodic_jobs.add(PeriodicJob(FAST, lambda: Task("h"), opts=PARKED, id="by_handle"))
        client.periodic_jobs.add(PeriodicJob(FAST, lambda: Task("i"), opts=PARKED, id="by_id"))
        wait_until(lambda: _by_id(db)["by_handle"] >= 2 and _by_id(db)["by_id"] >= 2, "the added jobs")

        assert client.periodic_jobs.remove(handle) is True
        assert client.periodic_jobs.remove(handle) is False
        assert client.periodic_jobs.remove_by_id("by_id") is True
        assert client.periodic_jobs.remove_by_id("by_id") is False
        # The removal is queued before any later fire; two control fires later nothing else is added.
        mark = _by_id(db)["control"]
        wait_until(lambda: _by_id(db)["control"] >= mark + 2, "two more control runs")
        removed = (_by_id(db)["by_handle"], _by_id(db)["by_id"])
        mark = _by_id(db)["control"]
        wait_until(lambda: _by_id(db)["control"] >= mark + 3, "three more control runs")
        assert (_by_id(db)["by_handle"], _by_id(db)["by_id"]) == removed
        # An id is free again once removed.
        client.periodic_jobs.add(PeriodicJob(FAST, lambda: Task("again"), opts=PARKED, id="by_id"))
        wait_until(lambda: _by_id(db)["by_id"] > removed[1], "the re-added job")
        client.periodic_jobs.clear()
        assert len(client.periodic_jobs) == 0


def test_jobs_added_while_following_run_once_leading(h: Harness, client_db_url: str) -> None:
    # A client that works queues but hasn't started follows; definitions wait for a term.
    client = leader_client(h, client_db_url, _workers(h))
    late = PeriodicJob(HOUR, lambda: Task("late"), run_on_start=True, id="late", opts=PARKED)
    client.periodic_jobs.add(late)
    with Database.from_url(client_db_url) as db, client:
        wait_until(lambda: _by_id(db)["late"] == 1, "the run-on-start job of a definition added before start")


def test_a_failing_constructor_skips_only_its_own_run(h: Harness, client_db_url: str) -> None:
    def broken() -> Any:
        raise RuntimeError("boom")

    jobs = [
        PeriodicJob(FAST, broken, id="broken"),
        PeriodicJob(FAST, lambda: "not args", id="bad_args"),
        PeriodicJob(FAST, lambda: Task("fine"), id="fine", opts=PARKED),
    ]
    with Database.from_url(client_db_url) as db, \
            leader_client(h, client_db_url, _workers(h), periodic_jobs=jobs):
        wait_until(lambda: _by_id(db)["fine"] >= 3, "the healthy periodic job")
        assert _by_id(db)["broken"] == 0 and _by_id(db)["bad_args"] == 0
