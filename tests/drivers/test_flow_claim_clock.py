"""A limited claim on Postgres stamps its jobs' start after the queue's lock: a claim that waited
for the lock while a job of its partition finished records a start after that job's end, so
one-at-a-time is visible in the rows (``attempted_at`` against ``finalized_at``).

The claim's transaction begins before it queues on the lock, so the transaction's ``now()``
would be earlier than the end it waited for (river_protocol.dialects.postgres.flow, CLOCK).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from river_db.executor import Executor
from river_db.migrator import Migrator
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.flow_control import ConcurrencyConfig, FlowControl, QueueLimits
from river_protocol.flow_intents import ClaimLimitedJobs, SetQueueLimits
from river_protocol.intents import ClaimJobs, FullJobRow, InsertFullJobs
from river_protocol.job import JobRow
from river_protocol.states import JobState

WAIT = 10.0
pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(module_pg_url: str) -> Iterator[str]:
    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        Migrator(conn).migrate_up()
        Migrator(conn, line="python").migrate_up()
        conn.execute("TRUNCATE river_job, river_py_queue_limit, river_py_job_start RESTART IDENTITY")
    yield module_pg_url


def _job(state: JobState) -> FullJobRow:
    past = datetime.now(UTC) - timedelta(minutes=1)
    running = state is JobState.RUNNING
    return FullJobRow(kind="k", state=state, queue="q", priority=1, scheduled_at=past,
                      encoded_args=json.dumps({}).encode(), metadata=b"{}",
                      attempted_by=("other",) if running else (), attempt=1 if running else 0,
                      attempted_at=past if running else None, finalized_at=None)


def _waits_on_a_lock(url: str, pid: int) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_claim_that_waited_for_the_lock_starts_its_job_after_the_end_it_waited_for(pg: str) -> None:
    flow = FlowControl(ConcurrencyConfig(global_limit=1))
    with psycopg.connect(pg, autocommit=True) as setup:
        ex = Executor(setup, PostgresDialect())
        ex.run(SetQueueLimits("q", QueueLimits(global_limit=1)))
        running, waiting = ex.run(InsertFullJobs(rows=(_job(JobState.RUNNING), _job(JobState.AVAILABLE))))

    claimer = psycopg.connect(pg, autocommit=True)
    holder = psycopg.connect(pg)
    claimed: list[JobRow] = []
    errors: list[BaseException] = []

    def claim() -> None:
        try:
            claimed.extend(Executor(claimer, PostgresDialect()).run(ClaimLimitedJobs(
                claim=ClaimJobs(queue="q", limit=1, client_id="me"), flow=flow)))
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    try:
        # Another claim of the queue holds its lock; this claim begins and queues behind it.
        holder.execute("SELECT 1 FROM river_py_queue_limit WHERE queue = 'q' FOR UPDATE")
        thread = threading.Thread(target=claim)
        thread.start()
        deadline = time.monotonic() + WAIT
        while not _waits_on_a_lock(pg, claimer.info.backend_pid):
            assert time.monotonic() < deadline, "the claim never queued on the queue's lock"
            time.sleep(0.01)
        # Meanwhile the partition's running job ends; the lock's holder commits.
        ended = holder.execute(
            "UPDATE river_job SET state = 'completed', finalized_at = clock_timestamp() WHERE id = %s"
            " RETURNING finalized_at", (running.id,)).fetchone()
        holder.commit()
        thread.join(WAIT)
        assert not thread.is_alive() and errors == []
    finally:
        holder.close()
        claimer.close()
    assert ended is not None
    assert [r.id for r in claimed] == [waiting.id]
    assert claimed[0].attempted_at is not None and claimed[0].attempted_at > ended[0]
