"""Batch events: a run of queued JobFinished / Submit events is handled as one event, to the same effect."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.errors import ProtocolError
from river_protocol.intents import ClaimJobs, SetStateUpdate
from river_protocol.machines.base import Event, IntentSucceeded, Stop, Tick, take_event
from river_protocol.machines.completer import Completer, CompletionReason, Submit, Submits
from river_protocol.machines.producer import (
    InsertNotification,
    JobFinished,
    JobsFinished,
    Producer,
    ProducerState,
    TriggerFetch,
)
from river_protocol.states import JobState
from tests.protocol.test_machines_completer import FixedRng as CompleterRng
from tests.protocol.test_machines_completer import at as c_at
from tests.protocol.test_machines_producer import at, claim_of, jobs, started


def test_take_event_merges_a_run_of_one_batched_type_and_nothing_else() -> None:
    p, _ = started()
    queue: deque[Event] = deque(
        [JobFinished(1), JobFinished(2), TriggerFetch(), JobFinished(3), InsertNotification("q")])
    assert take_event(p, queue) == JobsFinished((1, 2))
    assert take_event(p, queue) == TriggerFetch()
    assert take_event(p, queue) == JobFinished(3)  # alone: handed on as it came
    assert take_event(p, queue) == InsertNotification("q")
    assert not queue


def test_take_event_leaves_events_of_machines_without_batches_alone() -> None:
    completer = Completer(CompleterRng())
    queue: deque[Event] = deque([Tick(), Tick()])
    assert take_event(completer, queue) == Tick() and len(queue) == 1


def _running_producer(n: int) -> Producer:
    p, out = started(max_workers=n)
    p.handle(IntentSucceeded(claim_of(out), jobs(*range(1, n + 1))), at(0))
    return p


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=6).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.integers(1, n), unique=True, min_size=1))))
def test_jobs_finished_equals_each_job_finished_in_turn(case: tuple[int, list[int]]) -> None:
    n, finished = case
    one_by_one, batched = _running_producer(n), _running_producer(n)
    outs = [one_by_one.handle(JobFinished(i), at(0.5)) for i in finished]
    out = batched.handle(JobsFinished(tuple(finished)), at(0.5))
    assert batched.running_job_ids == one_by_one.running_job_ids
    assert batched.state is one_by_one.state
    # The one difference: a fetch the run triggers asks for every slot the whole run freed.
    sequential = [i for o in outs for i in o.intents]
    assert [type(i) for i in out.intents] == [type(i) for i in sequential][: len(out.intents)]
    claims = [i for i in out.intents if isinstance(i, ClaimJobs)]
    assert bool(claims) == any(isinstance(i, ClaimJobs) for i in sequential)
    if claims:
        assert claims[0].limit == n - len(batched.running_job_ids)


def test_jobs_finished_stops_a_stopping_producer_with_its_last_jobs() -> None:
    p = _running_producer(3)
    p.handle(Stop(), at(1))
    assert p.state is ProducerState.STOPPING
    out = p.handle(JobsFinished((3, 1, 2)), at(2))
    assert out.stopped and p.state is ProducerState.STOPPED


def test_jobs_finished_refuses_a_job_that_is_not_running() -> None:
    p = _running_producer(2)
    with pytest.raises(ProtocolError, match="job 9 finished"):
        p.handle(JobsFinished((1, 9)), at(1))


def _submit(job_id: int) -> Submit:
    return Submit(SetStateUpdate(id=job_id, state=JobState.COMPLETED), CompletionReason.COMPLETED, job_id)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=120), st.booleans())
def test_submits_equal_each_submit_in_turn(ids: list[int], idle_flush: bool) -> None:
    one_by_one = Completer(CompleterRng(), flush_when_idle=idle_flush)
    batched = Completer(CompleterRng(), flush_when_idle=idle_flush)
    outs = [one_by_one.handle(_submit(i), c_at(0)) for i in ids]
    out = batched.handle(Submits(tuple(_submit(i) for i in ids)), c_at(0))
    assert out.intents == tuple(i for o in outs for i in o.intents)
    assert out.accepting == outs[-1].accepting
    assert batched.outstanding_ids == one_by_one.outstanding_ids
    assert batched.next_deadline() == one_by_one.next_deadline()
    later = c_at(1)
    assert batched.handle(Tick(), later).intents == one_by_one.handle(Tick(), later).intents


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=60), st.booleans(), st.booleans(),
       st.integers(2, 12))
def test_submits_equal_each_submit_in_turn_across_flushes_and_back_pressure(
    ids: list[int], idle_flush: bool, in_flight: bool, signal: int
) -> None:
    """The same with a statement in flight or not, a backlog signal and back-pressure
    thresholds that a run crosses (the batch handler checks them once per run)."""
    import river_protocol.machines.completer as completer_module

    def make() -> Completer:
        c = Completer(CompleterRng(), flush_when_idle=idle_flush, sub_batch_max=4,
                      backpressure_high=6, backpressure_low=3)
        if in_flight:
            c.handle(_submit(100), c_at(0))
            c.handle(Tick(), c_at(0))
        return c

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(completer_module, "COMPLETER_BACKLOG_SIGNAL", signal)
        one_by_one, batched = make(), make()
        outs = [one_by_one.handle(_submit(i), c_at(0)) for i in ids]
        out = batched.handle(Submits(tuple(_submit(i) for i in ids)), c_at(0))
        assert [i.updates for i in out.intents] == [i.updates for o in outs for i in o.intents]
        assert out.accepting == outs[-1].accepting
        assert batched.pending_count == one_by_one.pending_count
        assert batched.outstanding_ids == one_by_one.outstanding_ids
        assert batched.next_deadline() == one_by_one.next_deadline()


def test_submits_are_refused_once_stopping() -> None:
    completer = Completer(CompleterRng())
    completer.handle(_submit(1), c_at(0))
    completer.handle(Stop(), c_at(0))
    with pytest.raises(ProtocolError):
        completer.handle(Submits((_submit(2),)), c_at(0))
