"""Flow control's settings, keys and rule (river_protocol.flow_control), the producer's limited
claims, and the sequence metadata an insert carries."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.client_core import ClientConfig, ClientCore, QueueConfig
from river_protocol.errors import ValidationError
from river_protocol.flow_control import (
    SEQUENCE_HALT,
    SEQUENCE_KEY,
    ConcurrencyConfig,
    FlowControl,
    FlowJob,
    PartitionConfig,
    QueueLimits,
    RateLimit,
    SequenceOpts,
    choose_claims,
    fast_claims,
    scan_size,
)
from river_protocol.flow_intents import (
    ClaimLimitedJobs,
    GetFlowStatus,
    SetQueueLimits,
    UpdateQueueLimits,
    flow_status_intent,
    update_limits_intent,
)
from river_protocol.intents import ClaimJobs, QueueRow
from river_protocol.job import JobRow
from river_protocol.machines.base import IntentSucceeded, Tick
from river_protocol.machines.producer import JobFinished, Producer, ProducerConfig, Start
from river_protocol.options import InsertOpts, resolve_insert_params
from river_protocol.states import JobState
from river_protocol.workers import Workers

S = JobState
T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Rng:
    def random(self) -> float:
        return 0.0


def test_partition_keys_compare_json_values() -> None:
    p = PartitionConfig(by_kind=True, by_args=["customer", "region"])
    assert p.by_args == ("customer", "region")
    assert p.key("k", {"customer": 1, "region": "eu"}) == ("k", "1", '"eu"')
    assert p.key("k", {"customer": "1"}) != p.key("k", {"customer": 1})
    assert p.key("k", {}) == ("k", "null", "null")
    assert PartitionConfig().key("k", {"x": 1}) == ()
    assert p.as_json() == {"by_kind": True, "by_args": ["customer", "region"]}


@pytest.mark.parametrize("bad", [
    lambda: PartitionConfig(by_kind="yes"),  # type: ignore[arg-type]
    lambda: PartitionConfig(by_args="customer"),
    lambda: PartitionConfig(by_args=["a", "a"]),
    lambda: PartitionConfig(by_args=[""]),
    lambda: PartitionConfig(by_args=["it's"]),
    lambda: ConcurrencyConfig(),
    lambda: ConcurrencyConfig(global_limit=0),
    lambda: ConcurrencyConfig(local_limit=True),
    lambda: ConcurrencyConfig(global_limit=1, partition={"by_kind": True}),  # type: ignore[arg-type]
    lambda: RateLimit(allowed=0, period=timedelta(seconds=1)),
    lambda: RateLimit(allowed=1, period=timedelta(0)),
    lambda: RateLimit(allowed=1, period=timedelta(microseconds=1500)),
    lambda: RateLimit(allowed=1, period=60),  # type: ignore[arg-type]
    lambda: SequenceOpts(by_args="c"),
    lambda: SequenceOpts(continue_on_cancelled="no"),  # type: ignore[arg-type]
    lambda: QueueLimits(rate_allowed=1),
    lambda: QueueLimits(rate_allowed=1, rate_period=timedelta(0)),
    lambda: QueueConfig(concurrency=3),  # type: ignore[arg-type]
    lambda: QueueConfig(rate_limit=ConcurrencyConfig(global_limit=1)),  # type: ignore[arg-type]
    lambda: QueueConfig(sequences=1),  # type: ignore[arg-type]
])
def test_bad_settings_are_validation_errors(bad: Any) -> None:
    with pytest.raises(ValidationError):
        bad()


def test_flow_control_of_a_queue_config() -> None:
    assert QueueConfig().flow is None  # no limits: River's claim, unchanged
    conc = ConcurrencyConfig(global_limit=3, local_limit=1, partition=PartitionConfig(by_kind=True))
    rate = RateLimit(allowed=10, period=timedelta(seconds=2), partition=PartitionConfig(by_args=["c"]))
    flow = QueueConfig(concurrency=conc, rate_limit=rate).flow
    assert flow is not None and flow.enabled
    assert flow.limits == QueueLimits(global_limit=3, local_limit=1, rate_allowed=10,
                                      rate_period=timedelta(seconds=2))
    assert flow.limits.rate_period_ms == 2000
    assert flow.concurrency_partition.by_kind and flow.rate_partition.by_args == ("c",)
    assert QueueConfig(sequences=True).flow == FlowControl(sequences=True)
    assert FlowControl(sequences=True).limits == QueueLimits()
    assert (scan_size(1), scan_size(100), scan_size(10**6)) == (100, 400, 20_000)


def _jobs(*specs: tuple[int, str, S, int]) -> list[FlowJob]:
    return [FlowJob(id=i, kind=kind, state=state, args={"c": c}, scheduled_at=T0, last_attempted_by="me")
            for i, kind, state, c in specs]


def test_choose_claims_skips_full_partitions_and_ranks_the_rest() -> None:
    flow = FlowControl(ConcurrencyConfig(global_limit=2, partition=PartitionConfig(by_args=["c"])))
    jobs = _jobs((1, "k", S.RUNNING, 1), (2, "k", S.AVAILABLE, 1), (3, "k", S.AVAILABLE, 1),
                 (4, "k", S.AVAILABLE, 2), (5, "k", S.AVAILABLE, 2), (6, "k", S.AVAILABLE, 2))
    def take(limit: int) -> list[int]:
        return choose_claims(jobs=jobs, flow=flow, limits=flow.limits, client_id="me", limit=limit, now=T0)

    assert (take(10), take(2), take(0)) == ([2, 4, 5], [2, 4], [])
    # A future job is not due; the limits in force are the ones passed, not the configured ones.
    later = [dataclasses.replace(jobs[1], scheduled_at=T0 + timedelta(seconds=1)), *jobs[2:]]
    assert choose_claims(jobs=later, flow=flow, limits=QueueLimits(global_limit=1), client_id="me",
                         limit=10, now=T0) == [3, 4]


def test_choose_claims_counts_recent_starts_per_rate_partition() -> None:
    flow = FlowControl(rate_limit=RateLimit(allowed=2, period=timedelta(seconds=1),
                                            partition=PartitionConfig(by_kind=True)))
    jobs = _jobs((1, "a", S.AVAILABLE, 0), (2, "a", S.AVAILABLE, 0), (3, "b", S.AVAILABLE, 0))
    recent = {("a",): 1}
    assert choose_claims(jobs=jobs, flow=flow, limits=flow.limits, client_id="me", limit=5, now=T0,
                         recent_starts=recent) == [1, 3]


def test_fast_claims_is_the_batch_when_it_fits_and_none_when_a_partition_would_go_over() -> None:
    flow = FlowControl(ConcurrencyConfig(global_limit=2, partition=PartitionConfig(by_args=["c"])))
    jobs = _jobs((1, "k", S.RUNNING, 1), (2, "k", S.AVAILABLE, 1), (3, "k", S.AVAILABLE, 2),
                 (4, "k", S.AVAILABLE, 1), (5, "k", S.AVAILABLE, 3))

    def both(limit: int) -> tuple[list[int] | None, list[int]]:
        kw: dict[str, Any] = {"jobs": jobs, "flow": flow, "limits": flow.limits, "client_id": "me",
                              "limit": limit, "now": T0}
        return fast_claims(**kw), choose_claims(**kw)

    assert both(2) == ([2, 3], [2, 3])  # partition 1: one running, one in the batch
    assert both(3) == (None, [2, 3, 5])  # 4 would be partition 1's third: the full rule skips it
    assert both(0) == ([], [])
    rate = FlowControl(rate_limit=RateLimit(allowed=1, period=timedelta(seconds=1)))
    assert fast_claims(jobs=jobs, flow=rate, limits=rate.limits, client_id="me", limit=1, now=T0,
                       recent_starts={(): 1}) is None


_STATES = [S.AVAILABLE, S.AVAILABLE, S.AVAILABLE, S.RUNNING, S.RUNNING, S.COMPLETED, S.RETRYABLE,
           S.DISCARDED, S.SCHEDULED]
_limit = st.one_of(st.none(), st.integers(1, 4))


@settings(max_examples=500, deadline=None)
@given(specs=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(_STATES), st.integers(0, 4),
                                st.sampled_from([None, "me", "other"]), st.integers(1, 3), st.booleans()),
                      max_size=30),
       g=_limit, loc=_limit, rate=_limit, limit=st.integers(0, 10), by_kind=st.booleans(),
       by_arg=st.booleans(), sequences=st.booleans(), starts=st.integers(0, 3))
def test_fast_claims_when_given_are_what_the_rule_takes(
    specs: list[Any], g: int | None, loc: int | None, rate: int | None, limit: int, by_kind: bool,
    by_arg: bool, sequences: bool, starts: int,
) -> None:
    part = PartitionConfig(by_kind=by_kind, by_args=("c",) if by_arg else ())
    conc = ConcurrencyConfig(global_limit=g, local_limit=loc, partition=part) if (g or loc) else None
    rl = RateLimit(allowed=rate, period=timedelta(seconds=5), partition=part) if rate else None
    flow = FlowControl(concurrency=conc, rate_limit=rl, sequences=sequences)
    seq = SequenceOpts(by_args=("c",))
    jobs = [FlowJob(id=i, kind=kind, state=state, args={"c": c}, priority=prio, scheduled_at=T0,
                    last_attempted_by=by if state is S.RUNNING else None,
                    metadata=seq.metadata(kind, {"c": c}) if in_seq else {})
            for i, (kind, state, c, by, prio, in_seq) in enumerate(specs, start=1)]
    kw: dict[str, Any] = {"jobs": jobs, "flow": flow, "limits": flow.limits, "client_id": "me",
                          "limit": limit, "now": T0, "recent_starts": {part.key("a", {"c": 0}): starts}}
    fast = fast_claims(**kw)
    assert fast is None or fast == choose_claims(**kw)


def test_sequence_metadata_and_halts() -> None:
    seq = SequenceOpts(by_args=["customer"])
    assert seq.metadata("charge", {"customer": 7, "cents": 5}) == {SEQUENCE_KEY: '["charge",{"customer":7}]'}
    halting = SequenceOpts(by_args=["customer"], continue_on_discarded=False, continue_on_cancelled=False)
    assert halting.metadata("charge", {"customer": 7})[SEQUENCE_HALT] == ["cancelled", "discarded"]
    assert seq.key("charge", {"customer": 7}) == halting.key("charge", {"customer": 7})


@dataclasses.dataclass
class Charge:
    kind: ClassVar[str] = "charge"
    customer: int = 0

    def insert_opts(self) -> InsertOpts:
        return InsertOpts(sequence=SequenceOpts(by_args=["customer"]))


def test_an_insert_carries_its_sequence_in_metadata() -> None:
    opts = InsertOpts(metadata={"mine": 1}, sequence=SequenceOpts(by_args=["customer"]))
    params = resolve_insert_params("charge", b'{"customer":7}', insert_opts=opts, args_opts=None,
                                   unique_fields=(), now=T0)
    assert json.loads(params.metadata) == {"mine": 1, SEQUENCE_KEY: '["charge",{"customer":7}]'}
    # Declared on the args class, as unique options are.
    core = ClientCore(ClientConfig(client_id="c", dialect="postgres"), _workers(), Rng())
    (job,) = core.plan_insert([Charge(7)], T0).insert.jobs
    assert json.loads(job.metadata)[SEQUENCE_KEY] == '["charge",{"customer":7}]'
    with pytest.raises(ValidationError, match="JSON object"):
        resolve_insert_params("charge", b"[1]", insert_opts=InsertOpts(sequence=SequenceOpts()),
                              args_opts=None, unique_fields=(), now=T0)
    with pytest.raises(ValidationError, match="SequenceOpts"):
        resolve_insert_params("charge", b"{}", insert_opts=InsertOpts(sequence="c"),  # type: ignore[arg-type]
                              args_opts=None, unique_fields=(), now=T0)


def _started(flow: FlowControl | None) -> Producer:
    p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=3, flow=flow), Rng())
    (upsert,) = p.handle(Start(), T0).intents
    p.handle(IntentSucceeded(upsert, QueueRow("q", T0, {}, None, T0)), T0)
    return p


def test_a_limited_producer_claims_with_its_flow_and_asks_again_after_each_finish() -> None:
    flow = FlowControl(ConcurrencyConfig(global_limit=1))
    p = _started(flow)
    (claim,) = [i for i in p.in_flight if isinstance(i, ClaimLimitedJobs)]
    assert claim.flow == flow and claim.claim.limit == 3 and claim.claim.queue == "q"
    assert p.claim_in_flight == claim.claim
    row = JobRow(id=1, kind="k", encoded_args=b"{}", state=S.RUNNING, queue="q", attempted_at=T0)
    p.handle(IntentSucceeded(claim, [row]), T0)  # a short claim: the limit held the rest back
    out = p.handle(JobFinished(1), T0 + timedelta(seconds=1))
    assert [type(i) for i in out.intents] == [ClaimLimitedJobs]
    # Without flow control the same short claim asks again only on the poll.
    plain = _started(None)
    (first,) = [i for i in plain.in_flight if isinstance(i, ClaimJobs)]
    plain.handle(IntentSucceeded(first, [row]), T0)
    assert plain.handle(JobFinished(1), T0 + timedelta(milliseconds=1)).intents == ()
    assert not [i for i in plain.handle(Tick(), T0 + timedelta(milliseconds=2)).intents
                if isinstance(i, ClaimJobs)]


def test_a_client_writes_each_limited_queues_limits_at_start() -> None:
    conc = ConcurrencyConfig(global_limit=2, partition=PartitionConfig(by_args=["c"]))
    config = ClientConfig(client_id="c", dialect="postgres",
                          queues={"a": QueueConfig(concurrency=conc), "b": QueueConfig()})
    core = ClientCore(config, _workers(), Rng())
    assert core.flow_control_setup() == (
        SetQueueLimits("a", QueueLimits(global_limit=2), concurrency_partition=PartitionConfig(by_args=["c"]),
                       rate_partition=PartitionConfig()),
    )


def _workers() -> Workers:
    workers = Workers()
    workers.job(Charge)(lambda ctx, args: None)
    return workers


def test_a_rate_limited_producer_polls_within_its_period() -> None:
    def producer(period: timedelta) -> Producer:
        flow = FlowControl(rate_limit=RateLimit(allowed=5, period=period))
        config = ProducerConfig(queue="q", client_id="c", max_workers=3, flow=flow,
                                fetch_cooldown=timedelta(milliseconds=10))
        return Producer(config, Rng())

    # Rng draws zero: the jitter adds nothing.
    assert producer(timedelta(milliseconds=400))._poll_wait() == timedelta(milliseconds=20)
    assert producer(timedelta(milliseconds=100))._poll_wait() == timedelta(milliseconds=10)  # the cooldown
    slow = producer(timedelta(hours=1))
    assert slow._poll_wait() == slow.config.fetch_poll_interval


def test_completions_of_limited_queues_ask_for_a_fetch() -> None:
    from river_protocol.machines.completer import Completion, CompletionReason

    conc = ConcurrencyConfig(global_limit=1)
    config = ClientConfig(client_id="c", dialect="postgres", queues={
        "limited": QueueConfig(concurrency=conc), "seq": QueueConfig(sequences=True), "plain": QueueConfig()})
    core = ClientCore(config, _workers(), Rng())

    def done(queue: str) -> Completion:
        row = JobRow(id=1, kind="charge", encoded_args=b"{}", state=S.COMPLETED, queue=queue)
        return Completion(job=row, reason=CompletionReason.COMPLETED)

    assert core.limited_queues_freed([done("plain"), done("limited"), done("seq"), done("limited")]) == (
        "limited", "seq")
    assert core.limited_queues_freed([done("plain")]) == ()
    unlimited = ClientCore(ClientConfig(client_id="c", dialect="postgres", queues={"plain": QueueConfig()}),
                           _workers(), Rng())
    assert unlimited.limited_queues_freed([done("plain")]) == ()


def test_a_runtime_change_of_limits_is_checked_before_anything_is_written() -> None:
    limits = QueueLimits(global_limit=3)
    assert update_limits_intent("mail", limits) == UpdateQueueLimits("mail", limits)
    with pytest.raises(ValidationError, match="queue name is invalid"):
        update_limits_intent("no spaces", limits)
    with pytest.raises(ValidationError, match="queue name cannot be empty"):
        update_limits_intent("", limits)
    with pytest.raises(ValidationError, match="limits must be a QueueLimits, got dict"):
        update_limits_intent("mail", {"global_limit": 3})  # type: ignore[arg-type]


def test_freed_slots_fetch_again_and_are_announced_once_per_cooldown() -> None:
    from river_protocol.intents import Notify
    from river_protocol.machines.notifications import TOPIC_INSERT, build_insert
    from river_protocol.machines.producer import SlotsFreed

    p = _started(FlowControl(ConcurrencyConfig(global_limit=1)))
    (claim,) = [i for i in p.in_flight if isinstance(i, ClaimLimitedJobs)]
    p.handle(IntentSucceeded(claim, []), T0)
    later = T0 + timedelta(seconds=1)
    out = p.handle(SlotsFreed(), later)
    assert {type(i) for i in out.intents} == {ClaimLimitedJobs, Notify}
    (notify,) = [i for i in out.intents if isinstance(i, Notify)]
    assert notify == Notify(topic=TOPIC_INSERT, payloads=(build_insert("q"),))
    p.handle(IntentSucceeded(notify, None), later)
    again = p.handle(SlotsFreed(), later + timedelta(milliseconds=1))  # within the cooldown
    assert not [i for i in again.intents if isinstance(i, Notify)]
    # A producer no notification reaches announces nothing (no one would hear it).
    quiet = Producer(ProducerConfig(queue="q", client_id="c", max_workers=3, poll_only=True,
                                    flow=FlowControl(ConcurrencyConfig(global_limit=1))), Rng())
    (upsert,) = quiet.handle(Start(), T0).intents
    quiet.handle(IntentSucceeded(upsert, QueueRow("q", T0, {}, None, T0)), T0)
    assert not [i for i in quiet.handle(SlotsFreed(), later).intents if isinstance(i, Notify)]


def test_flow_status_asks_for_a_whole_number_of_busiest_partitions() -> None:
    assert flow_status_intent() == GetFlowStatus(5)
    assert flow_status_intent(0) == GetFlowStatus(0)
    for bad in (-1, True, 2.5, "3"):
        with pytest.raises(ValidationError, match="top must be a whole number, 0 or more"):
            flow_status_intent(bad)  # type: ignore[arg-type]
