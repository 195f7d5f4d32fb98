"""retry.json: River's default retry policy, down to float bits and Go's int64 conversion."""

from __future__ import annotations

import re
import struct
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from river_protocol.golang.gotime import NS_PER_SECOND, GoTime
from river_protocol.retry import (
    MAX_DURATION_NS,
    MAX_DURATION_SECONDS,
    MIN_DURATION_NS,
    base_retry_seconds,
    capped_duration_ns,
    go_duration_ns,
    go_duration_seconds,
    go_pow4,
    retry_seconds,
)

NAME = "retry"
FILENAME = "retry.json"

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_gotime(text: str) -> GoTime:
    """An RFC 3339 fixture time with all its nanoseconds (``parse_time`` keeps microseconds)."""
    m = _RFC3339.match(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    tz = UTC
    if m[8] != "Z":
        sign = -1 if m[8][0] == "-" else 1
        tz = timezone(sign * timedelta(hours=int(m[8][1:3]), minutes=int(m[8][4:6])))
    wall = datetime(y, mo, d, h, mi, s, tzinfo=tz)
    delta = wall - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    return GoTime(seconds * NS_PER_SECOND + int((m[7] or "").ljust(9, "0")), tz)


def _bits(value: float) -> str:
    return struct.pack(">d", value).hex()


def _same_float(a: float, b: float) -> bool:
    return _bits(float(a)) == _bits(float(b))


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    problems: list[str] = []

    def expect(what: str, got: Any, want: Any) -> None:
        if got != want:
            problems.append(f"{what}: got {got!r}, want {want!r}")

    if fixture["max_duration_seconds_bits"] != _bits(MAX_DURATION_SECONDS):
        problems.append(f"max_duration_seconds bits {_bits(MAX_DURATION_SECONDS)}")
    expect("max_duration_ns", MAX_DURATION_NS, fixture["max_duration_ns"])
    expect("seconds_as_duration_of_max_ns", go_duration_ns(MAX_DURATION_SECONDS),
           fixture["seconds_as_duration_of_max_ns"])

    error_count = case["error_count"]
    now = parse_gotime(fixture["now_used_for_samples"])
    expect("attempt_arg", error_count + 1, case["attempt_arg"])

    base = base_retry_seconds(error_count)
    expect("base_seconds bits", _bits(base), case["base_seconds_float64_bits"])
    if not _same_float(go_pow4(error_count + 1), case["pow_attempt_4"]):
        problems.append(f"pow_attempt_4: got {go_pow4(error_count + 1)!r}, want {case['pow_attempt_4']!r}")
    capped = base == MAX_DURATION_SECONDS
    expect("cap_applies", capped, case["cap_applies"])
    expect("jitter_applied", not capped, case["jitter_applied"])
    expect("base_as_duration_ns", go_duration_ns(base), case["base_as_duration_ns"])

    low = retry_seconds(error_count, 0.0)
    high = base if capped else base + base * 0.1
    high_capped = min(high, MAX_DURATION_SECONDS)
    for what, got in (("jittered_seconds_min", low), ("jittered_seconds_max_exclusive", high),
                      ("jittered_seconds_max_capped", high_capped)):
        if not _same_float(got, case[what]):
            problems.append(f"{what}: got {got!r}, want {case[what]!r}")
    expect("jitter_may_hit_cap", not capped and high > MAX_DURATION_SECONDS,
           case.get("jitter_may_hit_cap", False))

    for draw in case["jitter_draws"]:
        r = draw["r"]
        seconds = retry_seconds(error_count, r)
        if not _same_float(seconds, draw["seconds"]):
            problems.append(f"r={r!r} seconds: got {seconds!r}, want {draw['seconds']!r}")
        duration = go_duration_ns(seconds)
        expect(f"r={r!r} duration_ns", duration, draw["duration_ns"])
        at = GoTime(now.unix_ns + duration, UTC).format_rfc3339()
        expect(f"r={r!r} next_retry_at_from_now", at, draw["next_retry_at_from_now"])

    # Random draws: only the window is stable (overflowed draws wrap to MinInt64).
    lowest_ns, highest_ns = capped_duration_ns(low), capped_duration_ns(high_capped)
    may_overflow = capped or high >= MAX_DURATION_SECONDS

    def in_window(delay_ns: int) -> bool:
        if delay_ns == MIN_DURATION_NS:
            return may_overflow
        return lowest_ns <= delay_ns <= highest_ns

    for sample in case.get("next_retry_at_samples", []):
        delay = sample["delay_ns"]
        if not in_window(delay):
            problems.append(f"sample delay {delay} outside [{lowest_ns}, {highest_ns}]")
        if not _same_float(go_duration_seconds(delay), sample["delay_seconds"]):
            problems.append(f"sample delay_seconds {sample['delay_seconds']!r} != Seconds({delay})")
        at = GoTime(now.unix_ns + delay, UTC).format_rfc3339()
        expect("sample next_retry_at", at, sample["next_retry_at"])
    if "default_client_retry_policy_sample" in case:
        sample_at = parse_gotime(case["default_client_retry_policy_sample"])
        delay = sample_at.unix_ns - now.unix_ns
        if not in_window(delay):
            problems.append(f"default policy sample delay {delay} outside [{lowest_ns}, {highest_ns}]")
        expect("default_client_retry_policy_sample_before_now", delay < 0,
               case["default_client_retry_policy_sample_before_now"])
    return "\n".join(problems) or None
