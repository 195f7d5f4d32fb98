"""A Postgres completion batch is one statement: the executor sends it without BEGIN/COMMIT."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from river_db.executor import Executor
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.intents import DeleteJob, InsertJobsFast, SetStateIfRunning, SetStateUpdate
from river_protocol.states import JobState

NOW = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)
COMPLETE = SetStateIfRunning(updates=(SetStateUpdate(id=1, state=JobState.COMPLETED, finalized_at=NOW),))


class _Cursor:
    description = None

    def __init__(self, sent: list[str]) -> None:
        self.sent = sent

    def execute(self, sql: str, params: Any = None) -> None:
        self.sent.append(sql.strip().split()[0].upper())

    def fetchall(self) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class _Conn:
    """A DB-API connection that records the first word of each statement sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def cursor(self) -> _Cursor:
        return _Cursor(self.sent)


def test_postgres_plans_a_completion_batch_outside_a_transaction() -> None:
    pg = PostgresDialect()
    assert COMPLETE.transactional and not pg.needs_transaction(COMPLETE)
    assert pg.needs_transaction(InsertJobsFast(jobs=()))  # several COPYs: still one transaction
    assert pg.needs_transaction(DeleteJob(id=1)) is DeleteJob.transactional


def test_sqlite_keeps_the_completion_batch_in_a_transaction() -> None:
    assert SQLiteDialect().needs_transaction(COMPLETE)


def test_the_executor_sends_the_completion_alone_on_postgres_and_wrapped_on_sqlite() -> None:
    pg = _Conn()
    Executor(pg, PostgresDialect()).run(COMPLETE)
    assert pg.sent == ["WITH"]
    lite = _Conn()
    Executor(lite, SQLiteDialect()).run(COMPLETE)
    assert lite.sent[0] == "BEGIN" and lite.sent[-1] == "COMMIT" and len(lite.sent) > 2
