"""Producer machine: debounced claims, capacity, pause/resume, cancel, stop."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import (
    ClaimJobs,
    GetCancelRequested,
    GetQueue,
    QueueRow,
    ReconcileClaim,
    UpsertQueue,
)
from river_protocol.job import JobRow
from river_protocol.machines.base import IntentFailed, IntentSucceeded, Stop, Tick
from river_protocol.machines.notifications import ControlPayload
from river_protocol.machines.producer import (
    ControlMessage,
    InsertNotification,
    JobFinished,
    Producer,
    ProducerConfig,
    ProducerOutput,
    ProducerState,
    QueueEventKind,
    SlotReleased,
    Start,
    TriggerFetch,
)
from river_protocol.states import JobState

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class FixedRng:
    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def row(name: str = "q", paused: bool = False, metadata: dict[str, object] | None = None) -> QueueRow:
    return QueueRow(
        name=name, created_at=T0, metadata=metadata or {}, paused_at=T0 if paused else None, updated_at=T0
    )


def jobs(*ids: int) -> list[JobRow]:
    return [JobRow(id=i, kind="k", encoded_args=b"{}", state=JobState.RUNNING, queue="q") for i in ids]


def started(
    max_workers: int = 3,
    paused: bool = False,
    poll_only: bool = False,
    metadata: dict[str, object] | None = None,
) -> tuple[Producer, ProducerOutput]:
    p = Producer(
        ProducerConfig(queue="q", client_id="c1", max_workers=max_workers, poll_only=poll_only), FixedRng()
    )
    out = p.handle(Start(), at(0))
    (upsert,) = out.intents
    assert upsert == UpsertQueue(name="q")
    assert p.state is ProducerState.STARTING
    out = p.handle(IntentSucceeded(upsert, row(paused=paused, metadata=metadata)), at(0))
    assert p.state is ProducerState.RUNNING
    return p, out


def claim_of(out: ProducerOutput) -> ClaimJobs:
    claims = [i for i in out.intents if isinstance(i, ClaimJobs)]
    assert len(claims) == 1, out.intents
    return claims[0]


def reconcile_of(out: ProducerOutput) -> ReconcileClaim:
    found = [i for i in out.intents if isinstance(i, ReconcileClaim)]
    assert len(found) == 1 and not [i for i in out.intents if isinstance(i, ClaimJobs)], out.intents
    return found[0]


def no_claim(out: ProducerOutput) -> None:
    assert not [i for i in out.intents if isinstance(i, ClaimJobs)], out.intents


def test_start_claims_immediately_with_full_capacity() -> None:
    p, out = started(max_workers=3)
    claim = claim_of(out)
    assert claim == ClaimJobs(queue="q", limit=3, client_id="c1", max_attempted_by=100)
    assert p.timeout_for(claim) == timedelta(seconds=10)
    # Poll timer at 1 s (rng 0 = no jitter), refresh stagger at 0 s.
    assert out.next_deadline == at(0)


def test_claim_result_starts_jobs_and_counts_capacity() -> None:
    p, out = started(max_workers=3)
    out = p.handle(IntentSucceeded(claim_of(out), jobs(1, 2)), at(0.01))
    assert [j.id for j in out.start_jobs] == [1, 2]
    assert p.active_count == 2
    out = p.handle(InsertNotification("q"), at(0.2))
    assert claim_of(out).limit == 1


def test_insert_notification_during_cooldown_fires_once_at_cooldown_end() -> None:
    p, out = started()
    p.handle(IntentSucceeded(claim_of(out), []), at(0.01))
    p.handle(Tick(), at(0.01))  # the queue refresh stagger (rng 0) is due at once
    no_claim(p.handle(InsertNotification("q"), at(0.02)))
    out = p.handle(InsertNotification("q"), at(0.05))
    no_claim(out)
    assert out.next_deadline == at(0.1)
    out = p.handle(Tick(), at(0.1))
    claim_of(out)


def test_other_queue_notification_is_ignored() -> None:
    p, out = started()
    p.handle(IntentSucceeded(claim_of(out), []), at(0.01))
    out = p.handle(InsertNotification("other"), at(0.5))
    no_claim(out)


def test_trigger_while_claim_in_flight_waits_for_result() -> None:
    p, out = started()
    claim = claim_of(out)
    no_claim(p.handle(InsertNotification("q"), at(0.5)))
    out = p.handle(IntentSucceeded(claim, []), at(0.6))
    claim_of(out)


def test_poll_timer_triggers_fetch_with_jitter() -> None:
    p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=1), FixedRng(0.5))
    (upsert,) = p.handle(Start(), at(0)).intents
    out = p.handle(IntentSucceeded(upsert, row()), at(0))
    out = p.handle(IntentSucceeded(claim_of(out), []), at(0))
    # 1 s + 0.5 * max(100 ms, 10 ms) = 1.05 s; refresh at 0.5 s comes first.
    assert out.next_deadline == at(0.5)
    out = p.handle(Tick(), at(0.5))
    assert out.intents == (UpsertQueue(name="q"),)
    assert out.next_deadline == at(1.05)
    claim_of(p.handle(Tick(), at(1.05)))


def test_full_capacity_sets_flag_and_job_finish_fetches() -> None:
    p, out = started(max_workers=2)
    out = p.handle(IntentSucceeded(claim_of(out), jobs(1, 2)), at(0))
    no_claim(p.handle(InsertNotification("q"), at(0.5)))
    out = p.handle(JobFinished(1), at(0.7))
    assert claim_of(out).limit == 1


def test_paused_producer_never_claims_and_resume_fetches() -> None:
    p, out = started(paused=True)
    no_claim(out)
    no_claim(p.handle(InsertNotification("q"), at(1)))
    out = p.handle(ControlMessage(ControlPayload("resume", "*")), at(2))
    assert [e.kind for e in out.queue_events] == [QueueEventKind.RESUMED]
    claim_of(out)
    out = p.handle(ControlMessage(ControlPayload("pause", "q")), at(2.5))
    assert [e.kind for e in out.queue_events] == [QueueEventKind.PAUSED]
    out = p.handle(ControlMessage(ControlPayload("pause", "q")), at(2.6))
    assert out.queue_events == ()


def test_local_pause_ack_waits_for_a_claim_that_started_before_it() -> None:
    p, out = started()
    claim = claim_of(out)
    out = p.handle(ControlMessage(ControlPayload("pause", "q"), ack="a1"), at(0.01))
    assert out.acks == () and [e.kind for e in out.queue_events] == [QueueEventKind.PAUSED]
    out = p.handle(IntentSucceeded(claim, jobs(1)), at(0.02))
    assert out.acks == ("a1",) and [j.id for j in out.start_jobs] == [1]
    # Paused: an insert wakes nothing, and a further ack comes back at once.
    no_claim(p.handle(InsertNotification("q"), at(0.5)))
    assert p.handle(ControlMessage(ControlPayload("pause", "*"), ack="a2"), at(0.6)).acks == ("a2",)
    out = p.handle(ControlMessage(ControlPayload("resume", "q"), ack="a3"), at(0.7))
    assert out.acks == ("a3",)
    claim = claim_of(out)  # the claim resume starts does not hold the resume's own ack back
    out = p.handle(ControlMessage(ControlPayload("resume", "other"), ack="a4"), at(0.71))
    assert out.acks == ()  # arrived with a claim in flight, even though it does not apply here
    assert p.handle(IntentFailed(claim, RuntimeError("down")), at(0.72)).acks == ("a4",)


def test_local_pause_during_start_upsert_holds_from_the_first_fetch() -> None:
    p = Producer(ProducerConfig(queue="q", client_id="c1", max_workers=2), FixedRng())
    (upsert,) = p.handle(Start(), at(0)).intents
    assert p.handle(ControlMessage(ControlPayload("pause", "q"), ack="a"), at(0)).acks == ("a",)
    out = p.handle(IntentSucceeded(upsert, row(paused=False)), at(0.01))  # read before the pause committed
    no_claim(out)
    assert p.paused and [e.kind for e in out.queue_events] == [QueueEventKind.PAUSED]
    out = p.handle(ControlMessage(ControlPayload("resume", "q")), at(0.5))
    claim_of(out)


def test_control_ack_after_stop_is_answered_without_effect() -> None:
    p, out = started()
    p.handle(Stop(), at(1))
    out = p.handle(ControlMessage(ControlPayload("pause", "q"), ack="s"), at(1))
    assert out.acks == ("s",) and out.queue_events == () and not p.paused


def test_cancel_control_only_for_local_running_jobs() -> None:
    p, out = started()
    p.handle(IntentSucceeded(claim_of(out), jobs(7)), at(0))
    assert p.handle(ControlMessage(ControlPayload("cancel", "q", job_id=7)), at(1)).cancel_job_ids == (7,)
    assert p.handle(ControlMessage(ControlPayload("cancel", "q", job_id=8)), at(1)).cancel_job_ids == ()
    assert p.handle(ControlMessage(ControlPayload("cancel", "*", job_id=7)), at(1)).cancel_job_ids == ()
    assert p.handle(ControlMessage(ControlPayload("cancel", "r", job_id=7)), at(1)).cancel_job_ids == ()


def test_metadata_changed_is_forwarded() -> None:
    p, _ = started()
    out = p.handle(ControlMessage(ControlPayload("metadata_changed", "q", metadata=b'{"a":1}')), at(1))
    assert out.queue_events[0].kind is QueueEventKind.METADATA_CHANGED
    assert out.queue_events[0].metadata == b'{"a":1}'


def test_poll_only_settings_poll_synthesises_pause_and_metadata() -> None:
    p, out = started(poll_only=True, metadata={"x": 1})
    p.handle(IntentSucceeded(claim_of(out), []), at(0))
    p.handle(Tick(), at(0))  # refresh upsert
    out = p.handle(Tick(), at(2))
    (get,) = [i for i in out.intents if isinstance(i, GetQueue)]
    p.handle(IntentSucceeded(claim_of(out), []), at(2))  # the poll timer fetched too
    out = p.handle(IntentSucceeded(get, row(paused=True, metadata={"x": 1})), at(2.01))
    assert [e.kind for e in out.queue_events] == [QueueEventKind.PAUSED]
    assert p.paused
    out = p.handle(Tick(), at(4))
    (get,) = [i for i in out.intents if isinstance(i, GetQueue)]
    no_claim(out)  # paused: the poll fire does nothing
    out = p.handle(IntentSucceeded(get, row(paused=False, metadata={"x": 2})), at(4.01))
    assert [e.kind for e in out.queue_events] == [QueueEventKind.RESUMED, QueueEventKind.METADATA_CHANGED]
    assert out.queue_events[1].metadata == b'{"x":2}'
    claim_of(p.handle(Tick(), at(4.1)))  # the resume fetch waits out the 4 s fire's cooldown


def test_poll_only_settings_poll_reads_cancellations_of_running_jobs() -> None:
    p, out = started(poll_only=True)
    retried = JobRow(id=3, kind="k", encoded_args=b"{}", state=JobState.RUNNING, queue="q",
                     metadata={"cancel_attempted_at": "2020-01-01T00:00:00Z"})
    p.handle(IntentSucceeded(claim_of(out), [*jobs(1, 2), retried]), at(0))
    p.handle(Tick(), at(0))  # refresh upsert
    out = p.handle(Tick(), at(2))
    (asked,) = [i for i in out.intents if isinstance(i, GetCancelRequested)]
    assert asked == GetCancelRequested(ids=(1, 2, 3))
    # 7 is not this producer's; 3 carried its cancel attempt when claimed (retried since).
    result = ((2, "2025-01-01T12:00:01Z"), (3, "2020-01-01T00:00:00Z"), (7, "2025-01-01T12:00:01Z"))
    assert p.handle(IntentSucceeded(asked, result), at(2.01)).cancel_job_ids == (2,)
    out = p.handle(Tick(), at(4))
    (asked,) = [i for i in out.intents if isinstance(i, GetCancelRequested)]
    result = ((2, "2025-01-01T12:00:01Z"), (3, "2025-01-01T12:00:03Z"))  # a new attempt on 3
    assert p.handle(IntentSucceeded(asked, result), at(4.01)).cancel_job_ids == (3,)  # 2: once only
    # A failed read is advisory, as the settings poll's.
    out = p.handle(Tick(), at(6))
    (asked,) = [i for i in out.intents if isinstance(i, GetCancelRequested)]
    assert p.handle(IntentFailed(asked, RuntimeError("down")), at(6.01)).cancel_job_ids == ()


def test_listening_producers_and_idle_ones_read_no_cancellations() -> None:
    p, out = started(poll_only=False)
    p.handle(IntentSucceeded(claim_of(out), jobs(1)), at(0))
    for second in (0, 2, 4):
        assert not [i for i in p.handle(Tick(), at(second)).intents if isinstance(i, GetCancelRequested)]
    p, out = started(poll_only=True)
    p.handle(IntentSucceeded(claim_of(out), []), at(0))
    p.handle(Tick(), at(0))
    assert not [i for i in p.handle(Tick(), at(2)).intents if isinstance(i, GetCancelRequested)]


def test_refresh_upsert_every_ten_minutes() -> None:
    p, out = started()
    p.handle(IntentSucceeded(claim_of(out), []), at(0))
    out = p.handle(Tick(), at(0))
    (upsert,) = out.intents
    p.handle(IntentSucceeded(upsert, row()), at(0.1))
    out = p.handle(Tick(), at(600))
    assert UpsertQueue(name="q") in out.intents


def test_stop_waits_for_claim_and_jobs() -> None:
    p, out = started()
    claim = claim_of(out)
    out = p.handle(Stop(), at(1))
    assert p.state is ProducerState.STOPPING and not out.stopped
    assert out.next_deadline is None
    out = p.handle(IntentSucceeded(claim, jobs(1)), at(1.1))
    assert [j.id for j in out.start_jobs] == [1]
    no_claim(p.handle(InsertNotification("q"), at(1.2)))
    out = p.handle(JobFinished(1), at(2))
    assert out.stopped and p.state is ProducerState.STOPPED


def test_a_start_refused_for_good_reports_error_and_stops() -> None:
    for fatal, transient in ((False, False), (True, True)):
        p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=1), FixedRng())
        (upsert,) = p.handle(Start(), at(0)).intents
        err = RuntimeError("relation river_queue does not exist")
        out = p.handle(IntentFailed(upsert, err, fatal=fatal, transient=transient), at(0))
        assert out.start_error is err and out.stopped and out.start_failure is None
        assert p.state is ProducerState.STOPPED


def test_a_transient_start_failure_is_retried_with_backoff_until_it_starts() -> None:
    p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=1), FixedRng(0.5))
    (upsert,) = p.handle(Start(), at(0)).intents
    lost = ConnectionError("connection lost")
    out = p.handle(IntentFailed(upsert, lost), at(0))
    assert p.state is ProducerState.STARTING and not out.stopped and out.start_error is None
    assert out.start_failure is not None and out.start_failure.error is lost
    assert (out.start_failure.consecutive, out.start_failure.retry_in) == (1, timedelta(seconds=1))
    assert out.next_deadline == at(1) and not out.intents
    assert not p.handle(Tick(), at(0.5)).intents  # not yet
    # A poke or an insert notification meanwhile is covered by the claim that follows the start.
    assert not p.handle(TriggerFetch(), at(0.6)).intents
    assert not p.handle(InsertNotification("q"), at(0.7)).intents
    (again,) = p.handle(Tick(), at(1)).intents
    assert again == UpsertQueue(name="q")
    out = p.handle(IntentFailed(again, lost), at(1.1))
    assert out.start_failure is not None and out.start_failure.consecutive == 2
    assert out.start_failure.retry_in == timedelta(seconds=2) and out.next_deadline == at(3.1)
    (third,) = p.handle(Tick(), at(3.1)).intents
    out = p.handle(IntentSucceeded(third, row()), at(3.2))
    assert p.state is ProducerState.RUNNING and claim_of(out)


def test_a_stop_while_a_start_retry_waits_stops_at_once() -> None:
    p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=1), FixedRng())
    (upsert,) = p.handle(Start(), at(0)).intents
    p.handle(IntentFailed(upsert, ConnectionError("lost")), at(0))
    out = p.handle(Stop(), at(0.2))
    assert out.stopped and p.state is ProducerState.STOPPED and out.next_deadline is None
    assert not p.handle(Tick(), at(5)).intents


def test_claim_failure_allows_next_trigger_once_reconciled() -> None:
    p, out = started()
    reconcile = reconcile_of(p.handle(IntentFailed(claim_of(out), RuntimeError("x")), at(0.01)))
    no_claim(p.handle(TriggerFetch(), at(0.2)))  # never alongside the reconcile
    claim_of(p.handle(IntentSucceeded(reconcile, []), at(0.21)))


def test_slot_released_frees_capacity() -> None:
    p, out = started(max_workers=1)
    p.handle(IntentSucceeded(claim_of(out), jobs(1)), at(0))
    out = p.handle(SlotReleased(1), at(0.5))
    assert claim_of(out).limit == 1
    assert p.running_job_ids == {1}


@pytest.mark.parametrize(
    ("state_setup", "event"),
    [
        ("new", Tick()),
        ("new", JobFinished(1)),
        ("running", Start()),
        ("running", JobFinished(99)),
        ("running", SlotReleased(99)),
        ("stopped", Start()),
        ("stopped", JobFinished(1)),
    ],
)
def test_illegal_events_raise(state_setup: str, event: object) -> None:
    if state_setup == "new":
        p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=1), FixedRng())
    else:
        p, out = started()
        if state_setup == "stopped":
            p.handle(Stop(), at(1))
            p.handle(IntentSucceeded(claim_of(out), []), at(1))
            assert p.state is ProducerState.STOPPED
    with pytest.raises(ProtocolError):
        p.handle(event, at(5))  # type: ignore[arg-type]


def test_result_for_unknown_intent_raises() -> None:
    p, _ = started()
    with pytest.raises(ProtocolError):
        p.handle(IntentSucceeded(ClaimJobs(queue="q", limit=1, client_id="c"), []), at(1))


def test_claim_returning_more_than_limit_raises() -> None:
    p, out = started(max_workers=1)
    with pytest.raises(ProtocolError):
        p.handle(IntentSucceeded(claim_of(out), jobs(1, 2)), at(0))


def test_naive_now_is_rejected() -> None:
    p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=1), FixedRng())
    with pytest.raises(ValidationError):
        p.handle(Start(), datetime(2025, 1, 1))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_workers": 0},
        {"max_workers": 10_001},
        {"max_workers": 1, "fetch_cooldown": timedelta(0)},
        {"max_workers": 1, "fetch_poll_interval": timedelta(milliseconds=50)},
    ],
)
def test_config_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ProducerConfig(queue="q", client_id="c", **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- property test

_event_kinds = st.sampled_from(
    [
        "tick",
        "insert",
        "insert_other",
        "finish",
        "release",
        "claim_ok",
        "claim_fail",
        "reconcile_ok",
        "reconcile_fail",
        "pause",
        "resume",
        "trigger",
        "cancel",
        "advance",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_event_kinds, st.integers(0, 10), st.floats(0, 2)), max_size=80),
    st.integers(1, 5),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_random_sequences_keep_invariants(
    steps: list[tuple[str, int, float]], max_workers: int, rng: random.Random, stop_midway: bool
) -> None:
    p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=max_workers), rng)
    (upsert,) = p.handle(Start(), at(0)).intents
    now = at(0)
    out = p.handle(IntentSucceeded(upsert, row()), now)
    pending: list[object] = list(out.intents)
    next_id = 1
    stop_at = len(steps) // 2 if stop_midway else -1
    for index, (kind, n, dt) in enumerate(steps):
        if index == stop_at and p.state is ProducerState.RUNNING:
            out = p.handle(Stop(), now)
            pending.extend(out.intents)
            continue
        now += timedelta(seconds=dt) if kind == "advance" else timedelta(milliseconds=n)
        claim = p.claim_in_flight
        reconcile = next((i for i in p.in_flight if isinstance(i, ReconcileClaim)), None)
        running = sorted(p.running_job_ids)
        if kind == "claim_ok" and claim is not None:
            count = min(n, claim.limit)
            rows = jobs(*range(next_id, next_id + count))
            next_id += count
            out = p.handle(IntentSucceeded(claim, rows), now)
            pending.remove(claim)
        elif kind == "claim_fail" and claim is not None:
            out = p.handle(IntentFailed(claim, RuntimeError("x")), now)
            pending.remove(claim)
        elif kind == "reconcile_ok" and reconcile is not None:
            out = p.handle(IntentSucceeded(reconcile, []), now)
            pending.remove(reconcile)
        elif kind == "reconcile_fail" and reconcile is not None:
            out = p.handle(IntentFailed(reconcile, RuntimeError("x")), now)
            pending.remove(reconcile)
        elif kind == "finish" and running:
            out = p.handle(JobFinished(running[n % len(running)]), now)
        elif kind == "release" and running:
            out = p.handle(SlotReleased(running[n % len(running)]), now)
        elif p.state in (ProducerState.RUNNING, ProducerState.STOPPING):
            event = {
                "insert": InsertNotification("q"),
                "insert_other": InsertNotification("x"),
                "pause": ControlMessage(ControlPayload("pause", "*")),
                "resume": ControlMessage(ControlPayload("resume", "q")),
                "trigger": TriggerFetch(),
                "cancel": ControlMessage(ControlPayload("cancel", "q", job_id=n)),
            }.get(kind, Tick())
            was_paused = p.paused
            out = p.handle(event, now)
            new_claims = [i for i in out.intents if isinstance(i, ClaimJobs)]
            if new_claims:
                assert not p.paused or (was_paused and not p.paused)
        else:
            continue
        new_claims = [i for i in out.intents if isinstance(i, ClaimJobs)]
        # Never more than one claim in flight, never while paused or stopping, never beyond capacity.
        assert len([i for i in p.in_flight if isinstance(i, ClaimJobs)]) <= 1
        # A reconcile never overlaps a claim, and never touches what is running here.
        reconciles = [i for i in p.in_flight if isinstance(i, ReconcileClaim)]
        assert len(reconciles) + (p.claim_in_flight is not None) <= 1
        for r in reconciles:
            assert p.running_job_ids <= set(r.exclude_ids)
        for c in new_claims:
            assert not p.paused
            assert p.state is ProducerState.RUNNING
            assert 1 <= c.limit <= max_workers - p.active_count
        assert p.active_count <= max_workers
        assert set(out.cancel_job_ids) <= p.running_job_ids
        pending.extend(i for i in out.intents if not isinstance(i, ClaimJobs))
        pending.extend(new_claims)
        if out.next_deadline is not None:
            assert out.next_deadline >= now - timedelta(seconds=1) or p.state is not ProducerState.RUNNING


def test_claim_failures_are_counted_until_a_claim_succeeds() -> None:
    p, out = started()
    err = RuntimeError("boom")
    out = p.handle(IntentFailed(claim_of(out), err), at(0.01))
    assert out.claim_failure is not None and out.claim_failure.error is err
    assert out.claim_failure.consecutive == 1 and not out.claim_failure.repeated
    p.handle(IntentSucceeded(reconcile_of(out), []), at(0.02))
    out = p.handle(IntentFailed(claim_of(p.handle(TriggerFetch(), at(0.2))), err), at(0.21))
    assert out.claim_failure is not None and out.claim_failure.consecutive == 2 and out.claim_failure.repeated
    # Reported once, with the failure that caused it: the next output carries none.
    out = p.handle(IntentSucceeded(reconcile_of(out), []), at(0.22))
    assert out.claim_failure is None
    p.handle(IntentSucceeded(claim_of(p.handle(TriggerFetch(), at(0.4))), []), at(0.41))
    out = p.handle(IntentFailed(claim_of(p.handle(TriggerFetch(), at(0.6))), err), at(0.61))
    assert out.claim_failure is not None and out.claim_failure.consecutive == 1


def claimed(*ids: int, at_time: datetime) -> list[JobRow]:
    return [dataclasses.replace(j, attempted_at=at_time) for j in jobs(*ids)]


def test_failed_claim_reconciles_rows_claimed_since_the_last_seen_claim() -> None:
    p, out = started(max_workers=5)
    # Before any rows were seen, the bound is the start upsert's time (database clock).
    first = reconcile_of(p.handle(IntentFailed(claim_of(out), ConnectionError("lost")), at(0.01)))
    assert first == ReconcileClaim(queue="q", client_id="c1", claimed_since=T0, exclude_ids=())
    out = p.handle(IntentSucceeded(first, []), at(0.02))
    assert out.reconciled_job_ids == ()
    db_time = T0 + timedelta(seconds=7)  # the database clock need not match the client's
    claim = claim_of(p.handle(TriggerFetch(), at(0.2)))
    p.handle(IntentSucceeded(claim, claimed(1, 2, at_time=db_time)), at(0.21))
    p.handle(JobFinished(2), at(0.3))  # its outcome may not be committed yet: never reconciled
    claim = claim_of(p.handle(TriggerFetch(), at(0.5)))
    out = p.handle(IntentFailed(claim, ConnectionError("lost")), at(0.51))
    reconcile = reconcile_of(out)
    assert reconcile.claimed_since == db_time and reconcile.exclude_ids == (1, 2)
    assert p.claim_in_flight is None
    no_claim(p.handle(InsertNotification("q"), at(0.6)))
    out = p.handle(IntentSucceeded(reconcile, [3, 4]), at(0.61))
    # The restored rows are available again: fetch at once.
    assert out.reconciled_job_ids == (3, 4)
    assert claim_of(out).limit == 4


def test_failed_reconcile_is_retried_before_the_next_claim() -> None:
    p, out = started()
    reconcile = reconcile_of(p.handle(IntentFailed(claim_of(out), ConnectionError("lost")), at(0.01)))
    out = p.handle(IntentFailed(reconcile, ConnectionError("still down")), at(0.02))
    no_claim(out)
    again = reconcile_of(p.handle(TriggerFetch(), at(0.3)))
    assert again == reconcile
    out = p.handle(IntentSucceeded(again, []), at(0.31))
    no_claim(out)  # the trigger's cooldown still holds for the claim
    claim_of(p.handle(Tick(), at(0.4)))


def test_fatal_claim_failure_does_not_reconcile() -> None:
    p, out = started()
    out = p.handle(IntentFailed(claim_of(out), RuntimeError("closed"), fatal=True), at(0.01))
    assert not [i for i in out.intents if isinstance(i, ReconcileClaim)]


def test_stopping_producer_reconciles_before_it_stops() -> None:
    p, out = started()
    claim = claim_of(out)
    p.handle(Stop(), at(0.01))
    reconcile = reconcile_of(p.handle(IntentFailed(claim, ConnectionError("lost")), at(0.02)))
    assert p.state is ProducerState.STOPPING
    out = p.handle(IntentSucceeded(reconcile, [9]), at(0.03))
    assert out.stopped and out.reconciled_job_ids == (9,) and not out.intents


def test_reconcile_answer_naming_a_running_job_is_a_protocol_error() -> None:
    p, out = started()
    p.handle(IntentSucceeded(claim_of(out), claimed(1, at_time=T0)), at(0.01))
    reconcile = reconcile_of(p.handle(IntentFailed(claim_of(p.handle(TriggerFetch(), at(0.2))),
                                                   ConnectionError("lost")), at(0.21)))
    with pytest.raises(ProtocolError, match="running here"):
        p.handle(IntentSucceeded(reconcile, [1]), at(0.22))
