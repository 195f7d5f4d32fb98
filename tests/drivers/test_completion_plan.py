"""The completion statement's plan on Postgres does not hang on the table's statistics.

A burn-down runs on a table that was never analysed (a new database, or autovacuum not by
yet), where the planner guesses a few thousand rows. Joined to its input alone, the
completion then read the whole table into a hash for every batch, and the second branch
(the rows not updated) scanned it again. The statement now reaches its ids through the
primary key whatever the estimates; these tests read its plan and its results there."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from river_db.executor import Executor
from river_db.migrator import Migrator
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.intents import ClaimJobs, SetStateIfRunning, SetStateUpdate
from river_protocol.states import JobState

pytestmark = pytest.mark.postgres

T0 = datetime(2031, 3, 4, 12, 0, 0, tzinfo=UTC)
ROWS = 30_000  # well past what the planner assumes of a never-analysed table


@pytest.fixture
def conn(module_pg_url: str) -> Iterator[Any]:
    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        Migrator(conn).migrate_up()
        conn.execute("TRUNCATE river_job")
        # Never analysed: the state a fresh database (or a bench's copy) starts in.
        conn.execute("ALTER TABLE river_job SET (autovacuum_enabled = off)")
        conn.execute(
            "INSERT INTO river_job (args, kind, queue, state, scheduled_at) "
            "SELECT '{}', 'k', 'plan', 'available', now() - interval '1 s' "
            f"FROM generate_series(1, {ROWS})")
        yield conn
        conn.execute("ALTER TABLE river_job RESET (autovacuum_enabled)")
        conn.execute("TRUNCATE river_job")


def _completion(conn: Any, claimed: int) -> tuple[SetStateIfRunning, list[Any]]:
    ex = Executor(conn, PostgresDialect())
    rows = ex.run(ClaimJobs(queue="plan", limit=claimed, client_id="c"))
    updates = tuple(SetStateUpdate(id=r.id, state=JobState.COMPLETED, finalized_at=T0, claimed=r)
                    for r in rows)
    return SetStateIfRunning(updates=updates), rows


def _plan(conn: Any, intent: SetStateIfRunning) -> str:
    statement = next(PostgresDialect().plan(intent))
    with conn.cursor(binary=True) as cur:
        cur.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + statement.sql, statement.params)
        plan = "\n".join(row[0] for row in cur.fetchall())
    conn.execute("ROLLBACK") if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE else None
    return plan


def test_completion_reads_no_whole_table_on_a_never_analysed_table(conn: Any) -> None:
    assert conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'river_job'").fetchone()[0] < 0
    intent, _ = _completion(conn, 500)
    with conn.transaction(force_rollback=True):
        plan = _plan(conn, intent)
    assert "Seq Scan on river_job" not in plan, plan
    assert "river_job_pkey" in plan, plan


def test_completion_returns_every_row_when_some_were_not_running(conn: Any) -> None:
    intent, rows = _completion(conn, 50)
    # Someone else finished five of them first: those come back as they stand, not updated.
    others = [r.id for r in rows[:5]]
    conn.execute("UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE id = ANY(%s)",
                 (others,))
    got = Executor(conn, PostgresDialect()).run(intent)
    assert [r.id for r in got] == sorted(r.id for r in rows)
    by_id = {r.id: r for r in got}
    assert all(by_id[i].state is JobState.CANCELLED for i in others)
    assert all(by_id[r.id].state is JobState.COMPLETED for r in rows[5:])
    # A deleted job has no row to return.
    intent, rows = _completion(conn, 10)
    conn.execute("DELETE FROM river_job WHERE id = %s", (rows[0].id,))
    got = Executor(conn, PostgresDialect()).run(intent)
    assert [r.id for r in got] == sorted(r.id for r in rows[1:])
