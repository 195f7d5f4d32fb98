"""robfig/cron ``ParseStandard`` + chained ``Next`` and ``river.PeriodicInterval``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from river_protocol.cron import CronSchedule, EverySchedule, IntervalSchedule, Schedule, parse_cron
from river_protocol.errors import CronParseError
from river_protocol.golang.gotime import format_rfc3339nano, parse_time

NAME = "cron"
FILENAME = "cron.json"

_LOCAL_SPEC = "Local (schedule evaluated in the start time's location)"


def _zone(name: str) -> tzinfo:
    # The generator ran with TZ=UTC, so Go's Local was UTC.
    return UTC if name in ("UTC", "Local") else ZoneInfo(name)


def _zone_name(tz: tzinfo | None) -> str:
    if tz is None:
        return _LOCAL_SPEC
    if isinstance(tz, ZoneInfo):
        return tz.key
    return "UTC" if tz is UTC else repr(tz)


def _start(case: dict[str, Any]) -> datetime:
    start = case["start"]
    return parse_time(start["utc"]).astimezone(_zone(start["location"]))


def _compare_chain(schedule: Schedule, case: dict[str, Any]) -> str | None:
    current = _start(case)
    for index, want in enumerate(case["next"]):
        got = schedule.next(current)
        where = f"next[{index}] after {current.isoformat()}"
        if want["is_zero"]:
            return None if got is None else f"{where}: got {got.isoformat()}, want zero time"
        if got is None:
            return f"{where}: got zero time, want {want['utc']}"
        offset = got.utcoffset()
        got_fields = {
            "utc": format_rfc3339nano(got.astimezone(UTC)),
            "local": format_rfc3339nano(got),
            "location": _zone_name(got.tzinfo) if want["location"] != "Local" else "Local",
            "utc_offset_seconds": int(offset.total_seconds()) if offset is not None else None,
        }
        want_fields = {key: want[key] for key in got_fields}
        if got_fields != want_fields:
            return f"{where}: got {got_fields}, want {want_fields}"
        current = got
    return None


def _check_interval(case: dict[str, Any]) -> str | None:
    nanos = case["interval_ns"]
    if nanos % 1000:
        return f"interval {nanos}ns is finer than Python's microseconds"
    return _compare_chain(IntervalSchedule(timedelta(microseconds=nanos // 1000)), case)


def _check_parsed(schedule: Schedule, case: dict[str, Any]) -> str | None:
    kind = case["schedule_type"]
    if kind == "cron.ConstantDelaySchedule":
        if not isinstance(schedule, EverySchedule):
            return f"got {schedule!r}, want an @every schedule"
        delay_ns = schedule.delay // timedelta(microseconds=1) * 1000
        if delay_ns != case["constant_delay_ns"]:
            return f"delay {delay_ns}ns, want {case['constant_delay_ns']}ns"
    elif kind == "*cron.SpecSchedule":
        if not isinstance(schedule, CronSchedule):
            return f"got {schedule!r}, want a cron spec schedule"
        if _zone_name(schedule.location) != case["spec_location"]:
            return f"location {_zone_name(schedule.location)!r}, want {case['spec_location']!r}"
    else:
        return f"unknown schedule_type {kind!r}"
    return _compare_chain(schedule, case)


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    if case["kind"] == "river.PeriodicInterval":
        return _check_interval(case)
    if case["kind"] != "cron.ParseStandard":
        return f"unknown case kind {case['kind']!r}"
    want_error = case["parse_error"]
    try:
        schedule = parse_cron(case["expression"])
    except CronParseError as exc:
        if want_error is None:
            return f"unexpected parse error: {exc}"
        if want_error.startswith("PANIC:") or str(exc) == want_error:
            return None
        return f"parse error {str(exc)!r}, want {want_error!r}"
    if want_error is not None:
        return f"parsed as {schedule!r}, want error {want_error!r}"
    return _check_parsed(schedule, case)
