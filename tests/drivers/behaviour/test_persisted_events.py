"""Job events name the outcome the database recorded, not the one the executor asked for."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from river_sync import Database, EventKind, JobSnooze, JobState
from tests.drivers.behaviour.support import fast_client, row
from tests.drivers.harness import WAIT, Harness
from tests.drivers.test_client_support import Task


def _raw_update(url: str, job_id: int, pg_set: str, sqlite_set: str) -> None:
    """Change the worker's own row behind the client's back (as a rescuer or an operator would)."""
    with Database.from_url(url) as db, db.executor() as ex:
        if db.dialect.name == "postgres":
            ex.conn.execute(f"UPDATE river_job SET {pg_set} WHERE id = %s", (job_id,))
        else:
            ex.conn.execute(f"UPDATE river_job SET {sqlite_set} WHERE id = ?", (job_id,))


def _events_of(sub: object, job_id: int) -> list[tuple[EventKind, JobState]]:
    """Every event about ``job_id`` the subscription got before stop closed it."""
    return [(e.kind, e.job.state) for e in sub if e.job is not None and e.job.id == job_id]  # type: ignore[attr-defined]


def test_snooze_turned_cancellation_is_reported_as_cancelled(h: Harness, client_db_url: str) -> None:
    # A cancel attempt recorded in metadata turns the snooze into a cancellation (§8.1).
    def work(ctx: object, args: Task) -> None:
        job_id = ctx.job.id  # type: ignore[attr-defined]
        _raw_update(
            client_db_url, job_id,
            """metadata = metadata || '{"cancel_attempted_at":"2025-01-01T00:00:00Z"}'""",
            """metadata = jsonb_patch(metadata, jsonb('{"cancel_attempted_at":"2025-01-01T00:00:00Z"}'))""",
        )
        raise JobSnooze(timedelta(hours=1))

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True))
    sub = client.subscribe()
    with client:
        job_id = client.insert(Task("x")).job.id
        event = sub.get(timeout=WAIT)
    assert (event.kind, event.job.id) == (EventKind.JOB_CANCELLED, job_id)
    assert event.job.state is JobState.CANCELLED
    assert row(client_db_url, job_id).state is JobState.CANCELLED


def _changed_while_running(h: Harness, url: str, pg_set: str, sqlite_set: str) -> tuple[int, list[Any]]:
    """Work one job whose row is changed behind the client's back while its worker runs;
    the job's id and the events about it once stop flushed the completer."""
    ran = threading.Event()

    def work(ctx: object, args: Task) -> None:
        _raw_update(url, ctx.job.id, pg_set, sqlite_set)  # type: ignore[attr-defined]
        ran.set()

    client = fast_client(h, url, h.workers(work, Task, threaded=True))
    sub = client.subscribe()
    with client:
        job_id = client.insert(Task("x")).job.id
        assert ran.wait(WAIT)
    # Stop waited for the running job and flushed the completer, then closed the subscription.
    return job_id, _events_of(sub, job_id)


def test_outcome_of_a_job_no_longer_running_publishes_no_event(h: Harness, client_db_url: str) -> None:
    # The row left `running` while the worker ran (a rescuer would do this); the completion
    # then changes nothing, so nothing may be announced as completed.
    job_id, events = _changed_while_running(
        h, client_db_url, "state = 'retryable', scheduled_at = now() + interval '1 hour'",
        "state = 'retryable', scheduled_at = datetime('now', '+1 hour')")
    assert events == []
    assert row(client_db_url, job_id).state is JobState.RETRYABLE


def test_a_job_discarded_elsewhere_meanwhile_is_announced_as_failed(h: Harness, client_db_url: str) -> None:
    # An operator (or another client) finalized the row while the worker ran: the completion
    # changes nothing, and the event says what the row now says (River Go's job_failed).
    job_id, events = _changed_while_running(
        h, client_db_url, "state = 'discarded', finalized_at = now()",
        "state = 'discarded', finalized_at = strftime('%Y-%m-%d %H:%M:%f', 'now')")
    assert events == [(EventKind.JOB_FAILED, JobState.DISCARDED)]
    assert row(client_db_url, job_id).state is JobState.DISCARDED
