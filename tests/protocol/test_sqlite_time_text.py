"""The SQLite planners' time parameters: ``sqlite_time`` writes what ``format_sqlite_time`` writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.dialects.sqlite.fragments import sqlite_time
from river_protocol.errors import ValidationError
from river_protocol.golang.gotime import format_sqlite_time


def _outcome(fn, value):  # type: ignore[no-untyped-def]
    try:
        return fn(value)
    except (OverflowError, ValidationError) as exc:
        return type(exc)


@settings(max_examples=500)
@given(st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))])))
def test_agrees_with_format_sqlite_time(value: datetime) -> None:
    assert _outcome(sqlite_time, value) == _outcome(format_sqlite_time, value)


@pytest.mark.parametrize(("value", "text"), [
    (datetime(2031, 3, 4, 12, 0, 5, 499, tzinfo=UTC), "2031-03-04 12:00:05.000"),
    (datetime(2031, 3, 4, 12, 0, 5, 500, tzinfo=UTC), "2031-03-04 12:00:05.001"),
    (datetime(2031, 12, 31, 23, 59, 59, 999500, tzinfo=UTC), "2032-01-01 00:00:00.000"),
    (datetime(999, 1, 1, tzinfo=UTC), "0999-01-01 00:00:00.000"),
])
def test_rounds_to_the_millisecond_and_pads_the_year(value: datetime, text: str) -> None:
    assert sqlite_time(value) == text


def test_edges_and_none() -> None:
    assert sqlite_time(None) is None
    with pytest.raises(OverflowError):
        sqlite_time(datetime.max.replace(tzinfo=UTC))
    with pytest.raises(ValidationError):
        sqlite_time(datetime(2031, 1, 1))  # naive
