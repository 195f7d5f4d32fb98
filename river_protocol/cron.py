"""Periodic-job schedules with the exact behaviour of River's Go stack.

River users write cron expressions for ``robfig/cron/v3`` (v3.0.1)
``ParseStandard``, or fixed intervals via ``river.PeriodicInterval``. Peers on
both sides of the queue must agree on every fire time, so this module mirrors
robfig's parser (including its error texts and quirks, such as ``*-5`` meaning
``*``) and its ``Next`` search, which walks wall-clock fields with Go's
``time.Date`` normalization. That normalization resolves non-existent and
ambiguous local times differently from Python's ``fold`` rules, so it is
emulated on Unix seconds instead of using datetime arithmetic.

A schedule's ``next(after)`` returns the following fire time in ``after``'s own
zone, or ``None`` where robfig returns the zero time (nothing within five
years, e.g. February 30).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Protocol
from zoneinfo import ZoneInfo

from river_protocol.errors import CronParseError, ValidationError
from river_protocol.golang.gotime import require_aware

__all__ = [
    "STAR_BIT",
    "CronSchedule",
    "EverySchedule",
    "IntervalSchedule",
    "Schedule",
    "parse_cron",
    "parse_go_duration",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_NS_PER_SECOND = 1_000_000_000
_MAX_INT64 = (1 << 63) - 1

# robfig marks a field written as `*`/`?` (or `*/1`) with this bit; it decides
# whether day-of-month and day-of-week combine with AND or OR.
STAR_BIT = 1 << 63


class Schedule(Protocol):
    """Anything River can ask for the next run after a given time."""

    def next(self, after: datetime) -> datetime | None: ...


# --------------------------------------------------------------------------- time helpers


def _unix_seconds(value: datetime) -> int:
    """Whole seconds since the epoch, rounded down (sub-second part dropped)."""
    delta = require_aware(value) - _EPOCH
    return delta.days * 86400 + delta.seconds


def _from_unix(seconds: int, tz: tzinfo) -> datetime:
    return (_EPOCH + timedelta(seconds=seconds)).astimezone(tz)


def _offset_at(seconds: int, tz: tzinfo) -> int:
    off = tz.utcoffset(None) if isinstance(tz, timezone) else _from_unix(seconds, tz).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


def _go_date(year: int, month: int, day: int, hour: int, minute: int, second: int, tz: tzinfo) -> int:
    """Unix seconds of Go's ``time.Date(...)`` in ``tz``, out-of-range fields normalized.

    Go reads the wall time as if it were UTC, takes the offset in force at that
    instant, and re-reads the offset at the corrected instant. For a time in a
    spring-forward gap this yields the pre-transition offset (a later instant);
    for an ambiguous time it yields whichever side the probes land on, which is
    not always Python's ``fold=0``.
    """
    carry, month0 = divmod(month - 1, 12)
    days = date(year + carry, month0 + 1, 1).toordinal() - _EPOCH_ORDINAL + day - 1
    wall = days * 86400 + hour * 3600 + minute * 60 + second
    return wall - _offset_at(wall - _offset_at(wall, tz), tz)


def _go_weekday(wall: datetime) -> int:
    return wall.isoweekday() % 7


# --------------------------------------------------------------------------- schedules


@dataclass(frozen=True, slots=True)
class IntervalSchedule:
    """``river.PeriodicInterval``: exactly ``after + interval`` (absolute time, any sign)."""

    interval: timedelta

    def next(self, after: datetime) -> datetime | None:
        tz = require_aware(after, "schedule start").tzinfo
        assert tz is not None
        # Aware datetime + timedelta moves the wall clock; Go's Add moves the instant.
        return (after.astimezone(UTC) + self.interval).astimezone(tz)


@dataclass(frozen=True, slots=True)
class EverySchedule:
    """robfig's ``ConstantDelaySchedule`` (``@every``): whole-second delay, at least 1s.

    A delay given with a sub-second part is rounded down at construction, as
    robfig's ``Every`` does; fire times land on whole seconds.
    """

    delay: timedelta

    def __post_init__(self) -> None:
        whole = max(1, self.delay // timedelta(seconds=1))
        object.__setattr__(self, "delay", timedelta(seconds=whole))

    def next(self, after: datetime) -> datetime | None:
        tz = require_aware(after, "schedule start").tzinfo
        assert tz is not None
        return _from_unix(_unix_seconds(after) + self.delay // timedelta(seconds=1), tz)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """robfig's ``SpecSchedule``: one bit per allowed value of each field.

    ``location`` is the ``CRON_TZ=``/``TZ=`` zone, or ``None`` to evaluate in
    the zone of the time passed to ``next`` (robfig's ``time.Local`` case).
    Results are always returned in the zone of the time passed in.
    """

    minute: int
    hour: int
    day_of_month: int
    month: int
    day_of_week: int
    location: tzinfo | None = None
    second: int = 1

    def _day_matches(self, wall: datetime) -> bool:
        dom_match = bool((1 << wall.day) & self.day_of_month)
        dow_match = bool((1 << _go_weekday(wall)) & self.day_of_week)
        if (self.day_of_month | self.day_of_week) & STAR_BIT:
            return dom_match and dow_match
        return dom_match or dow_match

    def _never_matches(self) -> bool:
        """True when some field admits no value at all (e.g. written as ``,``).

        robfig would then scan five years minute by minute before giving up;
        the answer is known up front.
        """
        value_bits = ~STAR_BIT
        if not (self.minute & value_bits and self.hour & value_bits and self.month & value_bits):
            return True
        dom, dow = self.day_of_month & value_bits, self.day_of_week & value_bits
        if (self.day_of_month | self.day_of_week) & STAR_BIT:
            return not (dom and dow)
        return not (dom or dow)

    def next(self, after: datetime) -> datetime | None:
        origin = require_aware(after, "schedule start").tzinfo
        assert origin is not None
        if self._never_matches():
            return None
        try:
            found = _search(self, self.location or origin, _unix_seconds(after) + 1)
        except (OverflowError, ValueError):
            # The search ran past year 9999, which Python cannot represent.
            return None
        return None if found is None else _from_unix(found, origin)


def _search(s: CronSchedule, tz: tzinfo, t: int) -> int | None:
    """robfig's ``SpecSchedule.Next`` field walk on Unix seconds ``t`` viewed in ``tz``."""
    added = False
    year_limit = _from_unix(t, tz).year + 5
    while True:  # each pass restarts from the month after a field wrapped
        w = _from_unix(t, tz)
        if w.year > year_limit:
            return None

        wrapped = False
        while not (1 << w.month) & s.month:
            if not added:
                added = True
                t = _go_date(w.year, w.month, 1, 0, 0, 0, tz)
                w = _from_unix(t, tz)
            t = _go_date(w.year, w.month + 1, w.day, w.hour, w.minute, w.second, tz)
            w = _from_unix(t, tz)
            if w.month == 1:
                wrapped = True
                break
        if wrapped:
            continue

        while not s._day_matches(w):
            if not added:
                added = True
                t = _go_date(w.year, w.month, w.day, 0, 0, 0, tz)
                w = _from_unix(t, tz)
            t = _go_date(w.year, w.month, w.day + 1, w.hour, w.minute, w.second, tz)
            w = _from_unix(t, tz)
            # Midnight may not exist on a DST day; robfig nudges back to the
            # nearest hour 0 by whole hours.
            if w.hour != 0:
                t += (24 - w.hour) * 3600 if w.hour > 12 else -w.hour * 3600
                w = _from_unix(t, tz)
            if w.day == 1:
                wrapped = True
                break
        if wrapped:
            continue

        while not (1 << w.hour) & s.hour:
            if not added:
                added = True
                t = _go_date(w.year, w.month, w.day, w.hour, 0, 0, tz)
            t += 3600
            w = _from_unix(t, tz)
            if w.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue

        while not (1 << w.minute) & s.minute:
            if not added:
                added = True
                t -= t % 60  # Go's Truncate works on the instant, not the wall clock
            t += 60
            w = _from_unix(t, tz)
            if w.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue

        while not (1 << w.second) & s.second:
            added = True
            t += 1
            w = _from_unix(t, tz)
            if w.second == 0:
                wrapped = True
                break
        if wrapped:
            continue

        return t


# --------------------------------------------------------------------------- parsing

_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}
_DOW_NAMES = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] | None = None


_SECONDS = _Bounds(0, 59)
_MINUTES = _Bounds(0, 59)
_HOURS = _Bounds(0, 23)
_DOM = _Bounds(1, 31)
_MONTHS = _Bounds(1, 12, _MONTH_NAMES)
_DOW = _Bounds(0, 6, _DOW_NAMES)

# Go's unicode.IsSpace, which strings.Fields and strings.TrimSpace use; Python's
# str.split() would also split on \x1c-\x1f.
_GO_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def _go_fields(text: str) -> list[str]:
    fields: list[str] = []
    current: list[str] = []
    for ch in text:
        if ch in _GO_SPACE:
            if current:
                fields.append("".join(current))
                current = []
        else:
            current.append(ch)
    if current:
        fields.append("".join(current))
    return fields


def _go_trim_space(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] in _GO_SPACE:
        start += 1
    while end > start and text[end - 1] in _GO_SPACE:
        end -= 1
    return text[start:end]


_QUOTE_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def _strconv_quote(text: str) -> str:
    """Go's ``strconv.Quote``, as it appears inside strconv error messages."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _QUOTE_ESCAPES:
            out.append(_QUOTE_ESCAPES[ch])
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _atoi(text: str) -> int:
    """Go's ``strconv.Atoi``; raises CronParseError with robfig's wrapping of its error."""
    body = text[1:] if text[:1] in ("+", "-") else text
    problem = None
    if not body or any(ch not in "0123456789" for ch in body):
        problem = "invalid syntax"
    else:
        value = -int(body) if text[0] == "-" else int(body)
        if not -_MAX_INT64 - 1 <= value <= _MAX_INT64:
            problem = "value out of range"
    if problem is not None:
        raise CronParseError(
            f"failed to parse int from {text}: strconv.Atoi: parsing {_strconv_quote(text)}: {problem}"
        )
    return value


def _non_negative_int(text: str) -> int:
    value = _atoi(text)
    if value < 0:
        raise CronParseError(f"negative number ({value}) not allowed: {text}")
    return value


def _int_or_name(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    return _non_negative_int(text)


def _range_bits(expr: str, bounds: _Bounds) -> int:
    """One comma-separated item: ``*``, ``?``, ``n``, ``a-b``, each with optional ``/step``."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    extra = 0
    if low_and_high[0] in ("*", "?"):
        # robfig ignores anything after "*-" here, so "*-5" is "*".
        start, end, extra = bounds.low, bounds.high, STAR_BIT
    else:
        start = _int_or_name(low_and_high[0], bounds.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], bounds.names)
        else:
            raise CronParseError(f"too many hyphens: {expr}")

    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _non_negative_int(range_and_step[1])
        if len(low_and_high) == 1:  # "n/step" runs from n to the field's maximum
            end = bounds.high
        if step > 1:
            extra = 0
    else:
        raise CronParseError(f"too many slashes: {expr}")

    if start < bounds.low:
        raise CronParseError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronParseError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronParseError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronParseError(f"step of range should be a positive number: {expr}")
    bits = 0
    for value in range(start, end + 1, step):
        bits |= 1 << value
    return bits | extra


def _field_bits(field: str, bounds: _Bounds) -> int:
    bits = 0
    for item in field.split(","):
        if item:  # robfig skips empty list items
            bits |= _range_bits(item, bounds)
    return bits


def _all(bounds: _Bounds) -> int:
    return _field_bits("*", bounds)


def _descriptor(spec: str, location: tzinfo | None) -> Schedule:
    every = "@every "
    if spec.startswith(every):
        try:
            nanos = parse_go_duration(spec[len(every):])
        except ValidationError as exc:
            raise CronParseError(f"failed to parse duration {spec}: {exc}") from None
        # robfig's Every: at least one second, sub-second part dropped.
        whole_seconds = max(nanos, _NS_PER_SECOND) // _NS_PER_SECOND
        return EverySchedule(timedelta(seconds=whole_seconds))
    # Descriptors fire at second 0, minute 0 (bit 0 set); "1 << 1" is the 1st / January.
    every_day, every_month, every_weekday = _all(_DOM), _all(_MONTHS), _all(_DOW)
    if spec in ("@yearly", "@annually"):
        return CronSchedule(1, 1, 1 << 1, 1 << 1, every_weekday, location)
    if spec == "@monthly":
        return CronSchedule(1, 1, 1 << 1, every_month, every_weekday, location)
    if spec == "@weekly":
        return CronSchedule(1, 1, every_day, every_month, 1, location)
    if spec in ("@daily", "@midnight"):
        return CronSchedule(1, 1, every_day, every_month, every_weekday, location)
    if spec == "@hourly":
        return CronSchedule(1, _all(_HOURS), every_day, every_month, every_weekday, location)
    raise CronParseError(f"unrecognized descriptor: {spec}")


def _load_location(name: str) -> tzinfo | None:
    """Go's ``time.LoadLocation``; ``None`` stands for ``time.Local``."""
    if name in ("", "UTC"):
        return UTC
    if name == "Local":
        return None
    if ".." in name or name[0] in "/\\":
        raise CronParseError(f"provided bad location {name}: time: invalid location name")
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # not found is a KeyError; directories raise OSError
        pass
    raise CronParseError(f"provided bad location {name}: unknown time zone {name}")


def parse_cron(expr: str) -> Schedule:
    """Parse ``expr`` exactly as River's ``cron.ParseStandard`` (robfig/cron v3.0.1) does.

    Five fields (minute hour day-of-month month day-of-week) with ``*``, ``?``,
    ranges, steps, lists and three-letter names; descriptors ``@yearly`` ...
    ``@hourly`` and ``@every <Go duration>``; an optional ``CRON_TZ=<zone>`` or
    ``TZ=<zone>`` prefix. Raises CronParseError with robfig's message.
    """
    spec = expr
    if not spec:
        raise CronParseError("empty spec string")

    location: tzinfo | None = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space < 0:
            # robfig panics here (slice bounds out of range [:-1]).
            raise CronParseError(f"time zone prefix without a schedule: {expr}")
        location = _load_location(spec[spec.index("=") + 1 : space])
        spec = _go_trim_space(spec[space:])

    if spec.startswith("@"):
        return _descriptor(spec, location)

    fields = _go_fields(spec)
    if len(fields) != 5:
        raise CronParseError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    second = _field_bits("0", _SECONDS)
    minute = _field_bits(fields[0], _MINUTES)
    hour = _field_bits(fields[1], _HOURS)
    day_of_month = _field_bits(fields[2], _DOM)
    month = _field_bits(fields[3], _MONTHS)
    day_of_week = _field_bits(fields[4], _DOW)
    return CronSchedule(minute, hour, day_of_month, month, day_of_week, location, second)


# --------------------------------------------------------------------------- Go durations

_UNIT_NANOS = {
    b"ns": 1,
    b"us": 1_000,
    "µs".encode(): 1_000,  # U+00B5 micro sign
    "μs".encode(): 1_000,  # U+03BC Greek mu
    b"ms": 1_000_000,
    b"s": _NS_PER_SECOND,
    b"m": 60 * _NS_PER_SECOND,
    b"h": 3600 * _NS_PER_SECOND,
}


def _time_quote(text: str) -> str:
    """The Go time package's own quoting: non-ASCII and control bytes as ``\\xNN``."""
    out = ['"']
    for ch in text:
        if ord(ch) >= 0x80 or ch < " ":
            out.extend(f"\\x{byte:02x}" for byte in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + ch if ch in ('"', "\\") else ch)
    out.append('"')
    return "".join(out)


def parse_go_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds (``1h30m``, ``1.5h``, ``-90s``, ``500ms``).

    Raises ValidationError with Go's message on bad input or int64 overflow.
    """
    invalid = ValidationError(f"time: invalid duration {_time_quote(text)}")
    s = text.encode("utf-8", "surrogatepass")
    negative = False
    if s[:1] in (b"-", b"+"):
        negative = s[:1] == b"-"
        s = s[1:]
    if s == b"0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if not (s[:1] == b"." or s[:1].isdigit()):
            raise invalid
        whole, s, overflow = _leading_int(s)
        consumed_whole = whole is not None
        if overflow:
            raise invalid
        frac, scale, consumed_frac = 0, 1.0, False
        if s[:1] == b".":
            frac, scale, rest = _leading_fraction(s[1:])
            consumed_frac = len(rest) != len(s) - 1
            s = rest
        if not consumed_whole and not consumed_frac:
            raise invalid
        end = 0
        while end < len(s) and not (s[end : end + 1] == b"." or s[end : end + 1].isdigit()):
            end += 1
        if end == 0:
            raise ValidationError(f"time: missing unit in duration {_time_quote(text)}")
        unit_text, s = s[:end], s[end:]
        unit = _UNIT_NANOS.get(unit_text)
        if unit is None:
            unit_name = _time_quote(unit_text.decode("utf-8", "surrogatepass"))
            raise ValidationError(f"time: unknown unit {unit_name} in duration {_time_quote(text)}")
        value = whole or 0
        if value > (1 << 63) // unit:
            raise invalid
        value *= unit
        if frac > 0:
            # Go computes the fractional part in float64; truncation matches its uint64 cast.
            value += int(float(frac) * (float(unit) / scale))
            if value > 1 << 63:
                raise invalid
        total += value
        if total > 1 << 63:
            raise invalid
    if negative:
        return -total
    if total > _MAX_INT64:
        raise invalid
    return total


def _leading_int(s: bytes) -> tuple[int | None, bytes, bool]:
    """Digits at the start of ``s``: (value or None if there were none, rest, overflowed)."""
    i, value = 0, 0
    while i < len(s) and 0x30 <= s[i] <= 0x39:
        if value > (1 << 63) // 10:
            return None, s, True
        value = value * 10 + s[i] - 0x30
        if value > 1 << 63:
            return None, s, True
        i += 1
    return (value if i else None), s[i:], False


def _leading_fraction(s: bytes) -> tuple[int, float, bytes]:
    """Digits after a decimal point: (value, 10**digits kept, rest); extra digits are ignored."""
    i, value, scale, overflow = 0, 0, 1.0, False
    while i < len(s) and 0x30 <= s[i] <= 0x39:
        if not overflow:
            candidate = value * 10 + s[i] - 0x30
            if value > _MAX_INT64 // 10 or candidate > 1 << 63:
                overflow = True
            else:
                value = candidate
                scale *= 10
        i += 1
    return value, scale, s[i:]
