"""Cron parsing and next-fire times, checked against robfig/cron v3.0.1 behaviour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.cron import (
    STAR_BIT,
    CronSchedule,
    EverySchedule,
    IntervalSchedule,
    Schedule,
    _go_date,
    parse_cron,
    parse_go_duration,
)
from river_protocol.errors import CronParseError, ValidationError

NY = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")
LA = ZoneInfo("America/Los_Angeles")


def bits(*values: int) -> int:
    out = 0
    for value in values:
        out |= 1 << value
    return out


def chain(schedule: Schedule, start: datetime, count: int) -> list[datetime | None]:
    out: list[datetime | None] = []
    current: datetime | None = start
    for _ in range(count):
        assert current is not None
        current = schedule.next(current)
        out.append(current)
        if current is None:
            break
    return out


# --------------------------------------------------------------------------- parsing


def test_parse_fields_ranges_steps_lists_and_names() -> None:
    schedule = parse_cron("*/15 9-17 1,15 JAN-mar mon-FRI")
    assert isinstance(schedule, CronSchedule)
    assert schedule.minute == bits(0, 15, 30, 45)
    assert schedule.hour == bits(*range(9, 18))
    assert schedule.day_of_month == bits(1, 15)
    assert schedule.month == bits(1, 2, 3)
    assert schedule.day_of_week == bits(1, 2, 3, 4, 5)
    assert schedule.location is None


def test_star_bit_rules() -> None:
    schedule = parse_cron("* */1 ? */2 5/20")
    assert isinstance(schedule, CronSchedule)
    assert schedule.minute == bits(*range(60)) | STAR_BIT
    assert schedule.hour == bits(*range(24)) | STAR_BIT  # "*/1" is still a star
    assert schedule.day_of_month == bits(*range(1, 32)) | STAR_BIT  # "?" is "*"
    assert schedule.month == bits(1, 3, 5, 7, 9, 11)  # "*/2" is not
    assert schedule.day_of_week == bits(5)  # "n/step" runs to the maximum


def test_parse_quirks_kept_from_robfig() -> None:
    quirky = parse_cron("*-5 1,,2 * * *")
    assert isinstance(quirky, CronSchedule)
    assert quirky.minute == bits(*range(60)) | STAR_BIT
    assert quirky.hour == bits(1, 2)
    assert parse_cron("  0\t0  * * *") == parse_cron("0 0 * * *")


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("@yearly", CronSchedule(1, 1, bits(1), bits(1), bits(*range(7)) | STAR_BIT)),
        ("@annually", CronSchedule(1, 1, bits(1), bits(1), bits(*range(7)) | STAR_BIT)),
        ("@monthly", parse_cron("0 0 1 * *")),
        ("@weekly", parse_cron("0 0 * * 0")),
        ("@daily", parse_cron("0 0 * * *")),
        ("@midnight", parse_cron("0 0 * * *")),
        ("@hourly", parse_cron("0 * * * *")),
    ],
)
def test_descriptors(expr: str, expected: Schedule) -> None:
    assert parse_cron(expr) == expected


@pytest.mark.parametrize(
    ("expr", "seconds"),
    [("@every 90s", 90), ("@every 1h30m", 5400), ("@every 1.5h", 5400), ("@every 500ms", 1),
     ("@every 0s", 1), ("@every -5s", 1), ("@every 1m0.999s", 60), ("@every 25h", 90000)],
)
def test_every_rounds_down_to_whole_seconds_minimum_one(expr: str, seconds: int) -> None:
    assert parse_cron(expr) == EverySchedule(timedelta(seconds=seconds))


def test_time_zone_prefixes() -> None:
    ny = parse_cron("CRON_TZ=America/New_York 0 9 * * *")
    assert isinstance(ny, CronSchedule) and ny.location == NY
    london = parse_cron("TZ=Europe/London   30 1 * * *")
    assert isinstance(london, CronSchedule) and london.location == LONDON
    utc = parse_cron("CRON_TZ=UTC @daily")
    assert isinstance(utc, CronSchedule) and utc.location is UTC
    local = parse_cron("CRON_TZ=Local 0 0 * * *")
    assert isinstance(local, CronSchedule) and local.location is None
    # @every ignores the zone, as robfig does.
    assert parse_cron("CRON_TZ=America/New_York @every 1h") == EverySchedule(timedelta(hours=1))


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("", "empty spec string"),
        ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
        ("0 0 * * 6-7", "end of range (7) above maximum (6): 6-7"),
        ("0 0 L * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'),
        ("10-5 * * * *", "beginning of range (10) beyond end of range (5): 10-5"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("*/-5 * * * *", "negative number (-5) not allowed: -5"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("-1 * * * *", 'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
        ("99999999999999999999 * * * *",
         "failed to parse int from 99999999999999999999: strconv.Atoi: parsing "
         '"99999999999999999999": value out of range'),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 0 * * sat-sun", "beginning of range (6) beyond end of range (0): sat-sun"),
        ("0 0 * * monday", 'failed to parse int from monday: strconv.Atoi: parsing "monday": invalid syntax'),
        ("@YEARLY", "unrecognized descriptor: @YEARLY"),
        ("@daily extra", "unrecognized descriptor: @daily extra"),
        ("@every", "unrecognized descriptor: @every"),
        ("@every 1d", 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'),
        (" @daily", "expected exactly 5 fields, found 1: [@daily]"),
        ("CRON_TZ=Invalid/Zone 0 0 * * *",
         "provided bad location Invalid/Zone: unknown time zone Invalid/Zone"),
        ("TZ=../etc/passwd 0 0 * * *", "provided bad location ../etc/passwd: time: invalid location name"),
        ("cron_tz=UTC 0 0 * * *", "expected exactly 5 fields, found 6: [cron_tz=UTC 0 0 * * *]"),
    ],
)
def test_parse_errors_carry_robfig_messages(expr: str, message: str) -> None:
    with pytest.raises(CronParseError) as info:
        parse_cron(expr)
    assert str(info.value) == message


def test_zone_prefix_without_schedule_is_an_error_not_a_crash() -> None:
    with pytest.raises(CronParseError, match="without a schedule"):
        parse_cron("CRON_TZ=America/New_York")


@pytest.mark.parametrize(
    ("text", "nanos"),
    [("1h30m", 5_400_000_000_000), ("1.5h", 5_400_000_000_000), ("90s", 90_000_000_000),
     ("500ms", 500_000_000), ("-1m30s", -90_000_000_000), ("+.5us", 500), ("3µs", 3000), ("3μs", 3000),
     ("0", 0), ("-0", 0), ("1.s", 1_000_000_000), ("7ns", 7),
     ("9223372036854775807ns", 2**63 - 1), ("-9223372036854775808ns", -(2**63)),
     ("2562047h47m16.854775807s", 2**63 - 1)],
)
def test_parse_go_duration(text: str, nanos: int) -> None:
    assert parse_go_duration(text) == nanos


@pytest.mark.parametrize(
    ("text", "message"),
    [("", 'time: invalid duration ""'), (".", 'time: invalid duration "."'),
     ("1", 'time: missing unit in duration "1"'), ("abc", 'time: invalid duration "abc"'),
     ("1e3s", 'time: unknown unit "e" in duration "1e3s"'),
     ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
     ("1日", 'time: unknown unit "\\xe6\\x97\\xa5" in duration "1\\xe6\\x97\\xa5"')],
)
def test_parse_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_go_duration(text)
    assert str(info.value) == message


# --------------------------------------------------------------------------- next


def test_next_basic_and_sub_second_truncation() -> None:
    schedule = parse_cron("* * * * *")
    assert schedule.next(datetime(2024, 2, 28, 12, 34, 56, 789000, tzinfo=UTC)) == datetime(
        2024, 2, 28, 12, 35, tzinfo=UTC
    )
    assert schedule.next(datetime(2024, 1, 1, tzinfo=UTC)) == datetime(2024, 1, 1, 0, 1, tzinfo=UTC)


def test_impossible_dates_give_none_and_leap_days_are_found() -> None:
    start = datetime(2024, 3, 1, tzinfo=UTC)
    assert parse_cron("0 0 30 2 *").next(start) is None
    assert parse_cron(", * * * *").next(start) is None
    assert chain(parse_cron("0 0 29 2 *"), start, 2) == [
        datetime(2028, 2, 29, tzinfo=UTC), datetime(2032, 2, 29, tzinfo=UTC),
    ]
    # 2100 is not a leap year: the next Feb 29 is 2104, within robfig's five years.
    assert parse_cron("0 0 29 2 *").next(datetime(2100, 2, 27, tzinfo=UTC)) == datetime(
        2104, 2, 29, tzinfo=UTC
    )


def test_day_of_month_or_day_of_week_unless_one_is_a_star() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday
    either = chain(parse_cron("0 0 1,15 * 3"), start, 4)  # the 1st, the 15th, or Wednesdays
    assert [d.day if d else None for d in either] == [3, 10, 15, 17]
    both = chain(parse_cron("0 0 ? * MON"), start, 2)  # "?" is a star: Mondays only
    assert [d.day if d else None for d in both] == [8, 15]


def test_next_returns_in_input_zone_and_evaluates_in_cron_tz() -> None:
    schedule = parse_cron("CRON_TZ=America/New_York 0 9 * * *")
    got = schedule.next(datetime(2024, 7, 15, 10, tzinfo=UTC))
    assert got == datetime(2024, 7, 15, 13, tzinfo=UTC) and got is not None and got.tzinfo is UTC
    # Without CRON_TZ the start time's zone decides.
    local = parse_cron("0 9 * * *").next(datetime(2024, 7, 15, 10, tzinfo=UTC).astimezone(NY))  # 06:00 EDT
    assert local == datetime(2024, 7, 15, 9, tzinfo=NY) and local is not None and local.tzinfo is NY


def test_dst_new_york_gap_is_skipped_and_repeated_hour_fires_twice() -> None:
    gap = chain(parse_cron("CRON_TZ=America/New_York 30 2 * * *"), datetime(2024, 3, 9, 12, tzinfo=NY), 2)
    assert [d.astimezone(NY).isoformat() if d else None for d in gap] == [
        "2024-03-11T02:30:00-04:00", "2024-03-12T02:30:00-04:00",
    ]
    repeat = chain(parse_cron("30 1 * * *"), datetime(2024, 11, 3, 0, tzinfo=NY), 3)
    assert [d.isoformat() if d else None for d in repeat] == [
        "2024-11-03T01:30:00-04:00", "2024-11-03T01:30:00-05:00", "2024-11-04T01:30:00-05:00",
    ]


def test_dst_london_gap_is_skipped_and_repeated_hour_fires_twice() -> None:
    gap = chain(parse_cron("TZ=Europe/London 30 1 * * *"), datetime(2024, 3, 30, 12, tzinfo=UTC), 2)
    assert [d.astimezone(LONDON).isoformat() if d else None for d in gap] == [
        "2024-04-01T01:30:00+01:00", "2024-04-02T01:30:00+01:00",
    ]
    repeat = chain(parse_cron("30 1 * * *"), datetime(2024, 10, 26, 23, tzinfo=UTC).astimezone(LONDON), 3)
    assert [d.isoformat() if d else None for d in repeat] == [
        "2024-10-27T01:30:00+01:00", "2024-10-27T01:30:00+00:00", "2024-10-28T01:30:00+00:00",
    ]


@pytest.mark.parametrize(
    ("fields", "tz", "unix"),
    [
        # Go's documented time.Date results around Los Angeles' 2011 transitions.
        ((2011, 11, 6, 1, 0, 0), LA, 1320566400),  # ambiguous: first (PDT)
        ((2011, 11, 6, 2, 0, 0), LA, 1320573600),
        ((2011, 3, 13, 2, 30, 0), LA, 1300008600),  # in the gap: 2:30 PDT == 1:30 PST
        ((2011, 3, 13, 3, 0, 0), LA, 1300010400),
        ((2011, 11, 19, -17, 56, 35), LA, 1321631795),  # out-of-range fields normalize
        ((2011, 10, 49, 7, 56, 35), LA, 1321631795),
        ((2024, 13, 1, 0, 0, 0), UTC, 1735689600),
        # London's offset is zero at the probe, so the ambiguous 01:30 is the later (GMT) one.
        ((2024, 10, 27, 1, 30, 0), LONDON, 1729992600),
        ((2024, 3, 31, 1, 30, 0), LONDON, 1711848600),  # in the gap: 02:30 BST
    ],
)
def test_go_date_normalization(fields: tuple[int, int, int, int, int, int], tz: tzinfo, unix: int) -> None:
    assert _go_date(*fields, tz) == unix


def test_interval_schedule_adds_absolute_time() -> None:
    start = datetime(2024, 3, 10, 1, 45, tzinfo=NY)
    got = IntervalSchedule(timedelta(minutes=15)).next(start)
    assert got is not None and got.isoformat() == "2024-03-10T03:00:00-04:00"
    assert IntervalSchedule(timedelta(0)).next(start) == start
    assert IntervalSchedule(timedelta(minutes=-1)).next(start) == start - timedelta(minutes=1)
    assert IntervalSchedule(timedelta(seconds=1.5)).next(start) == start + timedelta(seconds=1.5)


def test_every_schedule_lands_on_whole_seconds() -> None:
    every = EverySchedule(timedelta(milliseconds=1900))
    assert every.delay == timedelta(seconds=1)
    assert EverySchedule(timedelta(0)).delay == timedelta(seconds=1)
    start = datetime(2024, 5, 31, 23, 59, 59, 500000, tzinfo=UTC)
    assert every.next(start) == datetime(2024, 6, 1, tzinfo=UTC)
    ny = EverySchedule(timedelta(minutes=30)).next(datetime(2024, 11, 3, 1, 45, tzinfo=NY))
    assert ny is not None and ny.isoformat() == "2024-11-03T01:15:00-05:00"


@pytest.mark.parametrize(
    "schedule",
    [parse_cron("* * * * *"), IntervalSchedule(timedelta(1)), EverySchedule(timedelta(1))],
)
def test_naive_start_is_rejected(schedule: Schedule) -> None:
    with pytest.raises(ValidationError):
        schedule.next(datetime(2024, 1, 1))


# --------------------------------------------------------------------------- properties


@dataclass(frozen=True)
class Field:
    text: str
    values: frozenset[int]
    star: bool


def field_strategy(low: int, high: int) -> st.SearchStrategy[Field]:
    value = st.integers(low, high)

    @st.composite
    def item(draw: st.DrawFn) -> Field:
        kind = draw(st.sampled_from(["star", "star_step", "single", "range", "range_step", "start_step"]))
        step = draw(st.integers(1, 12))
        if kind == "star":
            return Field("*", frozenset(range(low, high + 1)), True)
        if kind == "star_step":
            return Field(f"*/{step}", frozenset(range(low, high + 1, step)), step == 1)
        a = draw(value)
        if kind == "single":
            return Field(str(a), frozenset({a}), False)
        if kind == "start_step":
            return Field(f"{a}/{step}", frozenset(range(a, high + 1, step)), False)
        b = draw(st.integers(a, high))
        if kind == "range":
            return Field(f"{a}-{b}", frozenset(range(a, b + 1)), False)
        return Field(f"{a}-{b}/{step}", frozenset(range(a, b + 1, step)), False)

    def combine(items: list[Field]) -> Field:
        return Field(
            ",".join(i.text for i in items),
            frozenset().union(*(i.values for i in items)),
            any(i.star for i in items),
        )

    return st.lists(item(), min_size=1, max_size=3).map(combine)


@dataclass(frozen=True)
class Expr:
    minute: Field
    hour: Field
    dom: Field
    month: Field
    dow: Field

    @property
    def text(self) -> str:
        return " ".join(f.text for f in (self.minute, self.hour, self.dom, self.month, self.dow))

    def matches(self, wall: datetime) -> bool:
        dom_ok = wall.day in self.dom.values
        dow_ok = wall.isoweekday() % 7 in self.dow.values
        day_ok = (dom_ok and dow_ok) if (self.dom.star or self.dow.star) else (dom_ok or dow_ok)
        return (
            wall.second == 0 and wall.minute in self.minute.values and wall.hour in self.hour.values
            and wall.month in self.month.values and day_ok
        )


exprs = st.builds(
    Expr, field_strategy(0, 59), field_strategy(0, 23), field_strategy(1, 31),
    field_strategy(1, 12), field_strategy(0, 6),
)
_TRANSITIONS = [  # New York and London DST changes, where wall-clock walking gets tricky
    datetime(2024, 3, 10, 7, tzinfo=UTC), datetime(2024, 11, 3, 6, tzinfo=UTC),
    datetime(2024, 3, 31, 1, tzinfo=UTC), datetime(2024, 10, 27, 1, tzinfo=UTC),
]
starts = st.one_of(
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)),
    st.builds(
        lambda edge, seconds: edge + timedelta(seconds=seconds),
        st.sampled_from(_TRANSITIONS), st.integers(-2 * 86400, 2 * 86400),
    ),
)
zones = st.sampled_from([UTC, NY, LONDON])


@settings(max_examples=150, deadline=None)
@given(exprs, starts, zones)
def test_next_times_increase_and_match_the_fields(expr: Expr, start: datetime, zone: tzinfo) -> None:
    schedule = parse_cron(expr.text)
    current = start.astimezone(zone)
    for _ in range(3):
        following = schedule.next(current)
        if following is None:
            return
        # Compare instants: Python compares two datetimes of one zone by wall clock,
        # ignoring fold, so the repeated fall-back hour would look like going back.
        assert following.astimezone(UTC) > current.astimezone(UTC)
        assert following.tzinfo is zone
        assert expr.matches(following), (expr.text, following.isoformat())
        current = following


@settings(max_examples=100, deadline=None)
@given(exprs, starts)
def test_no_matching_minute_is_skipped_in_utc(expr: Expr, start: datetime) -> None:
    following = parse_cron(expr.text).next(start)
    window_end = start + timedelta(days=2)
    if following is not None:
        assert expr.matches(following)
        window_end = min(window_end, following)
    minute = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while minute < window_end:
        assert not expr.matches(minute), (expr.text, start.isoformat(), minute.isoformat())
        minute += timedelta(minutes=1)
