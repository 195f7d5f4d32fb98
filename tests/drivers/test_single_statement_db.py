"""The claim and the completion on a real database, through both executors: on Postgres each
is one statement with no BEGIN/COMMIT around it, and what it did is committed when it
returns; SQLite keeps its transaction (``Dialect.needs_transaction``)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

import river_anyio.executor as async_executor
import river_db.executor as sync_executor
from river_anyio.executor import AsyncExecutor
from river_db.executor import Executor
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.intents import (
    ClaimJobs,
    GetJob,
    InsertJobs,
    InsertParams,
    SetStateIfRunning,
    SetStateUpdate,
)
from river_protocol.states import JobState

T0 = datetime(2031, 3, 4, 12, 0, 0, tzinfo=UTC)
Run = Callable[[Callable[[], Awaitable[Any]]], Any]
DatabaseCase = tuple[Any, Dialect, Callable[[], Any]]  # connection, dialect, open another


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first word of every statement either executor sends."""
    seen: list[str] = []
    real = sync_executor.execute_step

    def recording(conn: Any, step: Any) -> Any:
        seen.append(step.sql.split()[0].upper())
        return real(conn, step)

    monkeypatch.setattr(sync_executor, "execute_step", recording)
    monkeypatch.setattr(async_executor, "execute_step", recording)
    return seen


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseCase]:
    """A migrated database's connection, its dialect, and a way to open another connection."""
    if request.param == "postgres":
        url = request.getfixturevalue("module_pg_url")
        conn = psycopg.connect(url, autocommit=True)
        Migrator(conn).migrate_up()
        conn.execute("TRUNCATE river_job")
        yield conn, PostgresDialect(), lambda: psycopg.connect(url, autocommit=True)
        conn.close()
    else:
        path = str(tmp_path / "river.sqlite3")
        conn = connect_sqlite(path)
        Migrator(conn).migrate_up()
        yield conn, SQLiteDialect(), lambda: connect_sqlite(path)
        conn.close()


def _queue() -> str:
    return "q_" + uuid.uuid4().hex[:8]


def _insert(ex: Executor, queue: str) -> int:
    (result,) = ex.run(InsertJobs(jobs=(InsertParams(kind="k", encoded_args=b"{}", queue=queue),),
                                  nonce=uuid.uuid4().hex[:16]))
    return int(result.job.id)


def _state_elsewhere(open_other: Callable[[], Any], dialect: Dialect, job_id: int) -> JobState:
    other = open_other()
    try:
        return Executor(other, dialect).run(GetJob(id=job_id)).state  # type: ignore[no-any-return]
    finally:
        other.close()


def _check(dialect: Dialect, sent: list[str]) -> None:
    """Postgres: the one statement alone; SQLite: its statements between BEGIN and COMMIT."""
    if dialect.name == "postgres":
        assert len(sent) == 1 and sent[0] not in ("BEGIN", "COMMIT"), sent
    else:
        assert sent[0] == "BEGIN" and sent[-1] == "COMMIT" and len(sent) > 2, sent


def test_sync_claim_and_completion(database: DatabaseCase, sent: list[str]) -> None:
    conn, dialect, open_other = database
    ex = Executor(conn, dialect)
    queue = _queue()
    job_id = _insert(ex, queue)
    sent.clear()
    claim = ClaimJobs(queue=queue, limit=10, client_id="c")
    (row,) = ex.run(claim)
    assert row.id == job_id and row.state is JobState.RUNNING
    _check(dialect, sent)
    # Committed when it returns: another connection sees the claim.
    assert _state_elsewhere(open_other, dialect, job_id) is JobState.RUNNING
    sent.clear()
    done = SetStateIfRunning(updates=(SetStateUpdate(id=job_id, state=JobState.COMPLETED, finalized_at=T0),))
    (finished,) = ex.run(done)
    assert finished.state is JobState.COMPLETED
    _check(dialect, sent)
    assert _state_elsewhere(open_other, dialect, job_id) is JobState.COMPLETED


def test_sync_claim_inside_a_transaction_stays_in_it(database: DatabaseCase) -> None:
    conn, dialect, open_other = database
    ex = Executor(conn, dialect)
    queue = _queue()
    job_id = _insert(ex, queue)
    with pytest.raises(RuntimeError), ex.transaction() as tx:
        (row,) = tx.run(ClaimJobs(queue=queue, limit=10, client_id="c"))
        assert row.id == job_id
        raise RuntimeError("roll back")
    assert _state_elsewhere(open_other, dialect, job_id) is JobState.AVAILABLE


def test_async_claim_and_completion(run: Run, database: DatabaseCase,
                                    sent: list[str]) -> None:
    conn, dialect, open_other = database
    queue = _queue()
    job_id = _insert(Executor(conn, dialect), queue)
    claim = ClaimJobs(queue=queue, limit=10, client_id="c")
    done = SetStateIfRunning(updates=(SetStateUpdate(id=job_id, state=JobState.COMPLETED, finalized_at=T0),))

    async def main() -> None:
        ex = AsyncExecutor(conn, dialect)
        sent.clear()
        (row,) = await ex.run(claim)
        assert row.id == job_id
        _check(dialect, sent)
        assert _state_elsewhere(open_other, dialect, job_id) is JobState.RUNNING
        sent.clear()
        (finished,) = await ex.run(done)
        assert finished.state is JobState.COMPLETED
        _check(dialect, sent)
        await anyio.lowlevel.checkpoint()

    run(main)
    assert _state_elsewhere(open_other, dialect, job_id) is JobState.COMPLETED
