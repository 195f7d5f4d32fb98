"""work_once and work_with_client record what a running client records, on Postgres and SQLite.

Each scenario runs one worker three ways: in a started client (the reference:
the row its completer wrote, as the job event carries it), through
``work_once`` (no database) and through ``work_with_client``. Everything but
the clock must agree.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from river_protocol.job import JobRow
from river_sync import (
    Client,
    EventKind,
    InsertOpts,
    JobCancel,
    JobDiscard,
    JobSnooze,
    JobState,
    WorkContext,
    Workers,
)
from river_sync.testing import WorkResult, work_once, work_with_client
from tests.testing_helpers import (  # noqa: F401  (fixtures)
    FAST,
    WAIT,
    Task,
    client_db_url_fixture,
    migrated_pg_fixture,
)

FAR = datetime(2100, 1, 1, tzinfo=UTC)


def _ok(ctx: WorkContext, args: Task) -> None:
    ctx.record_output({"echo": args.name, "n": [1, 2]})


def _snooze(args: Task) -> None:
    raise JobSnooze(timedelta(minutes=3))


def _cancel(args: Task) -> None:
    raise JobCancel(ValueError("stop it"))


def _discard(args: Task) -> None:
    raise JobDiscard("bad input")


def _error(ctx: WorkContext, args: Task) -> None:
    ctx.record_output("partial")
    raise RuntimeError("boom")


SCENARIOS = {
    "completed": (_ok, None),
    "snoozed": (_snooze, None),
    "cancelled": (_cancel, None),
    "discarded": (_discard, None),
    # A far worker retry time keeps the real client from running it again before we look.
    "retryable": (_error, None),
    "exhausted": (_error, InsertOpts(max_attempts=1)),
}


def _workers(fn: Any) -> Workers:
    workers = Workers()
    workers.job(Task, next_retry=lambda job: FAR)(fn)
    return workers


def _shape(row: JobRow) -> dict[str, Any]:
    """A row without its clock-dependent values (nor SQLite's insert nonce, a storage detail)."""
    metadata = {k: v for k, v in row.metadata.items() if k != "river:unique_nonce"}
    return {
        "state": row.state, "attempt": row.attempt, "max_attempts": row.max_attempts,
        "errors": [(e.attempt, e.error) for e in row.errors],
        "metadata": metadata, "finalized": row.finalized_at is not None,
        "scheduled_far": row.scheduled_at == FAR, "args": row.args, "queue": row.queue,
    }


def _reference(url: str, fn: Any, opts: InsertOpts | None) -> tuple[EventKind, JobRow]:
    client = Client(url, workers=_workers(fn), queues={"default": FAST})
    sub = client.subscribe()
    with client:
        inserted = client.insert(Task("p"), opts)
        while True:
            event = sub.get(timeout=WAIT)
            if event.job is not None and event.job.id == inserted.job.id:
                return event.kind, event.job


def _update_matches_row(result: WorkResult, row: JobRow) -> None:
    """The SetStateUpdate, applied by the database, gives the reference row's values."""
    update = result.update
    assert update.state is row.state
    if update.attempt is not None:
        assert update.attempt == row.attempt
    assert (update.finalized_at is not None) == (row.finalized_at is not None)
    if update.error is not None:
        assert json.loads(update.error)["error"] == row.errors[-1].error
    else:
        assert row.errors == ()
    if update.metadata_do_merge:
        assert json.loads(update.metadata_updates).items() <= row.metadata.items()
    else:
        assert _shape(row)["metadata"] == {}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_outcome_as_a_running_client(client_db_url: str, scenario: str) -> None:
    fn, opts = SCENARIOS[scenario]
    kind, reference = _reference(client_db_url, fn, opts)

    offline = work_once(_workers(fn), Task("p"), opts=opts)
    assert offline.event_kind is kind
    _update_matches_row(offline, reference)
    assert _shape(offline.job) == _shape(reference)

    with Client(client_db_url, workers=_workers(fn)) as client:
        online = work_with_client(client, Task("p"), opts)
    assert online.event_kind is kind and online.job.id != reference.id
    _update_matches_row(online, online.job)
    assert _shape(online.job) == _shape(reference)
    assert online.job.attempted_by == (client.client_id,)


def test_snooze_times_follow_the_run_clock(client_db_url: str) -> None:
    with Client(client_db_url, workers=_workers(_snooze)) as client:
        result = work_with_client(client, Task())
    assert result.job.state is JobState.SCHEDULED and result.snoozed_for == timedelta(minutes=3)
    assert result.finished_at is not None and result.job.scheduled_at is not None
    delta = result.job.scheduled_at - result.finished_at
    # The stored time is the run's finish time plus the delay (SQLite keeps milliseconds).
    assert abs(delta - timedelta(minutes=3)) < timedelta(milliseconds=1)
