"""Time values and their text forms, as Go River writes and reads them.

Python datetimes stop at microseconds while Go's ``time.Time`` carries
nanoseconds and a location; ``GoTime`` keeps both so that values Go produced
(fixtures, peers' JSON) round-trip exactly. Everything else in the core takes
aware ``datetime`` values and converts with ``to_gotime``.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from river_protocol.errors import ValidationError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NS_PER_SECOND = 1_000_000_000


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of the proleptic Gregorian day ``days`` after 1970-01-01, any year."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


@dataclass(frozen=True, slots=True)
class GoTime:
    """An instant with nanosecond precision, displayed in ``tz`` (Go's Location)."""

    unix_ns: int
    tz: tzinfo = UTC

    @classmethod
    def from_datetime(cls, value: datetime) -> GoTime:
        if value.tzinfo is None:
            raise ValidationError(f"naive datetime {value!r}: River times must be timezone-aware")
        delta = value - _EPOCH
        micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return cls(micros * 1000, value.tzinfo)

    def to_datetime(self) -> datetime:
        """The instant truncated to microseconds, in ``tz``."""
        micros = self.unix_ns // 1000
        return (_EPOCH + timedelta(microseconds=micros)).astimezone(self.tz)

    def utc_offset_seconds(self) -> int:
        tz = self.tz
        off: timedelta | None
        if isinstance(tz, timezone):
            off = tz.utcoffset(None)
        else:
            secs = self.unix_ns // NS_PER_SECOND
            try:
                off = datetime.fromtimestamp(secs, tz).utcoffset()
            except (OverflowError, ValueError, OSError):
                probe = datetime(1, 1, 2) if secs < 0 else datetime(9999, 12, 30)
                off = tz.utcoffset(probe)
        return int(off.total_seconds()) if off is not None else 0

    def wall_fields(self) -> tuple[int, int, int, int, int, int, int]:
        """(year, month, day, hour, minute, second, nanosecond) on the wall clock of ``tz``."""
        local_ns = self.unix_ns + self.utc_offset_seconds() * NS_PER_SECOND
        secs, nanos = divmod(local_ns, NS_PER_SECOND)
        days, rem = divmod(secs, 86400)
        year, month, day = civil_from_days(days)
        return year, month, day, rem // 3600, rem % 3600 // 60, rem % 60, nanos

    def format_rfc3339(self, *, nano: bool = True) -> str:
        """Go's ``time.RFC3339Nano`` (``nano=True``) or ``time.RFC3339`` layout."""
        year, month, day, hour, minute, second, nanos = self.wall_fields()
        text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
        if nano and nanos:
            text += "." + f"{nanos:09d}".rstrip("0")
        offset = self.utc_offset_seconds()
        if offset == 0:
            return text + "Z"
        # Go truncates the offset to whole minutes toward zero and signs the result,
        # so -30 s prints as +00:00.
        zone = int(offset / 60)
        sign = "-" if zone < 0 else "+"
        minutes = abs(zone)
        return f"{text}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def to_gotime(value: datetime | GoTime) -> GoTime:
    return value if isinstance(value, GoTime) else GoTime.from_datetime(value)


def format_rfc3339nano(value: datetime | GoTime) -> str:
    return to_gotime(value).format_rfc3339(nano=True)


def require_aware(value: datetime, what: str = "time") -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{what} {value!r} is naive; pass a timezone-aware datetime")
    return value


def format_sqlite_time(value: datetime) -> str:
    """River's SQLite timestamp text: UTC, rounded to ms, always three fractional digits.

    River up to v0.43 trimmed trailing zeros ("12:00:00.1", "12:00:00"); 0.44.0
    and 0.44.1 write ".000"-style text on every path. Both read back alike, and
    distinct instants sort the same either way, so rows of either kind mix.
    """
    utc = require_aware(value).astimezone(UTC)
    millis_total = (utc.microsecond + 500) // 1000
    utc = utc.replace(microsecond=0) + timedelta(milliseconds=millis_total)
    # Not strftime: glibc writes year 999 as "999", which neither sorts nor reads back.
    return (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d} {utc.hour:02d}:{utc.minute:02d}:"
            f"{utc.second:02d}.{utc.microsecond // 1000:03d}")


_TIME_RE = re.compile(
    r"""^\s*(?P<y>-?\d{4,})-(?P<mo>\d{2})-(?P<d>\d{2})
    (?:[T ](?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?)?
    \s*(?P<z>Z|z|[+-]\d{2}(?::?\d{2})?)?
    (?:\s+[A-Za-z][A-Za-z0-9_/+-]*|\s+[+-]\d{2,4})?
    (?:\s+m=[+-][0-9.]+)?\s*$""",
    re.VERBOSE,
)


def parse_time(text: str) -> datetime:
    """Read any time text River writers produce (RFC 3339, SQLite forms, Go's ``time.String()``).

    Fractions beyond microseconds are truncated; a missing zone means UTC.
    The result is an aware UTC datetime.
    """
    return _parse_time_cached(text)


# Rows repeat their times (a claim's attempted_at, a batch's created_at and scheduled_at), so
# recent texts are remembered; datetimes are immutable and the parse depends on nothing else.
@functools.lru_cache(maxsize=4096)
def _parse_time_cached(text: str) -> datetime:
    if (len(text) == 23 and text[10] == " " and text[19] == "." and text[4] == text[7] == "-"
            and text[13] == text[16] == ":"):
        # What River's SQLite writers store ("YYYY-MM-DD HH:MM:SS.fff", UTC): read by the C
        # parser. Any other shape, or digits that don't make a date, take the general path.
        digits = text[:4] + text[5:7] + text[8:10] + text[11:13] + text[14:16] + text[17:19] + text[20:]
        if digits.isascii() and digits.isdigit():
            with contextlib.suppress(ValueError):
                # The offset in the text, not replace(): replace parses its keywords, several
                # times the cost of the parse; a zero offset reads as the UTC singleton.
                return datetime.fromisoformat(text + "+00:00")
    m = _TIME_RE.match(text)
    if m is None:
        raise ValidationError(f"unparseable time {text!r}")
    frac = (m["f"] or "").ljust(6, "0")[:6]
    try:
        value = datetime(
            int(m["y"]), int(m["mo"]), int(m["d"]),
            int(m["h"] or 0), int(m["mi"] or 0), int(m["s"] or 0), int(frac),
        )
    except ValueError as exc:
        raise ValidationError(f"unparseable time {text!r}: {exc}") from None
    zone = m["z"]
    offset = timedelta(0)
    if zone and zone not in ("Z", "z"):
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
        offset = timedelta(hours=hours, minutes=minutes) * (-1 if zone[0] == "-" else 1)
    return value.replace(tzinfo=timezone(offset)).astimezone(UTC)
