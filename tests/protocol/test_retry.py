from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_protocol.errors import ValidationError
from river_protocol.golang.gotime import GoTime
from river_protocol.job import AttemptError, JobRow
from river_protocol.retry import (
    MAX_DURATION_NS,
    MAX_DURATION_SECONDS,
    MAX_RETRY_AT,
    MIN_DURATION_NS,
    MIN_RETRY_AT,
    DefaultRetryPolicy,
    RetryPolicy,
    add_ns,
    base_retry_seconds,
    capped_duration_ns,
    clamp_to_datetime,
    go_duration_ns,
    go_duration_seconds,
    go_pow4,
    retry_seconds,
    seeded_delay_ns,
    seeded_jitter,
)
from river_protocol.states import JobState

NOW = datetime(2024, 5, 14, 13, 45, 27, 123456, tzinfo=UTC)
rands = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


def job_with_errors(count: int) -> JobRow:
    error = AttemptError(at=NOW, attempt=1, error="boom")
    return JobRow(id=1, kind="k", encoded_args=b"{}", state=JobState.RUNNING, attempt=count + 1,
                  errors=(error,) * count)


def test_max_duration_seconds_is_gos_float() -> None:
    assert MAX_DURATION_SECONDS.hex() == float.fromhex("0x1.12e0be826d695p+33").hex()
    assert MAX_DURATION_SECONDS == 9223372036.854776


def test_pow4_squares_twice() -> None:
    assert go_pow4(3) == 81.0
    assert go_pow4(2147483648) == 2.1267647932558654e37


def test_base_retry_seconds_uses_error_count_plus_one() -> None:
    assert base_retry_seconds(0) == 1.0
    assert base_retry_seconds(1) == 16.0
    assert base_retry_seconds(24) == 390625.0
    assert base_retry_seconds(309) == MAX_DURATION_SECONDS
    assert base_retry_seconds(2**40) == MAX_DURATION_SECONDS
    with pytest.raises(ValidationError, match="error_count"):
        base_retry_seconds(-1)


def test_retry_seconds_jitter_ends() -> None:
    assert retry_seconds(0, 0.0) == 0.9
    assert retry_seconds(0, 0.5) == 1.0
    assert retry_seconds(0, 1 - 2**-53) == 1.1
    assert retry_seconds(1, 0.25) == 15.2


def test_retry_seconds_rejects_rand_outside_unit_interval() -> None:
    for bad in (-0.1, 1.0, math.nan):
        with pytest.raises(ValidationError, match="rand"):
            retry_seconds(0, bad)


def test_retry_seconds_at_cap_has_no_jitter() -> None:
    assert retry_seconds(500, 0.0) == MAX_DURATION_SECONDS
    # 303**4 s can be pushed over the cap by jitter; the result is then capped.
    assert retry_seconds(302, 1 - 2**-53) == MAX_DURATION_SECONDS


@given(st.integers(min_value=0, max_value=400), rands)
def test_delay_within_ten_percent_and_capped(error_count: int, rand: float) -> None:
    base = float(error_count + 1) ** 4
    seconds = retry_seconds(error_count, rand)
    assert seconds <= MAX_DURATION_SECONDS
    if base < MAX_DURATION_SECONDS / 1.1:
        assert base * 0.9 * (1 - 1e-12) <= seconds <= base * 1.1 * (1 + 1e-12)
        assert seconds < base * 1.1 or rand > 0.999


def test_go_duration_ns_truncates_and_overflows_like_amd64() -> None:
    assert go_duration_ns(1.5) == 1_500_000_000
    assert go_duration_ns(-1.9e-9) == -1
    assert go_duration_ns(7586003232.9) == 7586003232899999744
    assert go_duration_ns(MAX_DURATION_SECONDS) == MIN_DURATION_NS
    assert go_duration_ns(-1e300) == MIN_DURATION_NS
    assert go_duration_ns(math.nan) == MIN_DURATION_NS


def test_capped_duration_ns_saturates() -> None:
    assert capped_duration_ns(MAX_DURATION_SECONDS) == MAX_DURATION_NS
    assert capped_duration_ns(-1e300) == MIN_DURATION_NS
    assert capped_duration_ns(2.5) == 2_500_000_000
    with pytest.raises(ValidationError):
        capped_duration_ns(math.nan)


def test_go_duration_seconds() -> None:
    assert go_duration_seconds(MIN_DURATION_NS) == -9223372036.854776
    assert go_duration_seconds(1_500_000_000) == 1.5
    assert go_duration_seconds(-1) == -1e-9


def test_add_ns_keeps_nanoseconds_and_zone() -> None:
    start = GoTime(1_000_000_123)
    assert add_ns(start, 877) == GoTime(1_000_001_000)
    assert add_ns(NOW, 1000).to_datetime() == NOW + timedelta(microseconds=1)


def test_clamp_to_datetime() -> None:
    assert clamp_to_datetime(GoTime(0)) == datetime(1970, 1, 1, tzinfo=UTC)
    assert clamp_to_datetime(GoTime(10**30)) == MAX_RETRY_AT
    assert clamp_to_datetime(GoTime(-(10**30))) == MIN_RETRY_AT


def test_default_policy_is_a_retry_policy() -> None:
    assert isinstance(DefaultRetryPolicy(), RetryPolicy)
    assert "go_overflow=False" in repr(DefaultRetryPolicy())


def test_default_policy_next_retry() -> None:
    policy = DefaultRetryPolicy()
    assert policy.next_retry(job_with_errors(0), NOW, 0.5) == NOW + timedelta(seconds=1)
    assert policy.next_retry(job_with_errors(2), NOW, 0.5) == NOW + timedelta(seconds=81)
    exact = policy.next_retry_at(job_with_errors(0), GoTime(5), 0.5)
    assert exact == GoTime(1_000_000_005, UTC)


def test_default_policy_caps_where_go_overflows() -> None:
    job = job_with_errors(309)
    capped = DefaultRetryPolicy().next_retry(job, NOW, 0.5)
    assert capped == clamp_to_datetime(add_ns(NOW, MAX_DURATION_NS))
    assert capped.year == 2316
    go = DefaultRetryPolicy(go_overflow=True).next_retry_at(job, GoTime(1715694327123456789), 0.5)
    assert go.format_rfc3339() == "1732-02-03T13:58:10.268680981Z"


def test_datetime_policy_never_overflows_datetime_range() -> None:
    late = datetime(9900, 1, 1, tzinfo=UTC)
    assert DefaultRetryPolicy().next_retry(job_with_errors(400), late, 0.1) == MAX_RETRY_AT
    early = datetime(100, 1, 1, tzinfo=UTC)
    assert DefaultRetryPolicy(go_overflow=True).next_retry(job_with_errors(400), early, 0.1) == MIN_RETRY_AT


@given(st.integers(min_value=0, max_value=1000), rands)
def test_python_policy_is_never_in_the_past(error_count: int, rand: float) -> None:
    assert DefaultRetryPolicy().next_retry(job_with_errors(error_count), NOW, rand) > NOW


# ---------------------------------------------------------------- the seedable jitter River's ports share

SEED_NOW = GoTime(1_767_323_045_678_900_000, UTC)  # 2026-01-02T03:04:05.6789Z


def _failed(job_id: int, errors: int) -> JobRow:
    at = SEED_NOW.to_datetime()
    return JobRow(id=job_id, kind="k", encoded_args=b"{}", state=JobState.RUNNING,
                  errors=(AttemptError(at=at, attempt=1, error="e"),) * errors)


def test_seeded_jitter_is_the_first_four_digest_bytes_over_u32_max() -> None:
    import hashlib

    digest = hashlib.sha256(
        (123).to_bytes(8, "big") + (42).to_bytes(8, "big") + (2).to_bytes(4, "big")
        + SEED_NOW.unix_ns.to_bytes(8, "big")
    ).digest()
    assert seeded_jitter(123, 42, 2, SEED_NOW) == int.from_bytes(digest[:4], "big") / (2**32 - 1)
    assert seeded_jitter(123, 42, 2, SEED_NOW) != seeded_jitter(124, 42, 2, SEED_NOW)


def test_seeded_delay_matches_the_ports_reference_values() -> None:
    # Values River's Rust port computes for the same inputs (its protocol_values goldens).
    assert seeded_delay_ns(0, 42, 0, SEED_NOW) == 1_007_585_966
    assert seeded_delay_ns(456, 1, 10, SEED_NOW) == 14_472_375_008_645  # rounded, not truncated
    assert seeded_delay_ns(2**64 - 1, 2**53 - 1, 2, SEED_NOW) == 83_973_474_471


@given(st.integers(0, 2**64 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(0, 200))
def test_seeded_delay_stays_within_ten_percent(seed: int, job_id: int, errors: int) -> None:
    base_ns = (errors + 1) ** 4 * 1_000_000_000
    delay = seeded_delay_ns(seed, job_id, errors, SEED_NOW)
    assert base_ns * 0.9 - 1 <= delay <= base_ns * 1.1 + 1


def test_seeded_delay_saturates_at_the_largest_duration() -> None:
    assert seeded_delay_ns(123, 42, 309, SEED_NOW) == MAX_DURATION_NS
    # 309**4 s fits, but its jitter may not: the delay never passes the cap either way.
    below = [seeded_delay_ns(seed, 42, 308, SEED_NOW) for seed in range(40)]
    assert max(below) == MAX_DURATION_NS and min(below) < MAX_DURATION_NS


def test_seeded_policy_ignores_the_draw_and_needs_now() -> None:
    policy = DefaultRetryPolicy(seed=7)
    job = _failed(5, 3)
    assert policy.delay_ns(job, 0.0, SEED_NOW) == policy.delay_ns(job, 0.99, SEED_NOW)
    assert policy.delay_ns(job, 0.0, SEED_NOW) == seeded_delay_ns(7, 5, 3, SEED_NOW)
    expected = SEED_NOW.unix_ns + seeded_delay_ns(7, 5, 3, SEED_NOW)
    assert policy.next_retry_at(job, SEED_NOW, 0.5).unix_ns == expected
    with pytest.raises(ValidationError, match="needs now"):
        policy.delay_ns(job, 0.5)
    assert "seed=7" in repr(policy)


@pytest.mark.parametrize("seed", [-1, 2**64])
def test_seed_outside_u64_is_refused(seed: int) -> None:
    with pytest.raises(ValidationError, match="unsigned 64-bit"):
        DefaultRetryPolicy(seed=seed)
    with pytest.raises(ValidationError, match="unsigned 64-bit"):
        seeded_jitter(seed, 1, 1, SEED_NOW)


def test_seeded_inputs_outside_their_ranges_are_refused() -> None:
    with pytest.raises(ValidationError, match="signed 64-bit"):
        seeded_jitter(1, 2**63, 1, SEED_NOW)
    with pytest.raises(ValidationError, match="error_count"):
        seeded_delay_ns(1, 1, -1, SEED_NOW)
