"""Which intents a dialect runs without BEGIN/COMMIT (``Dialect.needs_transaction``).

On Postgres the claim and the completion are one statement each, a transaction of its
own, so they skip the two round trips of an explicit transaction, as River Go runs
them. On SQLite both are several statements and keep their transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import SINGLE_STATEMENT, PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.intents import (
    ClaimJobs,
    InsertJobs,
    InsertParams,
    Intent,
    SetStateIfRunning,
    SetStateUpdate,
    Statement,
)
from river_protocol.states import JobState

T0 = datetime(2031, 3, 4, 12, 0, 0, tzinfo=UTC)
CLAIM = ClaimJobs(queue="default", limit=10, client_id="c")
COMPLETE = SetStateIfRunning(updates=(
    SetStateUpdate(id=1, state=JobState.COMPLETED, finalized_at=T0),
    SetStateUpdate(id=2, state=JobState.RETRYABLE, attempt=1, error=b'{"error":"x"}', scheduled_at=T0),
))


def _statements(dialect: Dialect, intent: Intent) -> list[Statement]:
    """Every statement ``intent``'s plan sends, each answered with no rows."""
    plan = dialect.plan(intent)
    sent: list[Statement] = []
    try:
        step = next(plan)
        while True:
            assert isinstance(step, Statement)
            sent.append(step)
            step = plan.send([])
    except StopIteration:
        return sent


def test_postgres_runs_the_claim_and_the_completion_as_their_own_transactions() -> None:
    pg = PostgresDialect()
    assert {ClaimJobs, SetStateIfRunning} == SINGLE_STATEMENT
    assert not pg.needs_transaction(CLAIM)
    assert not pg.needs_transaction(COMPLETE)
    # Other transactional intents keep BEGIN/COMMIT: an insert carries its notification.
    assert pg.needs_transaction(InsertJobs(jobs=(InsertParams(kind="k", encoded_args=b"{}"),)))


@pytest.mark.parametrize("intent", [CLAIM, COMPLETE], ids=["claim", "completion"])
def test_each_single_statement_intent_is_one_statement_on_postgres(intent: Intent) -> None:
    # What lets it run without BEGIN: a second statement would need the transaction back.
    assert type(intent) in SINGLE_STATEMENT
    assert len(_statements(PostgresDialect(), intent)) == 1


@pytest.mark.parametrize("intent", [CLAIM, COMPLETE], ids=["claim", "completion"])
def test_sqlite_keeps_the_transaction(intent: Intent) -> None:
    assert SQLiteDialect().needs_transaction(intent)


def test_the_base_dialect_follows_the_intent() -> None:
    base = Dialect()
    assert base.needs_transaction(CLAIM)
    assert not base.needs_transaction(Intent())
