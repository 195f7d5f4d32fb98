"""SQLite's claim and outbox poll bind their LIMIT as ``+?``: one statement text for every limit.

SQLite >= 3.47 reads a plain ``LIMIT ?`` at prepare time and prepares the statement again when
the bound value changes; tests/drivers/test_dialect_intents.py counts the prepares on a real SQLite.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from river_protocol.dialects.base import Dialect
from river_protocol.dialects.rows import Binder
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.dialects.sqlite.fragments import LIMIT_PARAM, limit_param
from river_protocol.intents import ClaimJobs, FetchNotifications, Intent, Statement


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
