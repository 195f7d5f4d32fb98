"""Both clients behind a real PgBouncer in transaction pooling mode, with a plain URL.

Through transaction pooling consecutive transactions of one client connection may
run on different server connections, and a server connection serves many
clients: a statement prepared on one is unknown on the next, and LISTEN stays on
a server connection no one reads. The PgBouncer is the suite's own
(``tests.pgbouncer``, the ``pgbouncer`` fixture), with fewer server connections
than the clients open, so statements really do move between them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from river_sync import Database, EventKind, InsertManyParams, JobState, QueueConfig
from tests.drivers.behaviour.support import fast_client, leader_client, row, wait_for, wait_for_all
from tests.drivers.harness import WAIT, Harness
from tests.drivers.leader_support import FAST_ELECTION, leader_id, wait_until
from tests.drivers.test_client_support import Task
from tests.pgbouncer import TRANSACTION_POOL_PROBE_TIMEOUT

pytestmark = pytest.mark.postgres

BURN_DOWN = 1500


@pytest.fixture(name="bounced")
def bounced_fixture(_migrated_pg: str, pgbouncer: Any) -> Iterator[tuple[str, str]]:
    """(URL through PgBouncer in transaction mode, direct URL) of a migrated, empty database."""
    with psycopg.connect(_migrated_pg, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_queue, river_leader RESTART IDENTITY")
    yield pgbouncer.url(_migrated_pg), _migrated_pg


def _pooled(h: Harness, client: Any) -> Any:
    """A client behind the transaction pool: its listener probe fails whatever it waits, so
    it waits less than River's 2 s."""
    h.raw(client).testing_listen_probe_timeout = TRANSACTION_POOL_PROBE_TIMEOUT
    return client


def _states(direct: str) -> dict[str, int]:
    with psycopg.connect(direct, autocommit=True) as conn:
        return dict(conn.execute("SELECT state::text, count(*) FROM river_job GROUP BY 1").fetchall())


def test_insert_in_a_callers_transaction_commits_and_rolls_back(
    h: Harness, bounced: tuple[str, str]
) -> None:
    url, direct = bounced
    client = _pooled(h, fast_client(h, url, h.workers(lambda args: None, Task)))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    # The caller's own connection through PgBouncer, with psycopg's default prepare_threshold:
    # River's statements on it are never prepared, however often they run.
    with client, psycopg.connect(url) as conn:
        for _ in range(3):
            kept = [client.insert(Task(f"kept {i}"), tx=conn).job.id for i in range(7)]
            conn.commit()
            doomed = [client.insert(Task(f"doomed {i}"), tx=conn).job.id for i in range(7)]
            conn.rollback()
            wait_for_all(sub, kept)
            assert all(row(direct, job_id).state is JobState.COMPLETED for job_id in kept)
            with psycopg.connect(direct) as check:
                assert check.execute("SELECT count(*) FROM river_job WHERE id = ANY(%s)",
                                     (doomed,)).fetchone() == (0,)


def test_burn_down_works_every_job_exactly_once(h: Harness, bounced: tuple[str, str]) -> None:
    url, direct = bounced
    runs: dict[str, int] = {}
    lock = threading.Lock()

    def work(args: Task) -> None:
        with lock:
            runs[args.name] = runs.get(args.name, 0) + 1

    client = _pooled(h, fast_client(h, url, h.workers(work, Task),
                                    queues={"default": QueueConfig(max_workers=50,
                                                                   fetch_cooldown=timedelta(milliseconds=5),
                                                                   fetch_poll_interval=timedelta(milliseconds=50))}))
    with client:
        client.insert_many([InsertManyParams(Task(f"job {i}")) for i in range(BURN_DOWN // 2)])
        for i in range(BURN_DOWN // 2, BURN_DOWN, 50):
            client.insert_many([InsertManyParams(Task(f"job {n}")) for n in range(i, i + 50)])
        wait_until(lambda: _states(direct) == {"completed": BURN_DOWN}, "every job completed",
                   timeout=120)
    assert len(runs) == BURN_DOWN and set(runs.values()) == {1}
    with psycopg.connect(direct) as conn:
        attempts = conn.execute(
            "SELECT attempt, cardinality(attempted_by), count(*) FROM river_job GROUP BY 1, 2"
        ).fetchall()
    assert attempts == [(1, 1, BURN_DOWN)]


def test_one_leader_resigns_and_the_other_takes_over(h: Harness, bounced: tuple[str, str]) -> None:
    url, direct = bounced
    workers = h.workers(lambda args: None, Task)
    a = _pooled(h, leader_client(h, url, workers, client_id="client_a"))
    b = _pooled(h, leader_client(h, url, workers, client_id="client_b", leader_election=FAST_ELECTION))
    both: list[bool] = []
    watching = threading.Event()

    def watch() -> None:  # any instant with two leaders is recorded
        while not watching.wait(0.005):
            both.append(a.is_leader and b.is_leader)

    watcher = threading.Thread(target=watch, daemon=True)
    with Database.from_url(direct) as db:
        watcher.start()
        try:
            with a:
                assert a.wait_leader(True, WAIT)
                assert leader_id(db) == "client_a"
                with b:
                    wait_until(lambda: h.raw(b)._leadership._machine.elector.state.value == "follower",
                               "B following")
                    assert not b.is_leader and leader_id(db) == "client_a"
                    a.stop()  # resigns: its row goes, and B's next poll elects it
                    assert not a.is_leader
                    assert b.wait_leader(True, WAIT), "B never took over"
                    assert leader_id(db) == "client_b"
            assert leader_id(db) is None  # B resigned on stop too
        finally:
            watching.set()
            watcher.join()
    assert both and not any(both)


def test_periodic_and_maintenance_run_through_the_pool(h: Harness, bounced: tuple[str, str]) -> None:
    from river_sync import PeriodicJob

    url, direct = bounced
    client = _pooled(h, leader_client(
        h, url, h.workers(lambda args: None, Task),
        periodic_jobs=[PeriodicJob(timedelta(milliseconds=200), lambda: Task("tick"), run_on_start=True)],
    ))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        assert client.wait_leader(True, WAIT)
        first = sub.get(timeout=WAIT)
        assert first.job is not None and first.job.kind == "task"
        second = sub.get(timeout=WAIT)
        assert second.job is not None and second.job.id != first.job.id
    # The job cleaner is leader maintenance too: nothing here asks it to delete yet.
    assert _states(direct).get("completed", 0) >= 2


# Polls so rarely that a job worked within WAIT proves an insert notification woke the queue.
SLOW_POLL = QueueConfig(fetch_cooldown=timedelta(milliseconds=5), fetch_poll_interval=timedelta(seconds=60))


def _probe_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "LISTEN/NOTIFY does not work" in r.getMessage()]


def test_listener_behind_transaction_pooling_warns_once_and_polls(
    h: Harness, bounced: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url, direct = bounced
    client = _pooled(h, fast_client(h, url, h.workers(lambda args: None, Task),
                                    leader_election=FAST_ELECTION))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with caplog.at_level(logging.WARNING), client:
        assert h.raw(client)._core.config.notifications is False
        wait_for(sub, client.insert(Task("polled")).job.id)
        # The client's own control messages no longer wait for a notification that never comes.
        client.queues.pause("default")
        paused = client.insert(Task("paused")).job.id
        with pytest.raises(TimeoutError):
            sub.get(timeout=0.5)
        assert row(direct, paused).state is JobState.AVAILABLE
        client.queues.resume("default")
        wait_for(sub, paused)
        assert client.wait_leader(True, WAIT)
    warnings = _probe_warnings(caplog)
    assert len(warnings) == 1
    assert "pool_mode = transaction" in warnings[0] and "notifications=" in warnings[0]
    assert f"within {TRANSACTION_POOL_PROBE_TIMEOUT:.1f} s" in warnings[0]  # the wait it gave


def test_a_direct_notifications_url_keeps_listening(
    h: Harness, bounced: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url, direct = bounced
    client = fast_client(h, url, h.workers(lambda args: None, Task), queues={"default": SLOW_POLL},
                         notifications=direct)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with caplog.at_level(logging.WARNING), client:
        sub_started = client.insert(Task("first")).job.id  # the start-up fetch may find it
        wait_for(sub, sub_started)
        # Inserted through the pool, announced by a NOTIFY through the pool, heard directly.
        wait_for(sub, client.insert(Task("heard")).job.id)
        assert h.raw(client)._core.config.notifications is True
    assert _probe_warnings(caplog) == []


def test_session_pooling_keeps_working(h: Harness, _migrated_pg: str, pgbouncer_session: Any,
                                       caplog: pytest.LogCaptureFixture) -> None:
    with psycopg.connect(_migrated_pg, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_queue, river_leader RESTART IDENTITY")
    url = pgbouncer_session.url(_migrated_pg)
    client = fast_client(h, url, h.workers(lambda args: None, Task), queues={"default": SLOW_POLL})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with caplog.at_level(logging.WARNING), client:
        wait_for(sub, client.insert(Task("first")).job.id)
        ids = [client.insert(Task(f"s {i}")).job.id for i in range(20)]
        wait_for_all(sub, ids)  # each woken by its notification: the poll is a minute away
    assert _probe_warnings(caplog) == []


def test_a_notifications_url_is_checked(h: Harness, bounced: tuple[str, str], tmp_path: Any) -> None:
    from river_protocol.errors import ValidationError

    url, _direct = bounced
    with pytest.raises(ValidationError, match="postgresql://"):
        h.client(url, notifications="sqlite:///x.sqlite3")
    with pytest.raises(ValidationError, match="Postgres database"):
        h.client(f"sqlite:///{tmp_path}/r.sqlite3", notifications=url)
    with pytest.raises(ValidationError, match="True, False or"):
        h.client(url, notifications=1.5)


def test_the_testing_probe_timeout_defaults_to_river_s(h: Harness, bounced: tuple[str, str]) -> None:
    url, _direct = bounced
    assert h.raw(h.client(url)).testing_listen_probe_timeout == 2.0
