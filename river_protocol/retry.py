"""River's retry policy: when a failed job runs again (docs/protocol.md §7.4).

The delay is ``n**4`` seconds with ``n = len(job.errors) + 1`` (the error count,
not ``attempt``, so snoozes never lengthen it), jittered by ±10 % and capped at
the largest Go ``time.Duration`` (~292 years). The caller supplies the random
draw ``rand`` in ``[0, 1)``; nothing here reads a clock or a global generator.

Go converts the capped seconds to nanoseconds with a float→int64 conversion
that is out of range at the cap; on amd64 that yields ``math.MinInt64``, i.e. a
retry time ~292 years in the *past*. ``go_duration_ns`` reproduces that
conversion exactly (the conformance fixtures need it); the policy itself caps
instead unless built with ``go_overflow=True``.

``seed=`` replaces the caller's draw with River's seedable jitter, the one its
ports share so that conformance runs reproduce exact delays: a SHA-256 of the
seed, job id, error count and ``now`` picks the factor in [0.9, 1.1].
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from fractions import Fraction
from typing import Protocol, runtime_checkable

from river_protocol.errors import ValidationError
from river_protocol.golang.gotime import NS_PER_SECOND, GoTime, to_gotime
from river_protocol.job import JobRow

MAX_DURATION_NS = (1 << 63) - 1
MIN_DURATION_NS = -(1 << 63)
# Go's ``time.Duration(1<<63 - 1).Seconds()``: float64(sec) + float64(nsec)/1e9.
MAX_DURATION_SECONDS: float = (
    float(MAX_DURATION_NS // NS_PER_SECOND) + (MAX_DURATION_NS % NS_PER_SECOND) / 1e9
)

# Retry times are clamped into what a Python datetime can hold.
MIN_RETRY_AT = datetime(1, 1, 1, tzinfo=UTC)
MAX_RETRY_AT = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def _check_rand(rand: float) -> float:
    if not 0.0 <= rand < 1.0:
        raise ValidationError(f"rand must be a float in [0, 1), got {rand!r}")
    return rand


def go_pow4(value: int) -> float:
    """``math.Pow(float64(value), 4)`` as Go computes it: squaring twice, each product rounded."""
    x = float(value)
    square = x * x
    return square * square


def base_retry_seconds(error_count: int) -> float:
    """The unjittered delay for a job with ``error_count`` prior errors, capped."""
    if error_count < 0:
        raise ValidationError(f"error_count must be >= 0, got {error_count}")
    return min(go_pow4(error_count + 1), MAX_DURATION_SECONDS)


def retry_seconds(error_count: int, rand: float) -> float:
    """The jittered delay in seconds: ``base + base*(rand*0.2 - 0.1)``, capped.

    At the cap no jitter is applied (as in Go), so the result is exactly
    ``MAX_DURATION_SECONDS``.
    """
    _check_rand(rand)
    base = base_retry_seconds(error_count)
    if base == MAX_DURATION_SECONDS:
        return base
    return min(base + base * (rand * 0.2 - 0.1), MAX_DURATION_SECONDS)


_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1


def seeded_jitter(seed: int, job_id: int, attempt_arg: int, now: datetime | GoTime) -> float:
    """River's seedable jitter draw in [0, 1] for one retry (both ends reachable)."""
    if not 0 <= seed <= _U64_MAX:
        raise ValidationError(f"retry seed must be an unsigned 64-bit integer, got {seed!r}")
    if not MIN_DURATION_NS <= job_id <= MAX_DURATION_NS:
        raise ValidationError(f"job id must fit a signed 64-bit integer, got {job_id!r}")
    digest = hashlib.sha256(
        seed.to_bytes(8, "big")
        + job_id.to_bytes(8, "big", signed=True)
        + min(attempt_arg, _U32_MAX).to_bytes(4, "big")
        + to_gotime(now).unix_ns.to_bytes(8, "big", signed=True)
    ).digest()
    return int.from_bytes(digest[:4], "big") / _U32_MAX


def seeded_delay_ns(seed: int, job_id: int, error_count: int, now: datetime | GoTime) -> int:
    """The seeded policy's delay: ``n**4`` s times ``0.9 + 0.2 * draw``, saturating at the cap."""
    if error_count < 0:
        raise ValidationError(f"error_count must be >= 0, got {error_count}")
    attempt_arg = error_count + 1
    base_seconds = attempt_arg**4
    if base_seconds * NS_PER_SECOND >= MAX_DURATION_NS:
        return MAX_DURATION_NS
    factor = 0.9 + seeded_jitter(seed, job_id, attempt_arg, now) * 0.2
    # The product is rounded once as a float, then to the nearest nanosecond (ties to even);
    # jitter just below the cap can overshoot it, and no River schedules past the cap.
    return min(round(Fraction(factor * float(base_seconds)) * NS_PER_SECOND), MAX_DURATION_NS)


def go_duration_ns(seconds: float) -> int:
    """``time.Duration(seconds * 1e9)`` on linux/amd64.

    The conversion truncates toward zero; NaN and values outside int64 become
    ``math.MinInt64`` (the CVTTSD2SQ "integer indefinite" result).
    """
    product = seconds * 1e9
    if product != product or not -(2.0**63) <= product < 2.0**63:
        return MIN_DURATION_NS
    return int(product)


def capped_duration_ns(seconds: float) -> int:
    """``seconds`` as nanoseconds, saturating at the int64 range instead of wrapping."""
    product = seconds * 1e9
    if product != product:
        raise ValidationError("retry delay is NaN")
    if product >= 2.0**63:
        return MAX_DURATION_NS
    if product < -(2.0**63):
        return MIN_DURATION_NS
    return int(product)


def go_duration_seconds(duration_ns: int) -> float:
    """Go's ``Duration.Seconds()``: whole seconds plus the remainder, both truncated toward zero."""
    whole = abs(duration_ns) // NS_PER_SECOND
    frac = abs(duration_ns) % NS_PER_SECOND
    sign = -1 if duration_ns < 0 else 1
    return float(sign * whole) + float(sign * frac) / 1e9


def add_ns(value: datetime | GoTime, duration_ns: int) -> GoTime:
    """``value + duration`` with nanosecond precision, keeping the location."""
    start = to_gotime(value)
    return GoTime(start.unix_ns + duration_ns, start.tz)


def clamp_to_datetime(value: GoTime) -> datetime:
    """``value`` truncated to microseconds, clamped into the datetime range."""
    try:
        return value.to_datetime()
    except (OverflowError, ValueError):
        return MAX_RETRY_AT if value.unix_ns > 0 else MIN_RETRY_AT


@runtime_checkable
class RetryPolicy(Protocol):
    """Decides when a failed job is retried; ``rand`` is a caller-supplied draw in [0, 1)."""

    def next_retry(self, job: JobRow, now: datetime, rand: float) -> datetime: ...


class DefaultRetryPolicy:
    """River's default policy (``(len(errors)+1)**4`` s ±10 %).

    ``go_overflow=True`` reproduces Go's amd64 overflow at the cap (a retry time
    ~292 years before ``now``) for bit-for-bit parity with Go clients; the
    default saturates at the maximum duration instead.
    """

    __slots__ = ("go_overflow", "seed")

    def __init__(self, *, go_overflow: bool = False, seed: int | None = None) -> None:
        if seed is not None and not 0 <= seed <= _U64_MAX:
            raise ValidationError(f"retry seed must be an unsigned 64-bit integer, got {seed!r}")
        self.go_overflow = go_overflow
        self.seed = seed

    def __repr__(self) -> str:
        return f"DefaultRetryPolicy(go_overflow={self.go_overflow}, seed={self.seed})"

    def delay_ns(self, job: JobRow, rand: float, now: datetime | GoTime | None = None) -> int:
        """The delay in nanoseconds; a seeded policy ignores ``rand`` and needs ``now``."""
        if self.seed is not None:
            if now is None:
                raise ValidationError("a seeded retry policy needs now")
            return seeded_delay_ns(self.seed, job.id, len(job.errors), now)
        seconds = retry_seconds(len(job.errors), rand)
        return go_duration_ns(seconds) if self.go_overflow else capped_duration_ns(seconds)

    def next_retry_at(self, job: JobRow, now: datetime | GoTime, rand: float) -> GoTime:
        """The retry instant with nanosecond precision, in UTC as Go's policy returns it."""
        start = to_gotime(now)
        return GoTime(start.unix_ns + self.delay_ns(job, rand, start), UTC)

    def next_retry(self, job: JobRow, now: datetime, rand: float) -> datetime:
        return clamp_to_datetime(self.next_retry_at(job, now, rand))
