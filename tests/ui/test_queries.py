"""The dashboard's read intents (river_protocol.dashboard) on real SQLite and Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from river_db.migrator import Migrator
from river_protocol.dashboard import (
    CountJobsByQueue,
    FinishedHistogram,
    HistogramCell,
    OldestAvailable,
    PeriodicJobsSeen,
    QueueStateCount,
)
from river_protocol.intents import FullJobRow, Statement
from river_protocol.states import JobState
from river_sync import Client
from river_ui.demo import insert_rows
from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database

NOW = datetime.now(UTC).replace(microsecond=0)
S = JobState


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Client]:
    pg = request.param == "postgres"
    url = create_scratch_pg_database() if pg else f"sqlite://{tmp_path / f'q-{uuid.uuid4().hex[:6]}.sqlite3'}"
    with Migrator(url) as migrator:
        migrator.migrate_up()
    c = Client(url, leader_election=False, notifications=False)
    try:
        yield c
    finally:
        c.close()
        if pg:
            drop_scratch_pg_database(url)


def run(client: Client, intent: object) -> object:
    with client.database.executor(readonly=True) as ex:
        return ex.run(intent)  # type: ignore[arg-type]


def test_counts_per_queue_and_state_are_exact_up_to_the_limit(client: Client) -> None:
    rows = [FullJobRow(kind="k", queue="big", state=S.COMPLETED, finalized_at=NOW) for _ in range(40)]
    rows += [FullJobRow(kind="k", queue="small", state=S.AVAILABLE), FullJobRow(kind="k", queue="big")]
    insert_rows(client, rows)
    exact = run(client, CountJobsByQueue(exact_up_to=1000))
    assert sorted(exact, key=lambda c: (c.queue, c.state.value)) == [  # type: ignore[attr-defined]
        QueueStateCount("big", S.AVAILABLE, 1),
        QueueStateCount("big", S.COMPLETED, 40),
        QueueStateCount("small", S.AVAILABLE, 1),
    ]
    capped = {(c.queue, c.state): c for c in run(client, CountJobsByQueue(exact_up_to=5))}  # type: ignore[attr-defined]
    if client.database.dialect.name == "postgres":
        # Above the limit: the planner's estimate, marked as such, never below what was counted.
        big = capped[("big", S.COMPLETED)]
        assert big.estimated and big.count >= 6
        assert big.at_least == (big.count == 6)  # statistics not yet gathered: only the floor is known
        with client.database.executor() as ex:
            ex.execute(Statement("ANALYZE river_job", fetch=False))
        analysed = {(c.queue, c.state): c for c in run(client, CountJobsByQueue(exact_up_to=5))}  # type: ignore[attr-defined]
        assert analysed[("big", S.COMPLETED)].estimated and 30 <= analysed[("big", S.COMPLETED)].count <= 50
        assert not analysed[("big", S.COMPLETED)].at_least
    else:
        assert capped[("big", S.COMPLETED)] == QueueStateCount("big", S.COMPLETED, 40)  # SQLite counts
    assert capped[("small", S.AVAILABLE)] == QueueStateCount("small", S.AVAILABLE, 1)


def test_oldest_available_is_the_earliest_over_every_priority(client: Client) -> None:
    insert_rows(
        client,
        [
            FullJobRow(kind="k", queue="q", priority=1, scheduled_at=NOW - timedelta(minutes=1)),
            FullJobRow(kind="k", queue="q", priority=4, scheduled_at=NOW - timedelta(minutes=9)),
            FullJobRow(
                kind="k", queue="q", priority=2, state=S.SCHEDULED, scheduled_at=NOW - timedelta(hours=1)
            ),
            FullJobRow(kind="k", queue="r", priority=3, scheduled_at=NOW - timedelta(minutes=2)),
        ],
    )
    assert run(client, OldestAvailable(("q", "r", "none"))) == {
        "q": NOW - timedelta(minutes=9),
        "r": NOW - timedelta(minutes=2),
    }
    assert run(client, OldestAvailable(())) == {}


def test_histogram_places_finished_jobs_by_finalized_at_and_failed_attempts_by_attempted_at(
    client: Client,
) -> None:
    since = NOW - timedelta(minutes=10)
    done = {"state": S.COMPLETED, "attempt": 1}
    insert_rows(
        client,
        [
            FullJobRow(kind="k", queue="q", finalized_at=since, **done),  # type: ignore[arg-type]
            FullJobRow(kind="k", queue="q", finalized_at=since + timedelta(seconds=59), **done),  # type: ignore[arg-type]
            FullJobRow(kind="k", queue="q", finalized_at=since + timedelta(seconds=150), **done),  # type: ignore[arg-type]
            FullJobRow(kind="k", queue="q", finalized_at=since - timedelta(seconds=1), **done),  # type: ignore[arg-type]
            FullJobRow(kind="k", queue="q", finalized_at=since + timedelta(minutes=5), **done),  # type: ignore[arg-type]
            FullJobRow(kind="k", queue="q", state=S.DISCARDED, finalized_at=since + timedelta(seconds=61)),
            FullJobRow(
                kind="k",
                queue="p",
                state=S.RETRYABLE,
                attempted_at=since + timedelta(seconds=200),
                scheduled_at=NOW + timedelta(minutes=1),
            ),
            FullJobRow(kind="k", queue="p", state=S.CANCELLED, finalized_at=since + timedelta(seconds=10)),
            FullJobRow(kind="k", queue="p", state=S.AVAILABLE, attempted_at=since + timedelta(seconds=10)),
        ],
    )
    cells = run(client, FinishedHistogram(since=since, bucket=timedelta(minutes=1), buckets=5))
    assert sorted(cells, key=lambda c: (c.queue, c.bucket, c.state.value)) == [  # type: ignore[attr-defined]
        HistogramCell("p", S.CANCELLED, 0, 1),
        HistogramCell("p", S.RETRYABLE, 3, 1),
        HistogramCell("q", S.COMPLETED, 0, 2),
        HistogramCell("q", S.DISCARDED, 1, 1),
        HistogramCell("q", S.COMPLETED, 2, 1),
    ]


def test_periodic_jobs_seen_are_those_river_marked_newest_first(client: Client) -> None:
    ids = insert_rows(
        client,
        [
            FullJobRow(kind="a", metadata=b'{"periodic":true,"river:periodic_job_id":"x"}'),
            FullJobRow(kind="b", metadata=b'{"periodic":false}'),
            FullJobRow(kind="c", metadata=b"{}"),
            FullJobRow(kind="d", metadata=b'{"periodic":true}'),
        ],
    )
    seen = run(client, PeriodicJobsSeen(limit=10))
    assert [j.id for j in seen] == [ids[3], ids[0]]  # type: ignore[attr-defined]
    assert [j.id for j in run(client, PeriodicJobsSeen(limit=1))] == [ids[3]]  # type: ignore[attr-defined]


def test_running_clients_are_the_last_attempted_by_of_running_jobs(client: Client) -> None:
    from river_protocol.dashboard import RunningClients

    insert_rows(
        client,
        [
            FullJobRow(kind="k", state=S.RUNNING, attempt=2, attempted_by=("old-host", "host-a")),
            FullJobRow(kind="k", state=S.RUNNING, attempt=1, attempted_by=("host-a",)),
            FullJobRow(kind="k", state=S.RUNNING, attempt=1, attempted_by=("host-b",)),
            FullJobRow(kind="k", state=S.RUNNING),  # no attempted_by (inserted as running by hand)
            FullJobRow(kind="k", state=S.COMPLETED, attempt=1, attempted_by=("host-c",), finalized_at=NOW),
        ],
    )
    assert run(client, RunningClients()) == {"host-a": 2, "host-b": 1}
    assert sum(run(client, RunningClients(limit=1)).values()) <= 1  # type: ignore[attr-defined]
