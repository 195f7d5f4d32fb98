"""Every public strategy of river_protocol.testing draws values River accepts, and the harness
drives each machine strictly (and notices when a machine breaks its contract)."""

from __future__ import annotations

import itertools
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.constants import KIND_RE, QUEUE_NAME_RE, TAG_RE
from river_protocol.cron import parse_cron
from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import encode, encode_args
from river_protocol.intents import ClaimJobs, LeaderElect, SetStateUpdate
from river_protocol.job import JobRow
from river_protocol.machines.base import IntentSucceeded, Stop, Tick
from river_protocol.machines.completer import Completer, CompletionReason, Submit
from river_protocol.machines.elector import Elector
from river_protocol.machines.elector import Start as ElectorStart
from river_protocol.machines.producer import Producer, ProducerConfig
from river_protocol.machines.producer import Start as ProducerStart
from river_protocol.options import InsertOpts, resolve_insert_params
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Interrupted, Snooze
from river_protocol.states import JobState
from river_protocol.testing import strategies as rst
from river_protocol.testing.harness import InvariantViolation, build_result, drive
from river_protocol.unique import REQUIRED_UNIQUE_STATES, STATE_BITS, UniqueOpts
from tests.conftest import costly_examples

T0 = datetime(2025, 1, 1, tzinfo=UTC)
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


# ---------------------------------------------------------------- time


@given(rst.aware_datetimes())
def test_aware_datetimes_are_aware_and_in_range(value: datetime) -> None:
    assert value.tzinfo is not None and value.utcoffset() is not None
    assert datetime(2000, 1, 1) <= value.replace(tzinfo=None) <= datetime(2100, 1, 1)


@given(rst.aware_datetimes(timezones=st.just(UTC), min_value=datetime(2030, 1, 1)))
def test_aware_datetimes_honour_zone_and_bounds(value: datetime) -> None:
    assert value.tzinfo is UTC and value.year >= 2030


@given(rst.clocks(min_steps=1, max_steps=6, max_advance=timedelta(seconds=3)))
def test_clocks_strictly_increase(clock: rst.Clock) -> None:
    instants = clock.instants()
    assert len(instants) == len(clock.advances) + 1 >= 2
    assert all(a < b <= a + timedelta(seconds=3) for a, b in itertools.pairwise(instants))
    assert clock.end == instants[-1] and instants[0] == clock.start


def test_clocks_reject_a_non_positive_advance() -> None:
    with pytest.raises(ValidationError, match="max_advance"):
        rst.clocks(max_advance=timedelta(0))


# ---------------------------------------------------------------- names and states


@given(rst.job_states(finalized=True), rst.job_states(finalized=False))
def test_job_states_filter_on_finalized(final: JobState, live: JobState) -> None:
    assert final.finalized and not live.finalized


@given(rst.job_kinds(), rst.queue_names(), rst.tags())
def test_names_match_rivers_patterns(kind: str, queue: str, tag: str) -> None:
    assert KIND_RE.search(kind) and len(kind) <= 127
    assert QUEUE_NAME_RE.fullmatch(queue) and len(queue) <= 64
    assert TAG_RE.search(tag)


# ---------------------------------------------------------------- job rows


def assert_consistent(row: JobRow) -> None:
    assert (row.finalized_at is not None) == row.state.finalized
    assert 0 <= row.attempt <= row.max_attempts
    assert len(row.errors) <= row.attempt
    assert all(1 <= e.attempt <= row.attempt for e in row.errors)
    assert [e.attempt for e in row.errors] == sorted(e.attempt for e in row.errors)
    if row.attempt:
        assert row.attempted_at is not None and row.attempted_by
    else:
        assert row.attempted_at is None and row.attempted_by == ()
    assert row.created_at is not None and row.scheduled_at is not None
    if row.finalized_at is not None:
        assert row.finalized_at >= (row.attempted_at or row.created_at)
    if row.unique_key is not None:
        assert len(row.unique_key) == 32 and row.unique_states is not None
        assert all(row.unique_states & STATE_BITS[s] for s in REQUIRED_UNIQUE_STATES)
    assert isinstance(json.loads(row.encoded_args), dict)


@given(rst.job_rows())
def test_job_rows_are_consistent(row: JobRow) -> None:
    assert_consistent(row)


@costly_examples
@given(rst.job_rows(state=JobState.RUNNING))
def test_running_rows_were_claimed_and_have_not_failed_this_attempt(row: JobRow) -> None:
    assert_consistent(row)
    assert row.state is JobState.RUNNING and row.attempt >= 1 and len(row.errors) < row.attempt


@costly_examples
@given(rst.job_rows(state=JobState.RETRYABLE))
def test_retryable_rows_failed_at_least_once(row: JobRow) -> None:
    assert_consistent(row)
    assert row.errors


@costly_examples
@given(rst.job_rows(state=JobState.PENDING))
def test_pending_rows_were_never_attempted(row: JobRow) -> None:
    assert row.attempt == 0 and row.attempted_at is None


@given(rst.job_rows(state=st.sampled_from([JobState.AVAILABLE, JobState.SCHEDULED]), min_attempt=2,
                    max_attempt=3, min_max_attempts=5, max_max_attempts=5, ids=st.just(7)))
def test_job_rows_honour_their_bounds(row: JobRow) -> None:
    assert row.id == 7 and row.max_attempts == 5 and 2 <= row.attempt <= 3


def test_job_rows_refuse_impossible_bounds() -> None:
    with pytest.raises(ValidationError, match="pending"):
        rst.job_rows(state=JobState.PENDING, min_attempt=1)
    with pytest.raises(ValidationError, match="max_attempts bounds"):
        rst.job_rows(min_max_attempts=0)
    with pytest.raises(ValidationError, match="attempt bounds"):
        rst.job_rows(min_attempt=3, max_attempt=2)


# ---------------------------------------------------------------- outcomes, JSON, args


@given(rst.outcomes())
def test_outcomes_are_outcomes(outcome: Any) -> None:
    assert isinstance(outcome, Completed | Snooze | Cancel | Discard | Failed | Interrupted)


@given(rst.outcomes(kinds=(Snooze,), max_snooze=timedelta(seconds=30)))
def test_outcomes_restricted_to_snoozes(outcome: Any) -> None:
    assert isinstance(outcome, Snooze) and outcome.delay <= timedelta(seconds=30)


def test_outcomes_need_a_kind() -> None:
    with pytest.raises(ValidationError):
        rst.outcomes(kinds=())


def same_json(decoded: Any, original: Any) -> bool:
    # Go writes integral floats below 1e21 without an exponent, so they decode as ints.
    if isinstance(original, float):
        return not isinstance(decoded, bool) and float(decoded) == original
    if isinstance(original, list):
        return len(decoded) == len(original) and all(map(same_json, decoded, original))
    if isinstance(original, dict):
        keys_match = decoded.keys() == original.keys()
        return keys_match and all(same_json(decoded[k], v) for k, v in original.items())
    return bool(decoded == original) and type(decoded) is type(original)


@given(rst.json_values())
def test_json_values_round_trip_through_go_encoding(value: Any) -> None:
    assert same_json(json.loads(encode(value)), value)


@given(rst.args_values())
def test_args_values_encode_as_json_objects(args: Any) -> None:
    assert isinstance(json.loads(encode_args(args)), dict)


@given(rst.args_values(dicts=False))
def test_dataclass_args_carry_a_kind(args: Any) -> None:
    assert args.kind in (rst.SampleArgs.kind, rst.NestedSampleArgs.kind)
    encoded = json.loads(encode_args(args))
    if isinstance(args, rst.SampleArgs):
        assert encoded["email_address"] == args.email and ("note" in encoded) == bool(args.note)


def test_args_values_need_a_source() -> None:
    with pytest.raises(ValidationError):
        rst.args_values(dicts=False, dataclass_args=False)


# ---------------------------------------------------------------- options


@given(rst.insert_opts(), rst.job_kinds(), rst.args_values(dataclass_args=False))
def test_insert_opts_resolve(opts: InsertOpts, kind: str, args: dict[str, Any]) -> None:
    params = resolve_insert_params(kind, encode_args(args), insert_opts=opts, args_opts=None,
                                   unique_fields=[], now=NOW)
    if opts.pending:
        assert params.state is JobState.PENDING
    elif opts.scheduled_at is not None:
        assert params.state is JobState.SCHEDULED
    else:
        assert params.state is JobState.AVAILABLE
    unique = opts.unique_opts is not None and not opts.unique_opts.is_empty()
    assert (params.unique_key is not None) == unique


@given(rst.insert_opts(unique=st.none()))
def test_insert_opts_unique_override(opts: InsertOpts) -> None:
    assert opts.unique_opts is None


@given(rst.unique_opts())
def test_unique_opts_validate(opts: UniqueOpts) -> None:
    opts.validate()
    if opts.by_state is not None:
        assert set(REQUIRED_UNIQUE_STATES) <= set(opts.by_state)


@given(rst.unique_opts(non_empty=True))
def test_non_empty_unique_opts_make_jobs_unique(opts: UniqueOpts) -> None:
    assert not opts.is_empty()


@given(rst.invalid_unique_opts())
def test_invalid_unique_opts_fail_validation(opts: UniqueOpts) -> None:
    with pytest.raises(ValidationError, match=r"ByPeriod|required states"):
        opts.validate()


# ---------------------------------------------------------------- cron


@given(rst.cron_expressions(), rst.aware_datetimes())
def test_cron_expressions_parse_and_fire_later(expr: str, after: datetime) -> None:
    assert len(expr.split(" ")) == 5
    fire = parse_cron(expr).next(after)
    assert fire is None or fire > after


# ---------------------------------------------------------------- machine event sequences

MACHINE_RUNS = settings(max_examples=60, deadline=None)


def producer() -> Producer:
    return Producer(ProducerConfig(queue="default", client_id="client_a", max_workers=3), random.Random(1))


@MACHINE_RUNS
@given(rst.event_sequences("producer"))
def test_producer_obeys_its_invariants(steps: list[tuple[rst.Step, timedelta]]) -> None:
    assert isinstance(steps[0][0], ProducerStart)
    log = drive(producer(), steps, start=T0)
    assert log.now >= T0


@MACHINE_RUNS
@given(rst.event_sequences("completer"))
def test_completer_obeys_its_invariants(steps: list[tuple[rst.Step, timedelta]]) -> None:
    drive(Completer(random.Random(2)), steps, start=T0)


@MACHINE_RUNS
@given(rst.event_sequences("elector"))
def test_elector_obeys_its_invariants(steps: list[tuple[rst.Step, timedelta]]) -> None:
    assert isinstance(steps[0][0], ElectorStart)
    drive(Elector("client_a", random.Random(3)), steps, start=T0)


def test_event_sequences_reject_unknown_machines() -> None:
    with pytest.raises(ValidationError, match="unknown machine"):
        rst.event_sequences("reindexer")  # type: ignore[arg-type]


def test_drive_ticks_at_deadlines_and_answers_intents() -> None:
    elector = Elector("client_a", random.Random(0))
    steps: list[tuple[rst.Step, timedelta]] = [
        (ElectorStart(), timedelta(0)),
        (rst.Reply(ok=True, variant=0), timedelta(seconds=1)),  # the elect sent at T0: won
    ]
    log = drive(elector, steps, start=T0)
    events = [type(e) for _, e, _ in log.handled]
    assert events == [ElectorStart, Tick, IntentSucceeded]
    assert elector.is_leader and log.pending == []
    assert log.outputs()[-1].next_deadline is not None


def test_drive_skips_events_a_driver_would_not_send() -> None:
    # After Stop a completer takes no submissions, and a Reply with nothing in flight is void.
    late = Submit(SetStateUpdate(id=1, state=JobState.COMPLETED), CompletionReason.COMPLETED)
    steps: list[tuple[rst.Step, timedelta]] = [
        (Stop(), timedelta(0)), (late, timedelta(0)), (rst.Reply(), timedelta(0)),
    ]
    log = drive(Completer(random.Random(0)), steps, start=T0)
    assert [type(e) for _, e, _ in log.handled] == [Stop]


def test_build_result_fits_each_intent() -> None:
    claim = ClaimJobs(queue="q", limit=3, client_id="c")
    rows = build_result(claim, 2, T0, 10)
    assert [r.id for r in rows] == [10, 11] and all(r.state is JobState.RUNNING for r in rows)
    assert build_result(LeaderElect(leader_id="c", ttl=timedelta(seconds=15)), 1, T0, 1) is None
    won = build_result(LeaderElect(leader_id="c", ttl=timedelta(seconds=15)), 0, T0, 1)
    assert won.leader_id == "c" and won.expires_at == T0 + timedelta(seconds=15)


class LeakyCompleter(Completer):
    """Forgets every update it is given: the harness must notice."""

    def _on_submit(self, event: Submit, now: datetime) -> None:
        return None


@settings(max_examples=40, deadline=None, database=None)
@given(rst.event_sequences("completer"))
def _drive_leaky(steps: list[tuple[rst.Step, timedelta]]) -> None:
    drive(LeakyCompleter(random.Random(0)), steps, start=T0)


def test_harness_catches_a_machine_that_loses_updates() -> None:
    with pytest.raises(InvariantViolation, match="vanished"):
        _drive_leaky()


def test_drive_requires_an_aware_start() -> None:
    with pytest.raises(ValidationError, match="aware"):
        drive(Completer(random.Random(0)), [], start=datetime(2025, 1, 1))
