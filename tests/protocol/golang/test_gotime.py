from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.errors import ValidationError
from river_protocol.golang.gotime import (
    GoTime,
    civil_from_days,
    format_rfc3339nano,
    format_sqlite_time,
    parse_time,
    to_gotime,
)


def test_rfc3339_nano_trims_zeros_and_keeps_location() -> None:
    ny = ZoneInfo("America/New_York")
    assert GoTime(1710053999_999999999, ny).format_rfc3339() == "2024-03-10T01:59:59.999999999-05:00"
    assert GoTime(1715694327_100000000).format_rfc3339() == "2024-05-14T13:45:27.1Z"
    assert GoTime(1715694327_100000000).format_rfc3339(nano=False) == "2024-05-14T13:45:27Z"
    # Go prints a sub-minute offset as +00:00, not Z.
    assert GoTime(1715694297_000000000, timezone(timedelta(seconds=30))).format_rfc3339() == (
        "2024-05-14T13:45:27+00:00"
    )
    assert GoTime(1715694357_000000000, timezone(timedelta(seconds=-30))).format_rfc3339() == (
        "2024-05-14T13:45:27+00:00"
    )


def test_years_far_from_epoch() -> None:
    assert GoTime(-62135596800 * 10**9).format_rfc3339() == "0001-01-01T00:00:00Z"
    assert civil_from_days(0) == (1970, 1, 1)
    assert civil_from_days(-1) == (1969, 12, 31)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValidationError, match="naive"):
        to_gotime(datetime(2024, 1, 1))
    with pytest.raises(ValidationError, match="naive"):
        format_sqlite_time(datetime(2024, 1, 1))


def test_sqlite_time_rounds_to_milliseconds_with_three_digits() -> None:
    # River 0.44 writes three fractional digits always; up to v0.43 it trimmed trailing zeros.
    assert format_sqlite_time(datetime(2026, 8, 5, 12, 0, 0, tzinfo=UTC)) == "2026-08-05 12:00:00.000"
    assert format_sqlite_time(datetime(2026, 8, 5, 12, 0, 0, 100000, tzinfo=UTC)) == "2026-08-05 12:00:00.100"
    assert format_sqlite_time(datetime(2026, 8, 5, 12, 0, 0, 123456, tzinfo=UTC)) == "2026-08-05 12:00:00.123"
    assert format_sqlite_time(datetime(2026, 8, 5, 12, 0, 0, 999600, tzinfo=UTC)) == "2026-08-05 12:00:01.000"
    plus2 = timezone(timedelta(hours=2))
    assert format_sqlite_time(datetime(2026, 8, 5, 14, 0, tzinfo=plus2)) == "2026-08-05 12:00:00.000"


_MODERN = st.datetimes(datetime(1000, 1, 1), datetime(9999, 12, 31, 23), timezones=st.just(UTC))


@given(_MODERN, _MODERN)
def test_sqlite_time_text_sorts_like_the_instants(a: datetime, b: datetime) -> None:
    # SQLite compares these as text; the fixed shape keeps that order equal to time order.
    ta, tb = format_sqlite_time(a), format_sqlite_time(b)
    assert (ta < tb) == (parse_time(ta) < parse_time(tb))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-08-05 12:00:00", datetime(2026, 8, 5, 12, tzinfo=UTC)),
        ("2026-08-05 12:00:00.123", datetime(2026, 8, 5, 12, 0, 0, 123000, tzinfo=UTC)),
        ("2026-08-05T14:00:00.123456789+02:00", datetime(2026, 8, 5, 12, 0, 0, 123456, tzinfo=UTC)),
        (
            "2026-08-05 12:00:01.234567891 +0000 UTC m=+1.234567",
            datetime(2026, 8, 5, 12, 0, 1, 234567, tzinfo=UTC),
        ),
        ("2026-08-05 07:00:00 -0500 EST", datetime(2026, 8, 5, 12, tzinfo=UTC)),
        ("2026-08-05T12:00:00Z", datetime(2026, 8, 5, 12, tzinfo=UTC)),
    ],
)
def test_parse_time_accepts_every_writer_form(text: str, expected: datetime) -> None:
    assert parse_time(text) == expected


def test_parse_time_rejects_garbage() -> None:
    with pytest.raises(ValidationError, match="unparseable time"):
        parse_time("yesterday")


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)))
def test_gotime_round_trips_datetimes(value: datetime) -> None:
    assert to_gotime(value).to_datetime() == value
    assert parse_time(format_rfc3339nano(value)) == value


@settings(max_examples=300)
@given(st.text(alphabet="0123456789", min_size=17, max_size=17))
def test_sqlite_text_shortcut_reads_as_the_general_parser_does(digits: str) -> None:
    # "YYYY-MM-DD HH:MM:SS.fff" takes the C parser; the same fields written as RFC 3339 with "Z"
    # take the general one. Both accept or both refuse, and agree when they accept.
    d = digits
    sqlite = f"{d[:4]}-{d[4:6]}-{d[6:8]} {d[8:10]}:{d[10:12]}:{d[12:14]}.{d[14:]}"
    rfc = sqlite.replace(" ", "T") + "Z"

    def read(text: str) -> object:
        try:
            return parse_time(text)
        except ValidationError:
            return "refused"

    assert read(sqlite) == read(rfc)
    value = read(sqlite)
    assert value == "refused" or (isinstance(value, datetime) and value.tzinfo is UTC)


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)))
def test_sqlite_text_written_by_river_reads_back_to_the_millisecond(value: datetime) -> None:
    text = format_sqlite_time(value)
    assert parse_time(text) == parse_time(text.replace(" ", "T") + "Z")
    assert abs(parse_time(text) - value) <= timedelta(microseconds=500)
