"""The template filters (river_ui.app): ages, times and counts as the pages print them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from river_protocol.dashboard import StateCount
from river_ui.app import describe_age, format_count, format_time, short_time


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (59, "59s"),
        (61, "1m 1s"),
        (3599, "59m 59s"),
        (3600, "1h 0m"),
        (7325, "2h 2m"),
        (90000, "1d 1h"),
        (-5, "0s"),
    ],
)
def test_ages_show_their_two_largest_units(seconds: int, shown: str) -> None:
    assert describe_age(timedelta(seconds=seconds)) == shown
    assert describe_age(None) == "—"


def test_times_in_utc_to_the_millisecond_or_the_second() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_900, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(moment.astimezone(UTC)) == "2026-01-02 01:04:05.678+00:00"
    assert short_time(moment) == "2026-01-02 01:04:05"
    assert format_time(None) == short_time(None) == "—"


def test_counts_group_thousands_and_mark_estimates() -> None:
    assert format_count(1234567) == "1,234,567"
    assert format_count(StateCount(999)) == "999"
    assert format_count(StateCount(412_300, estimated=True)) == "≈ 412,300"
    assert format_count(StateCount(1001, estimated=True, at_least=True)) == "> 1,000"
