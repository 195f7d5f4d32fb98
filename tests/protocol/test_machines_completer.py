"""Completer machine: batching triggers, retries, requeue, back-pressure, stop."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.constants import COMPLETER_STOP_GRACE
from river_protocol.errors import ProtocolError
from river_protocol.intents import SetStateIfRunning, SetStateUpdate
from river_protocol.job import JobRow
from river_protocol.machines.base import IntentFailed, IntentSucceeded, Stop, Tick
from river_protocol.machines.completer import (
    Completer,
    CompleterOutput,
    CompleterState,
    CompletionReason,
    Submit,
    persisted_reason,
)
from river_protocol.states import JobState

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
DONE = CompletionReason.COMPLETED


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class FixedRng:
    def __init__(self, value: float = 0.5) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def submit(job_id: int, state: JobState = JobState.COMPLETED, ctx: object = None) -> Submit:
    return Submit(SetStateUpdate(id=job_id, state=state), DONE, ctx)


def rows_for(statement: SetStateIfRunning, skip: frozenset[int] = frozenset()) -> list[JobRow]:
    return [
        JobRow(id=u.id, kind="k", encoded_args=b"{}", state=u.state)
        for u in statement.updates
        if u.id not in skip
    ]


def statement(out: CompleterOutput) -> SetStateIfRunning:
    (stmt,) = out.intents
    assert isinstance(stmt, SetStateIfRunning)
    return stmt


def test_first_tick_flushes() -> None:
    c = Completer(FixedRng())
    out = c.handle(submit(1), at(0))
    assert out.intents == () and out.next_deadline == at(0)
    stmt = statement(c.handle(Tick(), at(0)))
    assert [u.id for u in stmt.updates] == [1]
    assert c.timeout_for(stmt) == timedelta(seconds=10)
    out = c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0.01))
    assert [(x.job.id, x.reason) for x in out.completions] == [(1, DONE)]


@pytest.mark.parametrize(
    ("asked", "reason", "stored", "persisted"),
    [
        (JobState.COMPLETED, DONE, JobState.COMPLETED, DONE),
        (JobState.AVAILABLE, CompletionReason.INTERRUPTED, JobState.AVAILABLE, CompletionReason.INTERRUPTED),
        (JobState.AVAILABLE, CompletionReason.SNOOZED, JobState.AVAILABLE, CompletionReason.SNOOZED),
        (JobState.AVAILABLE, CompletionReason.FAILED, JobState.AVAILABLE, CompletionReason.FAILED),
        # The cancel override of a retry or a snooze (§8.1).
        (JobState.RETRYABLE, CompletionReason.FAILED, JobState.CANCELLED, CompletionReason.CANCELLED),
        (JobState.SCHEDULED, CompletionReason.SNOOZED, JobState.CANCELLED, CompletionReason.CANCELLED),
        # No longer running when the statement ran: someone else decided the row's state.
        (JobState.COMPLETED, DONE, JobState.RETRYABLE, None),
        (JobState.COMPLETED, DONE, JobState.RUNNING, None),
        (JobState.AVAILABLE, CompletionReason.INTERRUPTED, JobState.CANCELLED, None),
        (JobState.DISCARDED, CompletionReason.FAILED, JobState.CANCELLED, None),
    ],
)
def test_completions_name_the_outcome_the_row_bears_out(
    asked: JobState, reason: CompletionReason, stored: JobState, persisted: CompletionReason | None
) -> None:
    update = SetStateUpdate(id=1, state=asked)
    stored_row = JobRow(id=1, kind="k", encoded_args=b"{}", state=stored)
    assert persisted_reason(update, reason, stored_row) is persisted
    c = Completer(FixedRng(), flush_when_idle=True)
    c.handle(Submit(update, reason), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    out = c.handle(IntentSucceeded(stmt, [stored_row]), at(0))
    assert [(x.reason, x.persisted) for x in out.completions] == [(reason, persisted)]


def test_later_request_replaces_earlier() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1, JobState.RETRYABLE), at(0))
    c.handle(submit(1, JobState.COMPLETED), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    assert [(u.id, u.state) for u in stmt.updates] == [(1, JobState.COMPLETED)]


def test_only_every_fifth_tick_below_threshold() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0.01))
    c.handle(submit(2), at(0.02))
    for n in range(1, 5):
        assert c.handle(Tick(), at(0.05 * n)).intents == ()
    stmt = statement(c.handle(Tick(), at(0.25)))
    assert [u.id for u in stmt.updates] == [2]


def test_threshold_flushes_on_next_tick_and_signal_flushes_at_once() -> None:
    c = Completer(FixedRng())
    c.handle(submit(0), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0))
    for i in range(1, 101):
        assert c.handle(submit(i), at(0.01)).intents == ()
    assert len(statement(c.handle(Tick(), at(0.05))).updates) == 100

    c2 = Completer(FixedRng())
    outs = [c2.handle(submit(i), at(0)) for i in range(5000)]
    assert all(o.intents == () for o in outs[:-1])
    assert len(statement(outs[-1]).updates) == 5000


def test_sub_batches_are_capped() -> None:
    c = Completer(FixedRng(), sub_batch_max=3)
    for i in range(7):
        c.handle(submit(i), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    assert len(stmt.updates) == 3
    stmt = statement(c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0)))
    assert len(stmt.updates) == 3
    stmt = statement(c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0)))
    assert len(stmt.updates) == 1


def test_retries_with_backoff_then_requeues() -> None:
    c = Completer(FixedRng(1.0))  # +10 % jitter
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    out = c.handle(IntentFailed(stmt, RuntimeError("x")), at(1))
    assert out.intents == () and out.next_deadline == at(0.05)  # the tick timer; retry at 1 + 1.1 s
    assert c._timers["retry"] == at(2.1)
    stmt2 = statement(c.handle(Tick(), at(2.1)))
    assert stmt2 is not stmt and stmt2.updates == stmt.updates
    c.handle(IntentFailed(stmt2, RuntimeError("x")), at(3))
    assert c._timers["retry"] == at(3) + timedelta(seconds=2.2)
    stmt3 = statement(c.handle(Tick(), at(5.2)))
    c.handle(submit(1, JobState.RETRYABLE), at(5.3))  # newer request for the same job
    out = c.handle(IntentFailed(stmt3, RuntimeError("x")), at(6))
    assert out.dropped == ()
    assert c.outstanding_ids == {1}
    assert c._pending[1].update.state is JobState.RETRYABLE  # the newer one survives


def test_backoff_unit_scales_the_retry_waits() -> None:
    c = Completer(FixedRng(1.0), backoff_unit=timedelta(milliseconds=100))  # +10 % jitter
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    c.handle(IntentFailed(stmt, RuntimeError("x")), at(1))
    assert c._timers["retry"] == at(1.11)  # 1.1 units of 0.1 s
    stmt2 = statement(c.handle(Tick(), at(1.11)))
    c.handle(IntentFailed(stmt2, RuntimeError("x")), at(2))
    assert c._timers["retry"] == at(2.22)


def test_fatal_error_drops_and_reports() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1, ctx="ctx"), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    out = c.handle(IntentFailed(stmt, RuntimeError("closed"), fatal=True), at(0))
    assert [(d.update.id, d.context) for d in out.dropped] == [(1, "ctx")]
    assert c.outstanding_ids == frozenset()


def test_missing_rows_are_reported() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1), at(0))
    c.handle(submit(2), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    out = c.handle(IntentSucceeded(stmt, rows_for(stmt, frozenset({2}))), at(0))
    assert [x.job.id for x in out.completions] == [1]
    assert [m.update.id for m in out.missing] == [2]


def test_backpressure_between_thresholds() -> None:
    c = Completer(FixedRng(), backpressure_high=4, backpressure_low=2)
    c.handle(submit(0), at(0))
    stmt = statement(c.handle(Tick(), at(0)))  # keep a statement in flight
    outs = [c.handle(submit(i), at(0)) for i in range(1, 5)]
    assert [o.accepting for o in outs] == [True, True, True, False]
    out = c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0.01))
    assert not out.accepting and out.intents == ()  # below the flush threshold: waits for a tick
    out = c.handle(Tick(), at(0.05))
    assert out.accepting and len(statement(out).updates) == 4


def test_stop_flushes_and_finishes() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0))
    c.handle(submit(2), at(0.01))
    stmt = statement(c.handle(Stop(), at(0.02)))
    assert c.state is CompleterState.STOPPING
    out = c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(0.03))
    assert out.stopped and c.state is CompleterState.STOPPED
    assert out.next_deadline is None


def test_stop_retries_transient_failures_for_the_grace_then_gives_up() -> None:
    grace = COMPLETER_STOP_GRACE.total_seconds()
    c = Completer(FixedRng())
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Stop(), at(0)))
    stmt = statement(_fail_and_retry(c, stmt, at(1)))
    stmt = statement(_fail_and_retry(c, stmt, at(15)))
    # Past the last attempt, but within the grace: an outage may still end.
    stmt = statement(_fail_and_retry(c, stmt, at(grace - 6)))
    out = c.handle(IntentFailed(stmt, RuntimeError("x")), at(grace))
    assert [d.update.id for d in out.dropped] == [1] and out.stopped


def test_stop_succeeds_when_the_outage_ends_within_the_grace() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Stop(), at(0)))
    for second in (1, 5, 9, 13):  # more failures than COMPLETER_MAX_ATTEMPTS
        stmt = statement(_fail_and_retry(c, stmt, at(second)))
    out = c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(25))
    assert [x.job.id for x in out.completions] == [1] and out.dropped == () and out.stopped


def test_a_refused_batch_is_split_so_one_bad_update_holds_back_no_other() -> None:
    c = Completer(FixedRng())
    for job_id in (1, 2, 3):
        c.handle(submit(job_id), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    refused = ValueError("invalid input")
    completed: list[int] = []
    dropped: list[int] = []
    out = c.handle(IntentFailed(stmt, refused, transient=False), at(0.01))
    now = 0.01
    for _ in range(20):
        completed += [x.job.id for x in out.completions]
        dropped += [d.update.id for d in out.dropped]
        stmt = next((i for i in out.intents if isinstance(i, SetStateIfRunning)), None)
        now += 5
        if stmt is None:
            out = c.handle(Tick(), at(now))
            continue
        assert len(stmt.updates) == 1  # alone from the split on
        if stmt.updates[0].id == 2:
            out = c.handle(IntentFailed(stmt, refused, transient=False), at(now))
        else:
            out = c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(now))
    assert sorted(completed) == [1, 3]
    assert dropped == [2]  # after COMPLETER_MAX_ATTEMPTS alone, while running
    assert c.outstanding_ids == frozenset()


def test_a_transient_failure_is_never_dropped_while_running() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    now = 0.0
    for _ in range(30):
        now += 0.01
        out = c.handle(IntentFailed(stmt, ConnectionError("lost")), at(now))
        assert out.dropped == ()
        while True:
            now += 1
            out = c.handle(Tick(), at(now))
            found = [i for i in out.intents if isinstance(i, SetStateIfRunning)]
            if found:
                stmt = found[0]
                break
    assert c.outstanding_ids == {1}
    out = c.handle(IntentSucceeded(stmt, rows_for(stmt)), at(now + 1))
    assert [x.job.id for x in out.completions] == [1]


def _fail_and_retry(c: Completer, stmt: SetStateIfRunning, now: datetime) -> CompleterOutput:
    c.handle(IntentFailed(stmt, RuntimeError("x")), now)
    return c.handle(Tick(), now + timedelta(seconds=10))


def test_stop_with_nothing_pending_stops_at_once() -> None:
    assert Completer(FixedRng()).handle(Stop(), at(0)).stopped


@pytest.mark.parametrize("stop_first", [True, False])
def test_submit_after_stop_is_illegal(stop_first: bool) -> None:
    c = Completer(FixedRng())
    if not stop_first:
        c.handle(submit(1), at(0))
    c.handle(Stop(), at(0))
    with pytest.raises(ProtocolError):
        c.handle(submit(2), at(0))


def test_foreign_result_is_illegal() -> None:
    c = Completer(FixedRng())
    with pytest.raises(ProtocolError):
        c.handle(IntentSucceeded(SetStateIfRunning(updates=()), []), at(0))


def test_result_with_unknown_row_is_illegal() -> None:
    c = Completer(FixedRng())
    c.handle(submit(1), at(0))
    stmt = statement(c.handle(Tick(), at(0)))
    with pytest.raises(ProtocolError):
        c.handle(
            IntentSucceeded(stmt, [JobRow(id=9, kind="k", encoded_args=b"{}", state=JobState.COMPLETED)]),
            at(0),
        )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["submit", "tick", "ok", "ok_partial", "fail", "fatal", "refused", "advance"]),
            st.integers(0, 30),
        ),
        max_size=120,
    ),
    st.randoms(use_true_random=False),
)
def test_updates_are_never_lost_or_duplicated(steps: list[tuple[str, int]], rng: random.Random) -> None:
    c = Completer(rng, sub_batch_max=4, backpressure_high=20, backpressure_low=10)
    now = at(0)
    latest: dict[int, int] = {}  # job id -> serial of the newest submission
    settled: list[tuple[int, int]] = []
    serial = 0

    def account(out: CompleterOutput) -> None:
        for x in out.completions:
            settled.append((x.job.id, x.context))
        for m in out.missing:
            settled.append((m.update.id, m.context))
        for d in out.dropped:
            settled.append((d.update.id, d.context))

    for kind, n in steps:
        stmt = next((i for i in c.in_flight if isinstance(i, SetStateIfRunning)), None)
        if kind == "submit":
            serial += 1
            latest[n] = serial
            account(c.handle(submit(n, ctx=serial), now))
        elif kind in ("ok", "ok_partial") and stmt is not None:
            skip = frozenset(u.id for u in stmt.updates if kind == "ok_partial" and u.id % 2)
            account(c.handle(IntentSucceeded(stmt, rows_for(stmt, skip)), now))
        elif kind in ("fail", "fatal", "refused") and stmt is not None:
            account(c.handle(IntentFailed(stmt, RuntimeError("x"), fatal=kind == "fatal",
                                          transient=kind != "refused"), now))
        else:
            now += timedelta(milliseconds=50 * (n + 1))
            account(c.handle(Tick(), now))
        assert len(c.outstanding_ids) == len(set(c.outstanding_ids))
    # Drain: stop and succeed everything.
    account(c.handle(Stop(), now))
    for _ in range(10_000):
        if c.state is CompleterState.STOPPED:
            break
        stmt = next((i for i in c.in_flight if isinstance(i, SetStateIfRunning)), None)
        now += timedelta(seconds=10)
        if stmt is not None:
            account(c.handle(IntentSucceeded(stmt, rows_for(stmt)), now))
        else:
            account(c.handle(Tick(), now))
    assert c.state is CompleterState.STOPPED
    # Each job's newest submission settles exactly once; superseded ones may vanish (replaced).
    serials = [s for _, s in settled]
    assert len(serials) == len(set(serials))
    settled_latest = {job: s for job, s in settled if latest.get(job) == s}
    assert settled_latest.keys() == latest.keys()


# ---------------------------------------------------------------- group commit


def test_group_commit_sends_at_once_when_idle_and_batches_what_arrives_meanwhile() -> None:
    c = Completer(FixedRng(), flush_when_idle=True)
    out = c.handle(submit(1), at(0))
    assert out.intents == () and out.next_deadline == at(0)  # due at once, as a timer
    out = c.handle(submit(9), at(0))  # an event the driver already held joins the batch
    first = statement(c.handle(Tick(), at(0)))
    assert sorted(u.id for u in first.updates) == [1, 9]
    for job_id in (2, 3, 4):  # a statement is in flight: these wait for it
        assert c.handle(submit(job_id), at(0.001)).intents == ()
    out = c.handle(IntentSucceeded(first, rows_for(first)), at(0.002))
    assert sorted(x.job.id for x in out.completions) == [1, 9]
    assert out.next_deadline == at(0.002)
    second = statement(c.handle(Tick(), at(0.002)))
    assert sorted(u.id for u in second.updates) == [2, 3, 4]
    out = c.handle(IntentSucceeded(second, rows_for(second)), at(0.003))
    assert sorted(x.job.id for x in out.completions) == [2, 3, 4]
    assert out.intents == () and c.pending_count == 0


def test_group_commit_retries_a_failed_batch_before_sending_newer_requests() -> None:
    c = Completer(FixedRng(), flush_when_idle=True)
    c.handle(submit(1), at(0))
    first = statement(c.handle(Tick(), at(0)))
    out = c.handle(IntentFailed(first, RuntimeError("db down")), at(0.01))
    assert out.intents == ()  # waits for its back-off timer
    assert c.handle(submit(2), at(0.02)).intents == ()  # not idle: the retry owns the slot
    again = statement(c.handle(Tick(), at(2)))  # the back-off (about 1 s) has passed
    assert [u.id for u in again.updates] == [1]
    c.handle(IntentSucceeded(again, rows_for(again)), at(2.001))
    assert [u.id for u in statement(c.handle(Tick(), at(2.001))).updates] == [2]


def test_default_keeps_go_timing() -> None:
    c = Completer(FixedRng())
    out = c.handle(submit(1), at(0))
    assert out.intents == ()  # waits for the first tick, as Go's batch completer does
