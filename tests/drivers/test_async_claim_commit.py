"""``QueueConfig(async_claim_commit=True)`` (docs/guides/client.md, Low latency): on Postgres
the claim's own transaction commits with ``synchronous_commit = off``, the session keeps
its setting, and what it claimed is committed as before; SQLite ignores the option."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import psycopg
import pytest

from river_db.executor import Executor
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.client_core import ClientConfig, ClientCore, QueueConfig
from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError
from river_protocol.intents import (
    ClaimJobs,
    GetJob,
    InsertJobs,
    InsertParams,
    QueueRow,
    Statement,
    UpsertQueue,
)
from river_protocol.machines.base import IntentSucceeded
from river_protocol.machines.producer import ProducerConfig, Start
from river_protocol.states import JobState
from river_protocol.workers import Workers


def _claim_sql(dialect: Dialect, intent: ClaimJobs) -> list[str]:
    plan = dialect.plan(intent)
    sent: list[str] = []
    try:
        step = next(plan)
        while True:
            assert isinstance(step, Statement)
            sent.append(step.sql)
            step = plan.send([])
    except StopIteration:
        return sent


def test_postgres_claim_sets_synchronous_commit_off_for_its_transaction_only_when_asked() -> None:
    pg = PostgresDialect()
    plain = ClaimJobs(queue="q", limit=5, client_id="c")
    fast = ClaimJobs(queue="q", limit=5, client_id="c", asynchronous_commit=True)
    assert not plain.asynchronous_commit  # River's default
    (plain_sql,) = _claim_sql(pg, plain)
    (fast_sql,) = _claim_sql(pg, fast)
    assert "synchronous_commit" not in plain_sql
    assert "set_config('synchronous_commit', 'off', true)" in fast_sql  # is_local: this transaction
    assert fast_sql.replace(" AND set_config('synchronous_commit', 'off', true) IS NOT NULL", "") == plain_sql
    assert not pg.needs_transaction(fast)  # still one statement, no BEGIN/COMMIT


def test_sqlite_ignores_asynchronous_commit() -> None:
    lite = SQLiteDialect()
    assert _claim_sql(lite, ClaimJobs(queue="q", limit=5, client_id="c", asynchronous_commit=True)) == (
        _claim_sql(lite, ClaimJobs(queue="q", limit=5, client_id="c")))


@dataclass
class _Args:
    kind: ClassVar[str] = "noop"


def _first_claim(queue: QueueConfig) -> ClaimJobs:
    workers = Workers()
    workers.job(_Args)(lambda args: None)
    core = ClientCore(ClientConfig(client_id="w", dialect="postgres", queues={"default": queue}), workers,
                      random.Random(1))
    producer = core.make_producer("default", queue)
    t0 = datetime(2031, 1, 1, tzinfo=UTC)
    (upsert,) = producer.handle(Start(), t0).intents
    assert isinstance(upsert, UpsertQueue)
    out = producer.handle(IntentSucceeded(upsert, QueueRow(name="default", created_at=t0, metadata={},
                                                           paused_at=None, updated_at=t0)), t0)
    (claim,) = [i for i in out.intents if isinstance(i, ClaimJobs)]
    return claim


def test_queue_config_reaches_the_producers_claims() -> None:
    assert QueueConfig().async_claim_commit is False
    assert _first_claim(QueueConfig()).asynchronous_commit is False
    fast = QueueConfig(fetch_cooldown=timedelta(milliseconds=1), async_claim_commit=True)
    assert _first_claim(fast).asynchronous_commit is True


def test_producer_config_takes_only_a_bool() -> None:
    assert ProducerConfig(queue="q", client_id="c", max_workers=1, async_claim_commit=True).async_claim_commit
    with pytest.raises(ValidationError, match="async_claim_commit"):
        ProducerConfig(queue="q", client_id="c", max_workers=1, async_claim_commit="yes")  # type: ignore[arg-type]


def _insert(ex: Executor, queue: str) -> int:
    (result,) = ex.run(InsertJobs(jobs=(InsertParams(kind="k", encoded_args=b"{}", queue=queue),),
                                  nonce=uuid.uuid4().hex[:16]))
    return int(result.job.id)


@pytest.mark.postgres
def test_postgres_asynchronous_claim_commits_and_leaves_the_session_setting(module_pg_url: str) -> None:
    conn = psycopg.connect(module_pg_url, autocommit=True)
    other = psycopg.connect(module_pg_url, autocommit=True)
    try:
        Migrator(conn).migrate_up()
        ex, dialect = Executor(conn, PostgresDialect()), PostgresDialect()
        queue = "q_" + uuid.uuid4().hex[:8]
        job_id = _insert(ex, queue)
        (row,) = ex.run(ClaimJobs(queue=queue, limit=10, client_id="c", asynchronous_commit=True))
        assert row.id == job_id and row.state is JobState.RUNNING
        assert Executor(other, dialect).run(GetJob(id=job_id)).state is JobState.RUNNING  # committed
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)  # the session's own
        # Inside a caller's transaction the setting is that transaction's, gone with it.
        second = _insert(ex, queue)
        with conn.transaction():
            (row,) = ex.run(ClaimJobs(queue=queue, limit=10, client_id="c", asynchronous_commit=True))
            assert row.id == second
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        # A claim that finds nothing is fine too (nothing to commit).
        assert ex.run(ClaimJobs(queue=queue, limit=10, client_id="c", asynchronous_commit=True)) == []
    finally:
        conn.close()
        other.close()


def test_sqlite_claim_with_asynchronous_commit_claims(tmp_path: Path) -> None:
    conn = connect_sqlite(str(tmp_path / "river.sqlite3"))
    try:
        Migrator(conn).migrate_up()
        ex = Executor(conn, SQLiteDialect())
        job_id = _insert(ex, "default")
        (row,) = ex.run(ClaimJobs(queue="default", limit=10, client_id="c", asynchronous_commit=True))
        assert row.id == job_id and row.state is JobState.RUNNING
    finally:
        conn.close()
