"""SQLite binds every varying LIMIT as ``+?`` (claim, outbox poll, maintenance batches, admin
listings): one statement text for every limit.

SQLite >= 3.47 reads a plain ``LIMIT ?`` at prepare time and prepares the statement again when
the bound value changes; tests/drivers/test_dialect_intents.py counts the prepares on a real SQLite.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.rows import Binder
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.dialects.sqlite.fragments import LIMIT_PARAM, limit_param
from river_protocol.intents import (
    ClaimJobs,
    DeleteExpiredQueues,
    DeleteFinalizedBefore,
    DeleteJobs,
    FetchNotifications,
    GetStuckJobs,
    Intent,
    JobListFilter,
    ListJobs,
    ListQueues,
    ScheduleJobs,
    Statement,
)


def _first(dialect: Dialect, intent: Intent) -> Statement:
    step = next(dialect.plan(intent))
    assert isinstance(step, Statement)
    return step


def test_limit_param_binds_the_limit_behind_a_constant_placeholder() -> None:
    b = Binder("?")
    assert f"{b.p('q')} {limit_param(b, 5)} {b.p('c')}" == f"? {LIMIT_PARAM} ?"
    assert b.params == ["q", 5, "c"]  # in the order written
    assert LIMIT_PARAM.endswith("?") and LIMIT_PARAM != "?"


@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=1, max_value=10_000))
def test_claim_text_is_the_same_for_any_limit_and_the_limit_is_bound(a: int, b: int) -> None:
    d = SQLiteDialect()
    one, two = (_first(d, ClaimJobs(queue="q", limit=n, client_id="c")) for n in (a, b))
    assert one.sql == two.sql and f"LIMIT {LIMIT_PARAM}" in one.sql
    assert one.sql.count("?") == len(one.params)
    assert a in one.params and b in two.params and len(one.params) == len(two.params)
    # Only the limit's own positions differ (another parameter may equal a limit by chance).
    differ = [i for i, (x, y) in enumerate(zip(one.params, two.params, strict=True)) if x != y]
    assert all(one.params[i] == a and two.params[i] == b for i in differ)
    assert (len(differ) > 0) == (a != b)


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=10_000),
       st.integers(min_value=1, max_value=10_000))
def test_outbox_poll_text_is_the_same_for_any_limit(after: int, a: int, b: int) -> None:
    d = SQLiteDialect()
    one = _first(d, FetchNotifications(after_id=after, limit=a))
    two = _first(d, FetchNotifications(after_id=after, limit=b))
    assert one.sql == two.sql and one.sql.endswith(f"LIMIT {LIMIT_PARAM}")
    assert (one.params, two.params) == ((after, a), (after, b))


T = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

# The other SQLite statements whose LIMIT varies: the maintenance services' batches and the
# admin listings (Postgres keeps its plain placeholders; its SQL is not touched).
VARYING_LIMITS: dict[str, Callable[[int], Intent]] = {
    "scheduler": lambda n: ScheduleJobs(now=T, limit=n),
    "rescuer": lambda n: GetStuckJobs(stuck_horizon=T, limit=n, after_id=7),
    "job cleaner": lambda n: DeleteFinalizedBefore(
        cancelled_before=T, completed_before=T, discarded_before=None, limit=n, queues_excluded=("x",)),
    "queue cleaner": lambda n: DeleteExpiredQueues(updated_before=T, limit=n),
    "job list": lambda n: ListJobs(filter=JobListFilter(kinds=("k",)), order_by="scheduled_at", limit=n,
                                   after=(T, 3)),
    "job delete": lambda n: DeleteJobs(filter=JobListFilter(queues=("q",)), limit=n),
    "queue list": lambda n: ListQueues(limit=n, after_name="a", name_contains="b"),
}


@pytest.mark.parametrize("name", sorted(VARYING_LIMITS))
@given(a=st.integers(min_value=1, max_value=10_000), b=st.integers(min_value=1, max_value=10_000))
def test_maintenance_and_admin_limits_are_bound_behind_one_text(name: str, a: int, b: int) -> None:
    d = SQLiteDialect()
    one, two = (_first(d, VARYING_LIMITS[name](n)) for n in (a, b))
    assert one.sql == two.sql and f"LIMIT {LIMIT_PARAM}" in one.sql and "LIMIT ?" not in one.sql
    assert one.sql.count("?") == len(one.params) and len(one.params) == len(two.params)
    differ = [i for i, (x, y) in enumerate(zip(one.params, two.params, strict=True)) if x != y]
    assert all(one.params[i] == a and two.params[i] == b for i in differ)
    assert (len(differ) > 0) == (a != b)


@pytest.mark.parametrize("name", sorted(VARYING_LIMITS))
def test_postgres_keeps_its_plain_limit_placeholder(name: str) -> None:
    sql = _first(PostgresDialect(), VARYING_LIMITS[name](5)).sql
    assert "+?" not in sql and "+$" not in sql
