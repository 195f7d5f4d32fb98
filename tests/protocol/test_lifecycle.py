"""River's job lifecycle as a state machine, plus retry and unique-key properties.

Everything here is built on the public ``river_protocol.testing`` helpers, so
it doubles as their usage example.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import encode, encode_args
from river_protocol.job import JobRow
from river_protocol.outcomes import Failed, outcome_to_update
from river_protocol.retry import MAX_DURATION_SECONDS, DefaultRetryPolicy, base_retry_seconds
from river_protocol.states import Actor, JobState
from river_protocol.testing import strategies as rst
from river_protocol.testing.lifecycle import (
    InvariantViolation,
    JobLedger,
    JobLifecycleMachine,
    run_lifecycle,
)
from river_protocol.unique import UniqueOpts, truncate_to_period, unique_fields_of, unique_key
from tests.conftest import costly_examples

LIFECYCLE = settings(max_examples=100, stateful_step_count=40, deadline=None)
QUICK = settings(max_examples=30, stateful_step_count=25, deadline=None, database=None)
# Broken-rule runs must fail; shrinking the failure would only cost time.
# Derandomized so a detection test cannot pass or fail by luck.
FIND = settings(QUICK, max_examples=200, phases=(Phase.explicit, Phase.generate), derandomize=True)


# ---------------------------------------------------------------- the lifecycle machine

TestRiverLifecycle = JobLifecycleMachine.TestCase
TestRiverLifecycle.settings = LIFECYCLE


class HourlyRetry:
    """A user policy: always retry an hour later (slow enough that jobs sit in ``retryable``)."""

    def next_retry(self, job: JobRow, now: datetime, rand: float) -> datetime:
        return now + timedelta(hours=1)


def test_lifecycle_with_a_user_retry_policy_and_unique_rules() -> None:
    run_lifecycle(
        retry_policy=HourlyRetry(),
        unique_opts=UniqueOpts(
            by_args=True,
            by_period=timedelta(minutes=10),
            by_state=(JobState.AVAILABLE, JobState.PENDING, JobState.RUNNING, JobState.SCHEDULED),
        ),
        max_attempts_range=(2, 5),
        settings=LIFECYCLE,
    )


def test_lifecycle_without_unique_inserts() -> None:
    run_lifecycle(unique_opts=None, settings=QUICK)


def test_run_lifecycle_rejects_bad_configuration() -> None:
    with pytest.raises(ValidationError, match="max_attempts_range"):
        run_lifecycle(max_attempts_range=(3, 1))
    with pytest.raises(ValidationError, match="unique_opts"):
        run_lifecycle(unique_opts="by_args")


def test_invalid_unique_configuration_is_refused_on_insert() -> None:
    # A ByState without "available" would let a duplicate in while the original waits to run.
    opts = UniqueOpts(by_args=True, by_state=(JobState.RUNNING,))
    with pytest.raises(ValidationError, match="required states"):
        run_lifecycle(unique_opts=opts, settings=FIND)


def _violation_from(machine: type[JobLifecycleMachine]) -> str:
    with pytest.raises(InvariantViolation) as caught:
        run_lifecycle(machine=machine, settings=FIND)
    return str(caught.value)


def test_a_claim_of_a_scheduled_job_is_caught() -> None:
    class ClaimsEarly(JobLifecycleMachine):
        @rule()
        def claim_scheduled(self) -> None:
            for job_id in self._ids(JobState.SCHEDULED):
                row = self.jobs[job_id]
                self.ledger[job_id].claims += 1
                self._move(job_id, Actor.PRODUCER,
                           dataclasses.replace(row, state=JobState.RUNNING, attempt=row.attempt + 1,
                                               attempted_at=self.now, attempted_by=("x",)))

    assert "illegal transition scheduled -> running by producer" in _violation_from(ClaimsEarly)


def test_a_retry_that_keeps_finalized_at_is_caught() -> None:
    class SloppyRetry(JobLifecycleMachine):
        @rule()
        def revive(self) -> None:
            for job_id in self._ids(JobState.CANCELLED):
                self.ledger[job_id].finalized = False
                self._move(job_id, Actor.RETRY_API,
                           dataclasses.replace(self.jobs[job_id], state=JobState.AVAILABLE))

    assert "finalized_at=" in _violation_from(SloppyRetry)


def test_a_claim_that_does_not_count_the_attempt_is_caught() -> None:
    class UncountedClaim(JobLifecycleMachine):
        @precondition(lambda self: bool(self._claimable()))
        @rule()
        def claim(self) -> None:
            row = self._claimable()[0]
            self.ledger[row.id].claims += 1
            self._move(row.id, Actor.PRODUCER, dataclasses.replace(
                row, state=JobState.RUNNING, attempted_at=self.now, attempted_by=("x",)))

    assert "claims - " in _violation_from(UncountedClaim)


def test_ledger_counts_attempts_as_claims_minus_refunds() -> None:
    ledger = JobLedger(claims=5, refunds=2)
    assert ledger.attempt == 3


# ---------------------------------------------------------------- retry bounds


@costly_examples
@given(rst.job_rows(state=JobState.RUNNING), rst.aware_datetimes(), st.floats(0, 1, exclude_max=True))
def test_default_retry_delay_stays_within_ten_percent_of_n_to_the_fourth(
    row: JobRow, now: datetime, rand: float
) -> None:
    policy = DefaultRetryPolicy()
    delay = (policy.next_retry_at(row, now, rand).unix_ns - _ns(now)) / 1e9
    base = base_retry_seconds(len(row.errors))
    assert base == float((len(row.errors) + 1) ** 4)
    assert base * 0.9 - 1e-6 <= delay <= min(base * 1.1, MAX_DURATION_SECONDS) + 1e-6


def _ns(moment: datetime) -> int:
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


@costly_examples
@given(rst.job_rows(state=JobState.RUNNING), rst.aware_datetimes(), st.floats(0, 1, exclude_max=True),
       rst.outcomes(kinds=(Failed,)))
def test_a_failure_retries_in_the_future_or_discards_when_attempts_are_spent(
    row: JobRow, now: datetime, rand: float, failure: Any
) -> None:
    update = outcome_to_update(row, failure, now=now, started_at=now, rand=rand)
    if row.attempt >= row.max_attempts:
        assert update.state is JobState.DISCARDED
        assert update.finalized_at is not None
        return
    assert update.state in (JobState.AVAILABLE, JobState.RETRYABLE)
    assert update.scheduled_at is not None and update.scheduled_at >= now
    soon = update.scheduled_at - now <= timedelta(seconds=5)
    assert (update.state is JobState.AVAILABLE) == soon
    error = json.loads(update.error or b"null")
    assert error["attempt"] == row.attempt and error["error"] == failure.error


# ---------------------------------------------------------------- unique-key invariance


def _reordered(args: dict[str, Any]) -> bytes:
    # Go map keys are sorted, so insertion order must not matter; encode the reversed dict.
    return encode(dict(reversed(list(args.items()))))


@given(rst.args_values(dataclass_args=False), rst.unique_opts(non_empty=True), rst.aware_datetimes(),
       rst.job_kinds(), rst.queue_names())
def test_unique_key_ignores_what_the_options_leave_out(
    args: dict[str, Any], opts: UniqueOpts, now: datetime, kind: str, queue: str
) -> None:
    encoded = encode_args(args)
    key: Callable[..., bytes] = lambda **kw: unique_key(  # noqa: E731
        kw.get("kind", kind), kw.get("args", encoded), [], opts, kw.get("now", now), kw.get("queue", queue)
    )
    base = key()
    assert len(base) == 32
    assert key(args=_reordered(args)) == base
    if not opts.by_args:
        assert key(args=b'{"other":1}') == base
    if not opts.by_queue:
        assert key(queue="elsewhere") == base
    if opts.exclude_kind:
        assert key(kind="another_kind") == base
    else:
        assert key(kind="another_kind") != base
    if opts.by_period is None:
        assert key(now=now + timedelta(days=3)) == base
    else:
        start = truncate_to_period(now, opts.by_period_ns).to_datetime()
        assert key(now=start) == base
        # Instant arithmetic: aware datetimes in a zoneinfo zone add on the wall clock, which
        # crosses a DST change differently from the absolute bucket end.
        last = (start.astimezone(UTC) + opts.by_period - timedelta(microseconds=1)).astimezone(start.tzinfo)
        assert key(now=last) == base


@given(st.data())
def test_unique_key_of_args_structs_depends_only_on_unique_fields(data: st.DataObject) -> None:
    args = data.draw(rst.args_values(dicts=False))
    opts = UniqueOpts(by_args=True)
    fields = unique_fields_of(type(args))
    now = datetime(2025, 1, 1, tzinfo=UTC)
    base = unique_key(args.kind, encode_args(args), fields, opts, now, "default")
    if isinstance(args, rst.SampleArgs):
        changed = dataclasses.replace(args, email=args.email + "x", note="n", labels=("l",))
        moved = dataclasses.replace(args, customer_id=args.customer_id ^ 1)
    else:
        changed = dataclasses.replace(args, amount=args.amount + 1,
                                      address=dataclasses.replace(args.address, street="x"))
        new_zip = args.address.zip + "9"
        moved = dataclasses.replace(args, address=dataclasses.replace(args.address, zip=new_zip))
    assert unique_key(args.kind, encode_args(changed), fields, opts, now, "default") == base
    assert unique_key(args.kind, encode_args(moved), fields, opts, now, "default") != base
