"""Leader election on both drivers, real Postgres and SQLite: failover, one leader at a time,
request_resign, clients that never elect, and a leader killed with SIGKILL (its stuck job rescued)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from river_protocol.errors import LeaderElectionDisabledError, ValidationError
from river_protocol.intents import Notify
from river_protocol.machines.maintenance import RESCUE_ERROR
from river_protocol.machines.notifications import TOPIC_LEADERSHIP, build_request_resign
from river_sync import Client, Database, EventKind, JobState, LeaderElectionConfig, PeriodicJob, Workers
from tests.drivers.behaviour.support import fast_client, leader_client, wait_for
from tests.drivers.harness import Harness
from tests.drivers.leader_support import (
    FAST_ELECTION,
    FAST_QUEUE,
    WAIT,
    all_jobs,
    fast_maintenance,
    leader_id,
    metadata,
    wait_until,
)
from tests.drivers.test_client_support import Task


def _workers(h: Harness, **kwargs: Any) -> Workers:
    return h.workers(lambda args: None, Task, **kwargs)


class _OneLeaderWatch:
    """Samples both clients' is_leader on a thread; records any instant where both lead."""

    def __init__(self, *clients: Any) -> None:
        self.clients = clients
        self.overlaps = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if sum(c.is_leader for c in self.clients) > 1:
                self.overlaps += 1
            self.samples += 1
            self._stop.wait(0.002)

    def __enter__(self) -> _OneLeaderWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_failover_to_the_follower(h: Harness, client_db_url: str) -> None:
    postgres = client_db_url.startswith("postgres")
    # On Postgres B polls only every 30 s: taking over within WAIT proves the resignation
    # notification woke it. SQLite sends none, so there B's fast elect poll must find the vacancy.
    slow = LeaderElectionConfig(interval=timedelta(seconds=30), jitter=timedelta(0))
    a = leader_client(h, client_db_url, _workers(h), client_id="client_a")
    b = leader_client(h, client_db_url, _workers(h), client_id="client_b",
                      leader_election=slow if postgres else FAST_ELECTION)
    db = Database.from_url(client_db_url)
    with db, _OneLeaderWatch(a, b) as watch:
        a.start()
        try:
            assert a.wait_leader(True, WAIT)
            assert leader_id(db) == "client_a"
            b.start()
            wait_until(lambda: h.raw(b)._leadership._machine.elector.state.value == "follower", "B following")
            assert not b.is_leader
            a.stop()
            assert not a.is_leader
            assert b.wait_leader(True, WAIT), "B never took over"
            assert leader_id(db) == "client_b"
        finally:
            a.stop()
            b.stop()
        assert leader_id(db) is None  # B resigned on stop, so the row is gone
        assert not b.is_leader
    assert watch.overlaps == 0 and watch.samples > 0


def test_request_resign_makes_the_leader_step_down(h: Harness, client_db_url: str) -> None:
    with leader_client(h, client_db_url, _workers(h)) as client, Database.from_url(client_db_url) as db:
        assert client.wait_leader(True, WAIT)
        leadership = h.raw(client)._leadership
        assert leadership.terms == 1
        assert h.raw(client).leadership_terms == 1  # the public count of enqueuer starts
        db.run(Notify(topic=TOPIC_LEADERSHIP, payloads=(build_request_resign(),)))
        # It resigns, then (alone) wins a new term.
        wait_until(lambda: leadership.terms >= 2, "a second term after request_resign")
        assert client.wait_leader(True, WAIT)
        assert h.raw(client).leadership_terms == leadership.terms


def test_clients_that_never_elect(h: Harness, client_db_url: str) -> None:
    insert_only = h.client(client_db_url)
    no_election = leader_client(h, client_db_url, _workers(h), leader_election=False)
    voter = leader_client(h, client_db_url, _workers(h), client_id="voter")
    with insert_only, no_election, Database.from_url(client_db_url) as db:
        insert_only.insert(Task("x"))
        assert not insert_only.is_leader and not no_election.is_leader
        assert leader_id(db) is None
        with voter:
            assert voter.wait_leader(True, WAIT)
            assert leader_id(db) == "voter"
        assert not no_election.is_leader
        assert leader_id(db) is None


def test_leader_election_disabled_works_jobs_never_leads_and_refuses_periodic_jobs(
    h: Harness, client_db_url: str
) -> None:
    """Go's LeaderElectionDisabled (River v0.48): the client works jobs, never writes river_leader,
    runs no maintenance, and refuses periodic jobs, which only a leader would enqueue."""
    hourly = PeriodicJob(timedelta(hours=1), lambda: Task("p"), id="hourly")
    with pytest.raises(LeaderElectionDisabledError, match="hourly"):
        fast_client(h, client_db_url, _workers(h), leader_election_disabled=True, periodic_jobs=[hourly])
    with pytest.raises(ValidationError, match="contradicts"):
        h.client(client_db_url, leader_election_disabled=True, leader_election=FAST_ELECTION)
    client = leader_client(h, client_db_url, _workers(h), leader_election_disabled=True, leader_election=True)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client, Database.from_url(client_db_url) as db:
        with pytest.raises(LeaderElectionDisabledError):
            client.periodic_jobs.add(hourly)
        job = client.insert(Task("worked")).job
        wait_for(sub, job.id)
        assert not client.is_leader and leader_id(db) is None
        assert h.raw(client).leadership_terms == 0


# ---------------------------------------------------------------- process death

_CHILD = textwrap.dedent("""
    import dataclasses, sys, threading
    from datetime import timedelta
    from typing import ClassVar
    from river_sync import Client, LeaderElectionConfig, QueueConfig, Workers

    @dataclasses.dataclass
    class Task:
        kind: ClassVar[str] = "task"
        name: str = ""

    workers = Workers()
    workers.job(Task)(lambda args: threading.Event().wait())  # runs until the process dies
    election = LeaderElectionConfig(interval=timedelta(milliseconds=200), ttl=timedelta(seconds=2))
    client = Client(sys.argv[1], workers=workers, client_id="doomed", leader_election=election,
                    queues={"default": QueueConfig(fetch_cooldown=timedelta(milliseconds=5),
                                                   fetch_poll_interval=timedelta(milliseconds=50))})
    client.start()
    print("started", flush=True)
    threading.Event().wait()
""")


@pytest.mark.one_async_backend  # seconds of leader TTL and rescue thresholds: protocol time, not loop
def test_killed_leader_its_stuck_job_rescued_and_its_row_taken_over(h: Harness, client_db_url: str) -> None:
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, client_db_url], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    far = timedelta(days=1)
    # The survivor (the driver under test) works another queue, so the rescued job stays put.
    b = leader_client(
        h, client_db_url, _workers(h, next_retry=lambda job: job.attempted_at + far), client_id="survivor",
        queues={"other": FAST_QUEUE}, job_timeout=timedelta(milliseconds=200),
        maintenance=fast_maintenance(rescue_after=timedelta(milliseconds=300)),
    )
    db = Database.from_url(client_db_url)
    try:
        with Client(db) as inserter:
            job_id = inserter.insert(Task("long")).job.id

        def running_in_child() -> bool:
            rows = [j for j in all_jobs(db) if j.id == job_id]
            return bool(rows) and rows[0].state is JobState.RUNNING

        wait_until(lambda: leader_id(db) == "doomed" or child.poll() is not None, "the child to lead")
        assert child.poll() is None, child.communicate()[1][-2000:]
        wait_until(running_in_child, "the child to claim the job")
        with b:
            assert not b.is_leader  # the child's row is still valid
            os.kill(child.pid, signal.SIGKILL)
            child.wait(WAIT)
            assert b.wait_leader(True, WAIT), "the expired row was never taken over"
            assert leader_id(db) == "survivor"

            def rescued() -> Any:
                row = next(j for j in all_jobs(db) if j.id == job_id)
                return row if row.state is not JobState.RUNNING else None

            row = wait_until(rescued, "the rescuer to rescue the stuck job")
    finally:
        db.close()
        if child.poll() is None:
            child.kill()
            child.wait()
    assert row.state is JobState.RETRYABLE
    assert row.attempt == 1 and row.attempted_by == ("doomed",)
    assert row.errors[-1].error == RESCUE_ERROR and row.errors[-1].attempt == 1
    assert metadata(row)["river:rescue_count"] == 1
    assert row.scheduled_at is not None and row.attempted_at is not None
    assert row.scheduled_at - row.attempted_at == far  # the worker's next_retry was used


@pytest.mark.parametrize("value", ["yes", 1])
def test_leader_election_argument_is_checked(h: Harness, value: Any, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="leader_election"):
        h.client(str(tmp_path / "x.sqlite3"), leader_election=value)
