"""``jobs.cancel`` and ``jobs.retry`` that lose a row-lock race return the winner's committed row
(River's harness leaf Cancel/Race), on every client. Postgres: SQLite serialises writers."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from river_sync import InsertOpts, JobState
from tests.drivers.harness import WAIT, Harness
from tests.drivers.test_client_support import Task

pytestmark = pytest.mark.postgres


def _lock_waiters(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND wait_event_type = 'Lock'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("method", ["cancel", "retry"])
def test_the_loser_of_a_race_returns_the_committed_row(h: Harness, _migrated_pg: str, method: str) -> None:
    with h.client(_migrated_pg) as client:
        later = InsertOpts(scheduled_at=datetime.now(UTC) + timedelta(days=365))
        job = client.insert(Task("race"), later).job
        if method == "retry":
            client.jobs.cancel(job.id)
        watcher = psycopg.connect(_migrated_pg, autocommit=True)
        winner = psycopg.connect(_migrated_pg)
        try:
            # The winner changes the row and holds its lock until it commits.
            if method == "cancel":
                winner.execute("UPDATE river_job SET state = 'cancelled', finalized_at = now(),"
                               " metadata = metadata || '{\"who\":\"winner\"}' WHERE id = %s", (job.id,))
            else:
                winner.execute("UPDATE river_job SET state = 'available', finalized_at = NULL,"
                               " scheduled_at = now() - interval '1 second' WHERE id = %s", (job.id,))
            lost: list[Any] = []
            racing = threading.Thread(target=lambda: lost.append(getattr(client.jobs, method)(job.id)))
            racing.start()
            deadline = time.monotonic() + WAIT
            while _lock_waiters(watcher) == 0:
                assert time.monotonic() < deadline, f"the client's {method} never waited on the row lock"
                time.sleep(0.02)
            assert not lost
            winner.commit()
            racing.join(timeout=WAIT)
            assert not racing.is_alive()
            committed = watcher.execute(
                "SELECT state::text, finalized_at, scheduled_at, metadata FROM river_job WHERE id = %s",
                (job.id,)).fetchone()
            assert committed is not None
            [row] = lost
            assert (row.state.value, row.finalized_at, row.scheduled_at) == committed[:3]
            if method == "cancel":
                assert row.state is JobState.CANCELLED and row.metadata.get("who") == "winner"
            else:
                assert row.state is JobState.AVAILABLE and row.finalized_at is None
        finally:
            winner.close()
            watcher.close()
