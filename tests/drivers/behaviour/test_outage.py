"""A Postgres outage seen by a running client: one typed error, then recovery without help.

The server is shared, so the outage is a loopback proxy in front of it that drops
every connection and refuses new ones (``tcp_proxy.TcpProxy``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from river_sync import DatabaseUnavailableError, EventKind, JobState
from tests.drivers.behaviour.support import row, wait_for
from tests.drivers.harness import Harness
from tests.drivers.tcp_proxy import TcpProxy
from tests.drivers.test_client_support import FAST, WAIT, Task

pytestmark = pytest.mark.postgres


@pytest.fixture(name="proxied")
def proxied_fixture(_migrated_pg: str) -> Iterator[tuple[TcpProxy, str, str]]:
    """(proxy, URL through the proxy, direct URL) of a migrated, empty database."""
    import psycopg

    with psycopg.connect(_migrated_pg, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_queue, river_leader RESTART IDENTITY")
    proxy, url = TcpProxy.in_front_of(_migrated_pg)
    try:
        yield proxy, url, _migrated_pg
    finally:
        proxy.close()


def test_outage_is_one_typed_error_and_the_first_insert_after_it_succeeds(
    h: Harness, proxied: tuple[TcpProxy, str, str]
) -> None:
    proxy, url, direct = proxied
    client = h.client(url, workers=h.workers(lambda args: None, Task), queues={"default": FAST},
                      leader_election=False)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        before = client.insert(Task("before")).job.id
        wait_for(sub, before)
        assert proxy.connections > 0  # the pool, the listener: everything goes through the proxy
        proxy.cut()
        # First with the pool's connections dead, then with nothing left to reuse.
        for attempt in range(3):
            with pytest.raises(DatabaseUnavailableError, match="unavailable") as caught:
                client.insert(Task(f"during {attempt}"))
            assert caught.value.__cause__ is not None
        proxy.restore()
        after = client.insert(Task("after")).job.id
        assert wait_for(sub, after).job.state is JobState.COMPLETED
    assert row(direct, after).state is JobState.COMPLETED


def test_a_producer_whose_start_hit_a_dropped_connection_retries_and_works(
    h: Harness, proxied: tuple[TcpProxy, str, str], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 29 §2: the producer's first statement (its queue upsert) loses its connection; it
    tries again after a back-off instead of stopping while the client says it started."""
    import logging
    import threading

    from river_protocol.dialects.postgres import PostgresDialect
    from river_protocol.intents import UpsertQueue

    proxy, url, direct = proxied
    original = PostgresDialect.plan
    restore = threading.Timer(0.3, proxy.restore)
    cut = threading.Event()
    planned: list[bool] = []

    def plan(self: PostgresDialect, intent: object) -> object:
        inner = original(self, intent)  # type: ignore[arg-type]
        if not isinstance(intent, UpsertQueue) or planned:
            return inner
        planned.append(True)

        def dropping() -> object:  # runs where the statement runs, just before it is sent
            proxy.cut()
            restore.start()
            cut.set()
            return (yield from inner)

        return dropping()

    monkeypatch.setattr(PostgresDialect, "plan", plan)
    caplog.set_level(logging.WARNING)
    client = h.client(url, workers=h.workers(lambda args: None, Task), queues={"default": FAST},
                      leader_election=False)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    try:
        with client:
            assert cut.wait(WAIT)  # the start upsert was cut off
            restore.join(5)  # the database is back (the insert needs it too)
            job_id = client.insert(Task("after the drop")).job.id
            assert wait_for(sub, job_id).job.state is JobState.COMPLETED
    finally:
        if cut.is_set():
            restore.join(5)
    assert row(direct, job_id).state is JobState.COMPLETED
    retried = [r.getMessage() for r in caplog.records if "failed to start" in r.getMessage()]
    assert retried and "producer for queue 'default' failed to start (1 in a row)" in retried[0]
    assert "retrying in" in retried[0]
    stopped = [r for r in caplog.records if r.levelno >= logging.ERROR and "to start" in r.getMessage()]
    assert not stopped
