from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.errors import EncodingError, ValidationError
from river_protocol.golang.gotime import GoTime
from river_protocol.intents import SetStateUpdate
from river_protocol.job import AttemptError, JobRow
from river_protocol.machines.completer import CompletionReason
from river_protocol.outcomes import (
    OUTPUT_MAX_BYTES,
    Cancel,
    Completed,
    Discard,
    Failed,
    Interrupted,
    Outcome,
    Snooze,
    apply_cancel,
    apply_set_state,
    cancel_attempted_at_json,
    gjson_int,
    merge_metadata,
    next_retry_time,
    outcome_reason,
    outcome_to_update,
    record_output,
    unknown_kind_failure,
)
from river_protocol.retry import DefaultRetryPolicy
from river_protocol.states import JobState
from river_protocol.work import CancelCause, finish_job, plain_success

NOW_NS = 1715694327123456789  # 2024-05-14T13:45:27.123456789Z
NOW = GoTime(NOW_NS)
NOW_DT = NOW.to_datetime()
STARTED = GoTime(NOW_NS - 2_000_000_000)


def running(attempt: int = 1, max_attempts: int = 25, errors: int = 0, **metadata: Any) -> JobRow:
    error = AttemptError(at=NOW_DT, attempt=1, error="old")
    return JobRow(
        id=7, kind="k", encoded_args=b"{}", state=JobState.RUNNING, attempt=attempt,
        max_attempts=max_attempts, errors=(error,) * errors, metadata=dict(metadata),
        scheduled_at=NOW_DT - timedelta(minutes=1),
    )


def update(job: JobRow, outcome: Outcome, **kwargs: Any) -> SetStateUpdate:
    kwargs.setdefault("rand", 0.5)
    return outcome_to_update(job, outcome, now=NOW, started_at=STARTED, **kwargs)


def error_json(update: SetStateUpdate) -> dict[str, Any]:
    assert update.error is not None
    parsed = json.loads(update.error)
    assert isinstance(parsed, dict)
    return parsed


# ---------------------------------------------------------------- the §7.2 table


def test_success_completes() -> None:
    got = update(running(), Completed())
    assert got == SetStateUpdate(id=7, state=JobState.COMPLETED, finalized_at=NOW_DT)


def test_success_merges_collected_metadata() -> None:
    got = update(running(), Completed(), metadata_updates=record_output({"z": 1, "html": "<&>"}))
    assert got.metadata_do_merge
    assert got.metadata_updates == b'{"output":{"html":"\\u003c\\u0026\\u003e","z":1}}'


def test_short_snooze_is_available_at_now_plus_delay() -> None:
    got = update(running(attempt=3), Snooze(timedelta(seconds=5)))
    assert got.state is JobState.AVAILABLE
    assert got.attempt == 2
    assert got.scheduled_at == GoTime(NOW_NS + 5_000_000_000).to_datetime()
    assert got.metadata_do_merge and got.metadata_updates == b'{"snoozes":1}'
    assert got.error is None and got.finalized_at is None


def test_long_snooze_is_scheduled_and_counts_snoozes() -> None:
    got = update(running(snoozes=4), Snooze.from_ns(5_000_000_001))
    assert got.state is JobState.SCHEDULED
    assert got.metadata_updates == b'{"snoozes":5}'


def test_negative_snooze_is_available_now() -> None:
    got = update(running(), Snooze(timedelta(seconds=-10)))
    assert got.state is JobState.AVAILABLE
    assert got.scheduled_at == GoTime(NOW_NS - 10_000_000_000).to_datetime()


def test_snooze_keeps_other_collected_updates() -> None:
    got = update(running(), Snooze(timedelta(hours=1)), metadata_updates={"output": {"progress": 50}})
    assert got.metadata_updates == b'{"output":{"progress":50},"snoozes":1}'


def test_cancel_is_cancelled_with_error_element() -> None:
    got = update(running(attempt=2), Cancel("no longer needed"))
    assert got.state is JobState.CANCELLED and got.finalized_at == NOW_DT
    assert got.error == (b'{"at":"2024-05-14T13:45:25.123456789Z","attempt":2,'
                         b'"error":"JobCancelError: no longer needed","trace":""}')


def test_cancel_texts() -> None:
    assert Cancel().message == "JobCancelError: <nil>"
    assert Cancel("inner", text="outer: JobCancelError: inner").message == "outer: JobCancelError: inner"


def test_cancel_wins_over_exhausted_attempts() -> None:
    got = update(running(attempt=25, max_attempts=25), Cancel("stop"))
    assert got.state is JobState.CANCELLED


def test_error_handler_cancel_keeps_error_text() -> None:
    got = update(running(), Failed("handled", trace="stack"), error_handler_cancel=True)
    assert got.state is JobState.CANCELLED
    assert error_json(got)["error"] == "handled" and error_json(got)["trace"] == "stack"


def test_error_handler_is_ignored_for_interrupts_and_successes() -> None:
    assert update(running(), Interrupted(), error_handler_cancel=True).state is JobState.AVAILABLE
    assert update(running(), Completed(), error_handler_cancel=True).state is JobState.COMPLETED


def test_remote_cancel_turns_any_error_into_remote_cancel() -> None:
    for outcome in (Failed("context canceled"), Snooze(timedelta(hours=1)), Interrupted(), Discard("x")):
        got = update(running(), outcome, remote_cancelled=True)
        assert got.state is JobState.CANCELLED
        assert error_json(got)["error"] == "JobCancelError: job cancelled remotely"
    assert update(running(), Completed(), remote_cancelled=True).state is JobState.COMPLETED


def test_error_on_last_attempt_discards() -> None:
    got = update(running(attempt=3, max_attempts=3), Failed("final"))
    assert got.state is JobState.DISCARDED and got.finalized_at == NOW_DT
    assert error_json(got) == {"at": "2024-05-14T13:45:25.123456789Z", "attempt": 3,
                               "error": "final", "trace": ""}


def test_discard_discards_with_attempts_left() -> None:
    got = update(running(attempt=1), Discard("bad input"))
    assert got.state is JobState.DISCARDED and got.finalized_at == NOW_DT
    assert error_json(got)["error"] == "bad input"


def test_short_retry_is_available() -> None:
    got = update(running(), Failed("boom"))
    assert got.state is JobState.AVAILABLE
    assert got.scheduled_at == GoTime(NOW_NS + 1_000_000_000).to_datetime()
    assert got.attempt is None and got.finalized_at is None


def test_long_retry_is_retryable_from_error_count() -> None:
    got = update(running(attempt=9, errors=1), Failed("boom"))
    assert got.state is JobState.RETRYABLE
    assert got.scheduled_at == GoTime(NOW_NS + 16_000_000_000).to_datetime()


def test_error_element_escapes_like_go() -> None:
    got = update(running(), Failed("a <b> & \u2028"))
    assert b'"error":"a \\u003cb\\u003e \\u0026 \\u2028"' in (got.error or b"")


def test_interrupted_is_available_now_with_previous_attempt() -> None:
    got = update(running(attempt=4), Interrupted(), metadata_updates={"k": 1})
    assert got == SetStateUpdate(id=7, state=JobState.AVAILABLE, attempt=3, scheduled_at=NOW_DT,
                                 metadata_do_merge=True, metadata_updates=b'{"k":1}')


def test_outcome_reasons() -> None:
    assert outcome_reason(Completed()) == "completed"
    assert outcome_reason(Snooze(timedelta(0))) == "snoozed"
    assert outcome_reason(Cancel("x")) == "cancelled"
    assert outcome_reason(Failed("x")) == "failed"
    assert outcome_reason(Failed("x"), error_handler_cancel=True) == "cancelled"
    assert outcome_reason(Discard("x")) == "failed"
    assert outcome_reason(Interrupted()) == "interrupted"
    assert outcome_reason(Snooze(timedelta(0)), remote_cancelled=True) == "cancelled"


def test_unknown_kind_failure_text() -> None:
    assert unknown_kind_failure("email").error == (
        "job kind is not registered in the client's Workers bundle: email"
    )


def test_snooze_validates_fields() -> None:
    assert Snooze.from_ns(-1).duration_ns == -1
    assert Snooze(timedelta(seconds=1), nanos=5).duration_ns == 1_000_000_005
    with pytest.raises(ValidationError):
        Snooze(timedelta(0), nanos=1000)
    with pytest.raises(ValidationError):
        Snooze(5)  # type: ignore[arg-type]


# ---------------------------------------------------------------- retry time


class FixedPolicy:
    def __init__(self, delay: timedelta) -> None:
        self.delay = delay

    def next_retry(self, job: JobRow, now: datetime, rand: float) -> datetime:
        return now + self.delay


def test_worker_next_retry_wins_unless_zero() -> None:
    later = GoTime(NOW_NS + 3600 * 10**9)
    assert next_retry_time(running(), now=NOW, rand=0.5, worker_next_retry=later) == later
    zero = datetime(1, 1, 1, tzinfo=UTC)
    got = next_retry_time(running(), now=NOW, rand=0.5, worker_next_retry=zero)
    assert got.unix_ns == NOW_NS + 10**9


def test_past_retry_time_falls_back_to_default_policy() -> None:
    past = GoTime(NOW_NS - 3600 * 10**9)
    assert next_retry_time(running(), now=NOW, rand=0.5, worker_next_retry=past).unix_ns == NOW_NS + 10**9
    got = next_retry_time(running(), now=NOW, rand=0.5, retry_policy=FixedPolicy(timedelta(hours=-1)))
    assert got.unix_ns == NOW_NS + 10**9


def test_custom_policy_and_threshold() -> None:
    soon = update(running(), Failed("x"), retry_policy=FixedPolicy(timedelta(seconds=3)))
    assert soon.state is JobState.AVAILABLE
    later = update(running(), Failed("x"), retry_policy=FixedPolicy(timedelta(hours=1)))
    assert later.state is JobState.RETRYABLE and later.scheduled_at == NOW_DT + timedelta(hours=1)


def test_retry_needs_rand() -> None:
    with pytest.raises(ValidationError, match="rand"):
        outcome_to_update(running(), Failed("x"), now=NOW, started_at=NOW)
    # No draw needed when the outcome is not a retry.
    assert outcome_to_update(running(), Completed(), now=NOW, started_at=NOW).state is JobState.COMPLETED


def test_go_overflow_policy_makes_job_available_in_the_past() -> None:
    job = running(attempt=310, max_attempts=1000, errors=309)
    go = update(job, Failed("overflow"), retry_policy=DefaultRetryPolicy(go_overflow=True))
    assert go.state is JobState.AVAILABLE
    assert go.scheduled_at is not None and go.scheduled_at.year == 1732
    python = update(job, Failed("overflow"))
    assert python.state is JobState.RETRYABLE
    assert python.scheduled_at is not None and python.scheduled_at.year == 2316


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("value", "expected"),
    [("7", 7), (2.9, 2), (True, 1), (False, 0), ("3.7", 0), (None, 0), ({"n": 3}, 0), ([1], 0),
     (-1, -1), ("-12", -12), ("", 0), ("-", 0), (9007199254740993, 9007199254740993),
     (2**64 + 5, 5), (1e300, -(2**63)), ("99999999999999999999", 7766279631452241919)],
)
def test_gjson_int(value: Any, expected: int) -> None:
    assert gjson_int(value) == expected


def test_record_output_checks_size() -> None:
    assert record_output([1, "a"]) == {"output": [1, "a"]}
    with pytest.raises(ValidationError, match="too large"):
        record_output("x" * OUTPUT_MAX_BYTES)


def test_cancel_attempted_at_json() -> None:
    assert cancel_attempted_at_json(NOW) == b'"2024-05-14T13:45:27.123456789Z"'
    plus2 = datetime(2024, 5, 14, 15, 0, tzinfo=timezone(timedelta(hours=2)))
    assert cancel_attempted_at_json(plus2) == b'"2024-05-14T15:00:00+02:00"'
    with pytest.raises(EncodingError):
        cancel_attempted_at_json(GoTime(300_000_000_000 * 10**9))


def test_merge_metadata_postgres_and_sqlite() -> None:
    row = {"a": {"x": 1, "y": 2}, "b": 1}
    patch = {"a": {"x": None}, "b": None, "c": 3}
    assert merge_metadata(row, patch) == {"a": {"x": None}, "b": None, "c": 3}
    assert merge_metadata(row, patch, merge_patch=True) == {"a": {"y": 2}, "c": 3}


# ---------------------------------------------------------------- the set-state statement model


def test_apply_set_state_running_row() -> None:
    job = running(attempt=2, keep=1)
    req = update(job, Snooze(timedelta(hours=1)))
    after = apply_set_state(job, req, NOW_DT)
    assert after.state is JobState.SCHEDULED and after.attempt == 1
    assert after.scheduled_at == req.scheduled_at
    assert after.metadata == {"keep": 1, "snoozes": 1}


def test_apply_set_state_appends_error() -> None:
    job = running(errors=1)
    after = apply_set_state(job, update(job, Failed("boom")), NOW_DT)
    assert len(after.errors) == 2 and after.errors[-1].error == "boom"
    assert after.errors[-1].at == STARTED.to_datetime()


def test_pending_cancel_overrides_retry_and_snooze_only() -> None:
    job = running(cancel_attempted_at="2024-05-14T13:45:00Z")
    retry = apply_set_state(job, update(job, Failed("boom"), retry_policy=FixedPolicy(timedelta(hours=1))),
                            NOW_DT + timedelta(seconds=1))
    assert retry.state is JobState.CANCELLED
    assert retry.finalized_at == NOW_DT + timedelta(seconds=1)
    assert retry.scheduled_at == job.scheduled_at and len(retry.errors) == 1
    snooze = apply_set_state(job, update(job, Snooze(timedelta(hours=1))), NOW_DT)
    assert snooze.state is JobState.CANCELLED and snooze.attempt == job.attempt
    short = apply_set_state(job, update(job, Snooze(timedelta(seconds=1))), NOW_DT)
    assert short.state is JobState.AVAILABLE
    done = apply_set_state(job, update(job, Completed()), NOW_DT)
    assert done.state is JobState.COMPLETED


def test_not_running_row_only_merges_metadata() -> None:
    job = JobRow(id=7, kind="k", encoded_args=b"{}", state=JobState.AVAILABLE, attempt=1)
    snoozed = apply_set_state(job, update(running(), Snooze(timedelta(hours=1))), NOW_DT)
    assert snoozed.state is JobState.AVAILABLE and snoozed.attempt == 1
    assert snoozed.metadata == {"snoozes": 1}
    failed = apply_set_state(job, update(running(), Failed("late")), NOW_DT)
    assert failed == job


def test_apply_set_state_rejects_other_ids() -> None:
    other = SetStateUpdate(id=8, state=JobState.COMPLETED)
    with pytest.raises(ValidationError):
        apply_set_state(running(), other, NOW_DT)


def test_apply_cancel() -> None:
    base = JobRow(id=1, kind="k", encoded_args=b"{}", state=JobState.AVAILABLE, metadata={"k": "v"})
    cancelled = apply_cancel(base, cancel_attempted_at=NOW, now=NOW_DT)
    assert cancelled.state is JobState.CANCELLED and cancelled.finalized_at == NOW_DT
    assert cancelled.metadata == {"k": "v", "cancel_attempted_at": "2024-05-14T13:45:27.123456789Z"}
    run = apply_cancel(running(), cancel_attempted_at=NOW, now=NOW_DT)
    assert run.state is JobState.RUNNING and run.finalized_at is None
    assert "cancel_attempted_at" in run.metadata
    done = JobRow(id=1, kind="k", encoded_args=b"{}", state=JobState.COMPLETED, finalized_at=NOW_DT)
    assert apply_cancel(done, cancel_attempted_at=NOW, now=NOW_DT) == done


# ---------------------------------------------------------------- properties

attempts = st.integers(min_value=0, max_value=1000)
rands = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
delays = st.integers(min_value=-(10**15), max_value=10**15)


@given(attempts, st.integers(min_value=1, max_value=1000), delays)
def test_snooze_never_consumes_an_attempt(attempt: int, max_attempts: int, delay_ns: int) -> None:
    job = running(attempt=attempt, max_attempts=max_attempts)
    req = update(job, Snooze.from_ns(delay_ns))
    assert req.attempt == attempt - 1
    assert req.state in (JobState.AVAILABLE, JobState.SCHEDULED)
    assert req.error is None
    assert apply_set_state(job, req, NOW_DT).attempt == attempt - 1


@given(st.integers(min_value=1, max_value=500), st.integers(min_value=0, max_value=50),
       st.integers(min_value=0, max_value=400), rands)
def test_exhausted_attempts_always_discard(max_attempts: int, extra: int, errors: int, rand: float) -> None:
    job = running(attempt=max_attempts + extra, max_attempts=max_attempts, errors=errors)
    req = update(job, Failed("boom"), rand=rand)
    assert req.state is JobState.DISCARDED and req.finalized_at == NOW_DT


@given(st.integers(min_value=1, max_value=500), st.integers(min_value=1, max_value=50),
       st.integers(min_value=0, max_value=400), rands)
def test_attempts_left_retry(attempt: int, extra: int, errors: int, rand: float) -> None:
    job = running(attempt=attempt, max_attempts=attempt + extra, errors=errors)
    req = update(job, Failed("boom"), rand=rand)
    assert req.state in (JobState.AVAILABLE, JobState.RETRYABLE)
    assert req.scheduled_at is not None and req.scheduled_at >= NOW_DT


@given(attempts)
def test_interrupted_never_goes_below_zero(attempt: int) -> None:
    req = update(running(attempt=attempt), Interrupted())
    assert req.attempt == max(attempt - 1, 0) and req.attempt >= 0


# ---------------------------------------------------------------- the outcome table and states.py


def test_outcome_table_covers_every_outcome_within_the_completers_transitions() -> None:
    from typing import get_args

    from river_protocol.outcomes import OUTCOME_TRANSITIONS
    from river_protocol.states import TRANSITIONS, Actor

    assert set(get_args(Outcome)) <= set(OUTCOME_TRANSITIONS)
    allowed = TRANSITIONS[(JobState.RUNNING, Actor.COMPLETER)]
    reached: set[JobState] = set()
    for targets, _ in OUTCOME_TRANSITIONS.values():
        assert targets <= allowed
        reached |= targets
    assert reached == allowed  # every completer transition has an outcome leading to it


@pytest.mark.parametrize(("outcome", "job", "state"), [
    (Completed(), running(), JobState.COMPLETED),
    (Snooze(timedelta(seconds=1)), running(), JobState.AVAILABLE),
    (Snooze(timedelta(hours=1)), running(), JobState.SCHEDULED),
    (Interrupted(), running(), JobState.AVAILABLE),
    (Cancel("x"), running(), JobState.CANCELLED),
    (Discard("x"), running(), JobState.DISCARDED),
    (Failed("x"), running(attempt=25), JobState.DISCARDED),
    (Failed("x"), running(attempt=1), JobState.AVAILABLE),
    (Failed("x"), running(attempt=9, errors=1), JobState.RETRYABLE),
])
def test_each_outcome_state_is_one_its_row_lists(outcome: Outcome, job: JobRow, state: JobState) -> None:
    from river_protocol.outcomes import OUTCOME_TRANSITIONS

    req = update(job, outcome)
    assert req.state is state and state in OUTCOME_TRANSITIONS[type(outcome)][0]


def test_outcome_choosing_a_state_its_row_does_not_list_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from river_protocol.errors import ProtocolError
    from river_protocol.outcomes import OUTCOME_TRANSITIONS

    rule = OUTCOME_TRANSITIONS[Failed][1]
    monkeypatch.setitem(OUTCOME_TRANSITIONS, Failed, (frozenset({JobState.RETRYABLE}), rule))  # type: ignore[index]
    assert update(running(attempt=9, errors=1), Failed("x")).state is JobState.RETRYABLE
    with pytest.raises(ProtocolError, match="Failed outcome chose discarded; it may only lead to retryable"):
        update(running(attempt=25), Failed("x"))


def test_outcome_to_a_state_the_states_table_refuses_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from river_protocol.errors import ProtocolError
    from river_protocol.states import TRANSITIONS, Actor

    key = (JobState.RUNNING, Actor.COMPLETER)
    monkeypatch.setitem(TRANSITIONS, key, TRANSITIONS[key] - {JobState.SCHEDULED})
    assert update(running(), Snooze(timedelta(seconds=1))).state is JobState.AVAILABLE
    with pytest.raises(ProtocolError, match="illegal transition running -> scheduled by completer"):
        update(running(), Snooze(timedelta(hours=1)))
    with pytest.raises(ProtocolError, match="running -> scheduled"):
        apply_set_state(running(), SetStateUpdate(id=7, state=JobState.SCHEDULED), NOW_DT)


def test_outcome_subclasses_follow_their_base_and_non_outcomes_are_refused() -> None:
    class MyFailure(Failed):
        pass

    assert update(running(attempt=25), MyFailure("x")).state is JobState.DISCARDED
    with pytest.raises(ValidationError, match="not a work outcome"):
        update(running(), "done")  # type: ignore[arg-type]


def test_apply_set_state_refuses_a_state_the_completer_may_not_set() -> None:
    from river_protocol.errors import ProtocolError

    with pytest.raises(ProtocolError, match="running -> pending by completer"):
        apply_set_state(running(), SetStateUpdate(id=7, state=JobState.PENDING), NOW_DT)


@settings(max_examples=100)
@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 1, 1), timezones=st.just(UTC)),
       st.integers(min_value=1, max_value=2**40), st.integers(min_value=1, max_value=30))
def test_plain_completion_shortcut_equals_the_general_rule(now: datetime, job_id: int, attempt: int) -> None:
    job = JobRow(id=job_id, kind="k", encoded_args=b"{}", state=JobState.RUNNING, attempt=attempt)
    shortcut = outcome_to_update(job, Completed(), now=now, started_at=now)
    general = outcome_to_update(job, Completed(), now=GoTime.from_datetime(now), started_at=now)
    assert shortcut == general
    assert shortcut.finalized_at == now and shortcut.finalized_at.tzinfo is UTC


@settings(max_examples=100)
@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9998, 1, 1), timezones=st.just(UTC)),
       st.integers(min_value=1, max_value=2**40), st.sampled_from([None, *CancelCause]), st.booleans())
def test_finish_job_plain_completion_shortcut_equals_the_general_path(
    now: datetime, job_id: int, cause: CancelCause | None, handler_cancel: bool
) -> None:
    """A success survives a remote cancel and an error-handler cancel, so its shortcut in
    ``finish_job`` gives what the general path (taken for a GoTime ``now``) gives."""
    job = JobRow(id=job_id, kind="k", encoded_args=b"{}", state=JobState.RUNNING, attempt=1)
    shortcut = finish_job(job, Completed(), now=now, started_at=now, cancel_cause=cause,
                          error_handler_cancel=handler_cancel)
    general = finish_job(job, Completed(), now=GoTime.from_datetime(now), started_at=now,
                         cancel_cause=cause, error_handler_cancel=handler_cancel)
    assert shortcut == general
    assert shortcut.reason is CompletionReason.COMPLETED and shortcut.update.finalized_at == now


def test_plain_success_is_only_a_success_with_nothing_to_record() -> None:
    job = JobRow(id=3, kind="k", encoded_args=b"{}", state=JobState.RUNNING, attempt=1)
    quick = plain_success(job, Completed(), NOW_DT, {})
    assert quick is not None and quick.update == SetStateUpdate(3, JobState.COMPLETED, finalized_at=NOW_DT)
    assert quick.reason is CompletionReason.COMPLETED
    assert plain_success(job, Completed(), NOW_DT, {"output": 1}) is None  # a metadata merge to make
    assert plain_success(job, Completed(), GoTime.from_datetime(NOW_DT), None) is None  # not a UTC datetime
    assert plain_success(job, Failed("x"), NOW_DT, None) is None
    assert plain_success(job, Snooze(timedelta(seconds=1)), NOW_DT, None) is None
