"""client.jobs and client.queues on both drivers, real Postgres and SQLite."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import pytest

from river_protocol.errors import ReservedMetadataKeyError
from river_protocol.work import CancelCause
from river_sync import (
    Database,
    EventKind,
    InsertOpts,
    JobNotFoundError,
    JobRunningError,
    JobState,
    QueueNotFoundError,
)
from tests.drivers.behaviour.support import fast_client, next_of, wait_for
from tests.drivers.harness import WAIT, Harness
from tests.drivers.test_client_support import Other, Task


def test_get_list_count_retry_delete_update(h: Harness, client_db_url: str) -> None:
    with h.client(client_db_url) as client:
        queue_of = ["q2", "q1", "q2", "q1", "q2"]
        ids = [client.insert(Task(str(i)), InsertOpts(queue=q)).job.id for i, q in enumerate(queue_of)]
        other = client.insert(Other(1)).job.id
        assert client.jobs.get(ids[0]).id == ids[0]
        with pytest.raises(JobNotFoundError):
            client.jobs.get(999_999)

        page = client.jobs.list(kinds=["task"], limit=2)
        assert [j.id for j in page.jobs] == ids[:2] and page.next_cursor
        page2 = client.jobs.list(kinds=["task"], limit=2, after=page.next_cursor)
        assert [j.id for j in page2.jobs] == ids[2:4]
        assert [j.id for j in client.jobs.list(queues=["q1"]).jobs] == [ids[1], ids[3]]
        desc = client.jobs.list(order_by="created_at", descending=True, limit=10)
        assert [j.id for j in desc.jobs] == [other, *reversed(ids)] and desc.next_cursor is None

        counts = client.jobs.count_by_state()
        assert counts[JobState.AVAILABLE] == 6 and counts[JobState.COMPLETED] == 0

        cancelled = client.jobs.cancel(ids[0])
        assert cancelled.state is JobState.CANCELLED and "cancel_attempted_at" in cancelled.metadata
        retried = client.jobs.retry(ids[0])
        assert retried.state is JobState.AVAILABLE and retried.finalized_at is None
        updated = client.jobs.update(ids[1], output={"rows": 3})
        assert updated.metadata["output"] == {"rows": 3}
        deleted = client.jobs.delete(ids[2])
        assert deleted.id == ids[2]
        with pytest.raises(JobNotFoundError):
            client.jobs.delete(ids[2])
        assert client.jobs.count_by_state(queues=["q2"])[JobState.AVAILABLE] == 2


def test_cancel_running_job_in_this_client(h: Harness, client_db_url: str) -> None:
    """The cancel reaches the worker in-process on both databases (no notification needed)."""
    entered = threading.Event()
    causes: list[Any] = []
    client = fast_client(h, client_db_url, h.workers(h.cancellable_worker(entered, causes), Task),
                         notifications=False)
    sub = client.subscribe([EventKind.JOB_CANCELLED])
    with client:
        job_id = client.insert(Task("x")).job.id
        assert entered.wait(WAIT)
        # Before the cancel: once cancelled, the run ends (and the row may be final) at any moment.
        with pytest.raises(JobRunningError):
            client.jobs.delete(job_id)
        row = client.jobs.cancel(job_id)
        assert row.state is JobState.RUNNING
        event = wait_for(sub, job_id)
    assert event.job.state is JobState.CANCELLED and event.job.finalized_at is not None
    assert causes == [CancelCause.REMOTE_CANCEL]


def test_cancel_in_caller_transaction_rolls_back(h: Harness, client_db_url: str) -> None:
    with h.client(client_db_url) as client:
        job_id = client.insert(Task("x")).job.id
        with pytest.raises(RuntimeError), h.transaction(client) as tx:
            assert client.jobs.cancel(job_id, tx=tx).state is JobState.CANCELLED
            raise RuntimeError("roll back")
        assert client.jobs.get(job_id).state is JobState.AVAILABLE
        with h.transaction(client) as tx:
            client.jobs.cancel(job_id, tx=tx)
            inserted = client.insert(Task("with it"), tx=tx).job.id
        assert client.jobs.get(job_id).state is JobState.CANCELLED
        assert client.jobs.get(inserted).state is JobState.AVAILABLE


def test_queue_get_list_update(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task))
    sub = client.subscribe([EventKind.QUEUE_METADATA_CHANGED])
    with client:
        # The producer registers its queue on start.
        row = _wait_queue(client, "default")
        assert row.paused_at is None
        assert [q.name for q in client.queues.list()] == ["default"]
        with pytest.raises(QueueNotFoundError):
            client.queues.get("missing")
        with pytest.raises(QueueNotFoundError):
            client.queues.pause("missing")
        updated = client.queues.update("default", metadata={"owner": "ops"})
        assert updated.metadata == {"owner": "ops"}
        event = sub.get(timeout=WAIT)
        assert event.kind is EventKind.QUEUE_METADATA_CHANGED and event.queue == "default"


def _set_stored_queue_metadata(url: str, name: str, text: str) -> None:
    with Database.from_url(url) as db, db.executor() as ex:
        if db.dialect.name == "postgres":
            ex.conn.execute("UPDATE river_queue SET metadata = %s::jsonb WHERE name = %s", (text, name))
        else:
            ex.conn.execute("UPDATE river_queue SET metadata = jsonb(?) WHERE name = ?", (text, name))
        ex.conn.commit()


def _stored_queue_metadata(url: str, name: str) -> str:
    with Database.from_url(url) as db, db.executor(readonly=True) as ex:
        sql = ("SELECT metadata::text FROM river_queue WHERE name = %s" if db.dialect.name == "postgres"
               else "SELECT json(metadata) FROM river_queue WHERE name = ?")
        return str(ex.conn.execute(sql, (name,)).fetchone()[0])


def test_queue_metadata_keys_under_river_are_rivers(h: Harness, client_db_url: str) -> None:
    """Keys under ``river:`` in river_queue.metadata are River's (issue 32): user metadata naming
    one is refused, and a replacement keeps the ones stored, exact."""
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task))
    with client:
        _wait_queue(client, "default")
        _set_stored_queue_metadata(client_db_url, "default",
                                   '{"river:pro": {"limit": 2, "exact": 0.10000000000000000555}, "old": 1}')
        for refused in ({"river:pro": 1, "mine": 2}, '{"mine": 2, "river:x": null}'):
            with pytest.raises(ReservedMetadataKeyError) as caught:
                client.queues.update("default", metadata=refused)
            assert caught.value.keys[0].startswith("river:")
        assert json.loads(_stored_queue_metadata(client_db_url, "default"))["old"] == 1  # untouched
        updated = client.queues.update("default", metadata='{"owner": "ops", "n": 12345678901234567890}')
        assert updated.metadata["owner"] == "ops" and "old" not in updated.metadata
        stored = _stored_queue_metadata(client_db_url, "default")
        assert json.loads(stored) == {"river:pro": {"limit": 2, "exact": 0.10000000000000000555},
                                      "owner": "ops", "n": 12345678901234567890}
        assert "12345678901234567890" in stored and "0.10000000000000000555" in stored  # digits kept


def test_pause_and_resume_on_the_working_client(h: Harness, client_db_url: str) -> None:
    seen: list[str] = []
    client = fast_client(h, client_db_url, h.workers(lambda args: seen.append(args.name), Task))
    events = client.subscribe([EventKind.QUEUE_PAUSED, EventKind.QUEUE_RESUMED, EventKind.JOB_COMPLETED])
    with client:
        _wait_queue(client, "default")
        assert client.queues.pause("default") == 1
        assert next_of(events, EventKind.QUEUE_PAUSED).queue == "default"
        assert client.queues.get("default").paused_at is not None
        held = client.insert(Task("held")).job.id
        assert client.jobs.get(held).state is JobState.AVAILABLE
        assert client.queues.resume("default") == 1
        assert next_of(events, EventKind.QUEUE_RESUMED).queue == "default"
        wait_for(events, held, (EventKind.JOB_COMPLETED,))
    assert seen == ["held"]


# Polling only (no notifications) waits out River's control poll: the same on both async loops.
@pytest.mark.parametrize("notifications", [True, pytest.param(False, marks=pytest.mark.one_async_backend)])
def test_pause_on_one_client_stops_another(h: Harness, client_db_url: str, notifications: bool) -> None:
    """Pause/resume reach every client: by river_control (Postgres LISTEN / SQLite outbox) or
    by the settings poll of poll-only clients (2 s; 0.2 s here)."""
    seen: list[str] = []
    worker = fast_client(h, client_db_url, h.workers(lambda args: seen.append(args.name), Task),
                         notifications=notifications)
    if not notifications:  # only polling can bring the pause: poll sooner than River's 2 s
        h.raw(worker).testing_settings_poll_interval = timedelta(milliseconds=200)
    admin = h.client(client_db_url)
    events = worker.subscribe([EventKind.QUEUE_PAUSED, EventKind.QUEUE_RESUMED, EventKind.JOB_COMPLETED])
    with worker, admin:
        _wait_queue(admin, "default")
        assert admin.queues.pause("*") == 1
        assert next_of(events, EventKind.QUEUE_PAUSED).queue == "default"
        held = admin.insert(Task("held")).job.id
        assert admin.jobs.get(held).state is JobState.AVAILABLE
        assert admin.queues.get("default").paused_at is not None
        admin.queues.resume("default")
        assert next_of(events, EventKind.QUEUE_RESUMED).queue == "default"
        wait_for(events, held, (EventKind.JOB_COMPLETED,))
    assert seen == ["held"]


def _wait_queue(client: Any, name: str) -> Any:
    done = threading.Event()
    while True:
        try:
            return client.queues.get(name)
        except QueueNotFoundError:
            done.wait(0.01)  # the producer's start upsert is a moment away
