"""A hypothesis model of flow control over the sans-IO core: N producers (the real ``Producer``
machine, configured with flow control) claim from one in-memory queue whose limited claims are
answered by the rule (``choose_claims``); jobs complete, fail, get cancelled; producers crash
and the rescuer puts their jobs back. For any interleaving:

- no partition ever has more than ``global_limit`` jobs running, nor more than ``local_limit``
  running for one client;
- no window of ``period`` holds more than ``allowed`` starts of one rate partition;
- no job of a sequence starts while an earlier job of its sequence is unfinished.

tests/drivers/test_flow_db.py checks that both databases' claim statements take exactly what
``choose_claims`` takes, so these properties hold of the SQL too.
"""

from __future__ import annotations

import dataclasses
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from river_protocol.flow_control import (
    SEQUENCE_KEY,
    SEQUENCE_WAIT_STATES,
    ConcurrencyConfig,
    FlowControl,
    FlowJob,
    PartitionConfig,
    RateLimit,
    SequenceOpts,
    choose_claims,
)
from river_protocol.flow_intents import ClaimLimitedJobs
from river_protocol.intents import QueueRow, UpsertQueue
from river_protocol.job import JobRow
from river_protocol.machines.base import IntentSucceeded, Tick
from river_protocol.machines.producer import JobFinished, Producer, ProducerConfig, ProducerState, Start
from river_protocol.states import JobState

S = JobState
T0 = datetime(2030, 1, 1, tzinfo=UTC)
PERIOD = timedelta(seconds=1)
SEQ = SequenceOpts(by_args=("c",))


@dataclasses.dataclass
class Job:
    id: int
    kind: str
    args: dict[str, Any]
    state: S = S.AVAILABLE
    by: str | None = None
    attempt: int = 0
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    def view(self) -> FlowJob:
        return FlowJob(id=self.id, kind=self.kind, state=self.state, args=self.args, scheduled_at=T0,
                       last_attempted_by=self.by, metadata=self.metadata)


class World:
    def __init__(self, flow: FlowControl, producers: int, max_workers: int, seed: int) -> None:
        self.flow = flow
        self.now = T0
        self.jobs: dict[int, Job] = {}
        self.starts: list[tuple[datetime, tuple[Any, ...]]] = []
        self.rng = random.Random(seed)
        self.max_workers = max_workers
        self.live: dict[str, Producer] = {}
        self.dead: set[str] = set()
        self.count = 0
        for _ in range(producers):
            self.spawn()

    def spawn(self) -> None:
        self.count += 1
        name = f"p{self.count}"
        producer = Producer(ProducerConfig(queue="q", client_id=name, max_workers=self.max_workers,
                                           flow=self.flow), self.rng)
        (upsert,) = producer.handle(Start(), self.now).intents
        assert isinstance(upsert, UpsertQueue)
        producer.handle(IntentSucceeded(upsert, QueueRow("q", T0, {}, None, T0)), self.now)
        self.live[name] = producer

    def insert(self, kind: str, c: int, in_sequence: bool, halting: bool) -> None:
        job_id = len(self.jobs) + 1
        args = {"c": c}
        seq = SequenceOpts(by_args=("c",), continue_on_discarded=not halting)
        meta = seq.metadata(kind, args) if in_sequence else {}
        self.jobs[job_id] = Job(job_id, kind, args, metadata=meta)
        for producer in self.live.values():
            producer.handle(Tick(), self.now)

    def answer_claim(self, name: str) -> None:
        producer = self.live[name]
        claim = next((i for i in producer.in_flight if isinstance(i, ClaimLimitedJobs)), None)
        if claim is None:
            return
        rpart = self.flow.rate_partition
        recent: dict[tuple[Any, ...], int] = {}
        for at, key in self.starts:
            if at > self.now - PERIOD:
                recent[key] = recent.get(key, 0) + 1
        ids = choose_claims(jobs=[j.view() for j in self.jobs.values()], flow=self.flow,
                            limits=self.flow.limits, client_id=name, limit=claim.claim.limit,
                            now=self.now, recent_starts=recent)
        rows = []
        for job_id in ids:
            job = self.jobs[job_id]
            self.check_sequence_may_start(job)
            job.state, job.by, job.attempt = S.RUNNING, name, job.attempt + 1
            self.starts.append((self.now, rpart.key(job.kind, job.args)))
            rows.append(JobRow(id=job.id, kind=job.kind, encoded_args=json.dumps(job.args).encode(),
                               state=S.RUNNING, queue="q", attempt=job.attempt, attempted_by=(name,),
                               attempted_at=self.now, metadata=job.metadata))
        producer.handle(IntentSucceeded(claim, rows), self.now)
        self.check()

    def finish(self, pick: int, outcome: str) -> None:
        mine = [j for j in self.jobs.values() if j.state is S.RUNNING and j.by in self.live]
        if not mine:
            return
        job = mine[pick % len(mine)]
        if outcome == "fail":
            job.state = S.RETRYABLE if job.attempt < 3 else S.DISCARDED
        else:
            job.state = {"complete": S.COMPLETED, "cancel": S.CANCELLED, "discard": S.DISCARDED}[outcome]
        producer = self.live[job.by or ""]
        producer.handle(JobFinished(job.id), self.now)

    def crash(self, pick: int) -> None:
        if len(self.live) <= 1:
            return
        name = sorted(self.live)[pick % len(self.live)]
        del self.live[name]  # its jobs stay running until the rescuer comes
        self.dead.add(name)

    def rescue(self) -> None:
        for job in self.jobs.values():
            if job.state is S.RUNNING and job.by in self.dead:
                job.state = S.RETRYABLE if job.attempt < 3 else S.DISCARDED

    def schedule(self) -> None:
        for job in self.jobs.values():
            if job.state is S.RETRYABLE:
                job.state = S.AVAILABLE

    def advance(self, ms: int) -> None:
        self.now += timedelta(milliseconds=ms)
        for producer in self.live.values():
            if producer.state is ProducerState.RUNNING:
                producer.handle(Tick(), self.now)

    # ------------------------------------------------------------ the properties

    def check(self) -> None:
        conc = self.flow.concurrency
        if conc is not None:
            per: dict[tuple[Any, ...], int] = {}
            local: dict[tuple[str | None, tuple[Any, ...]], int] = {}
            for job in self.jobs.values():
                if job.state is S.RUNNING:
                    key = conc.partition.key(job.kind, job.args)
                    per[key] = per.get(key, 0) + 1
                    local[(job.by, key)] = local.get((job.by, key), 0) + 1
            if conc.global_limit is not None:
                assert max(per.values(), default=0) <= conc.global_limit, per
            if conc.local_limit is not None:
                assert max(local.values(), default=0) <= conc.local_limit, local
        rate = self.flow.rate_limit
        if rate is not None:
            # Every window (t - period, t] ending at a start: the worst windows end at one.
            for at, key in self.starts:
                n = sum(1 for other, k in self.starts if k == key and at - PERIOD < other <= at)
                assert n <= rate.allowed, (at, key, n)

    def check_sequence_may_start(self, job: Job) -> None:
        key = job.metadata.get(SEQUENCE_KEY)
        if key is None or not self.flow.sequences:
            return
        for other in self.jobs.values():
            if other.id < job.id and other.metadata.get(SEQUENCE_KEY) == key:
                assert other.state not in SEQUENCE_WAIT_STATES, (job.id, other)
                halt = job.metadata.get("river_py:sequence_halt", [])
                assert other.state.value not in halt, (job.id, other)


_steps = st.lists(st.tuples(
    st.sampled_from(["insert", "claim", "claim", "claim", "finish", "crash", "rescue", "schedule",
                     "advance", "spawn"]),
    st.integers(0, 50), st.sampled_from(["complete", "complete", "fail", "cancel", "discard"]),
    st.booleans(), st.booleans(),
), min_size=1, max_size=120)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps, producers=st.integers(1, 4), max_workers=st.integers(1, 6),
       global_limit=st.one_of(st.none(), st.integers(1, 3)),
       local_limit=st.one_of(st.none(), st.integers(1, 2)),
       allowed=st.one_of(st.none(), st.integers(1, 4)), by_kind=st.booleans(), by_args=st.booleans(),
       sequences=st.booleans(), seed=st.integers(0, 1000))
def test_limits_hold_for_any_interleaving(
    steps: list[tuple[str, int, str, bool, bool]], producers: int, max_workers: int,
    global_limit: int | None, local_limit: int | None, allowed: int | None, by_kind: bool, by_args: bool,
    sequences: bool, seed: int,
) -> None:
    part = PartitionConfig(by_kind=by_kind, by_args=("c",) if by_args else ())
    conc = (ConcurrencyConfig(global_limit=global_limit, local_limit=local_limit, partition=part)
            if global_limit or local_limit else None)
    rate = RateLimit(allowed=allowed, period=PERIOD, partition=part) if allowed else None
    world = World(FlowControl(conc, rate, sequences), producers, max_workers, seed)
    for kind, n, outcome, flag_a, flag_b in steps:
        names = sorted(world.live)
        if kind == "insert":
            world.insert("ab"[n % 2], n % 3, flag_a, flag_b)
        elif kind == "claim":
            world.answer_claim(names[n % len(names)])
        elif kind == "finish":
            world.finish(n, outcome)
        elif kind == "crash":
            world.crash(n)
        elif kind == "rescue":
            world.rescue()
        elif kind == "schedule":
            world.schedule()
        elif kind == "advance":
            world.advance(n * 20)
        elif kind == "spawn" and len(world.live) < 5:
            world.spawn()
        world.check()


def test_the_model_notices_a_broken_rule() -> None:
    """The checks can fail: without the rule (every available job claimed) the limit is broken."""
    flow = FlowControl(ConcurrencyConfig(global_limit=1))
    world = World(flow, producers=1, max_workers=5, seed=0)
    for _ in range(3):
        world.jobs[len(world.jobs) + 1] = Job(len(world.jobs) + 1, "a", {"c": 0}, state=S.RUNNING, by="p1")
    try:
        world.check()
    except AssertionError:
        return
    raise AssertionError("three running jobs under global_limit=1 went unnoticed")


def test_sequence_order_in_the_model() -> None:
    world = World(FlowControl(sequences=True), producers=2, max_workers=3, seed=1)
    for _ in range(3):
        world.insert("a", 0, True, False)
    for name in sorted(world.live):
        world.answer_claim(name)
    assert [j.state for j in world.jobs.values()] == [S.RUNNING, S.AVAILABLE, S.AVAILABLE]
    world.finish(0, "fail")  # retries left: the sequence waits
    world.schedule()
    world.advance(100)
    for name in sorted(world.live):
        world.answer_claim(name)
    assert [j.state for j in world.jobs.values()] == [S.RUNNING, S.AVAILABLE, S.AVAILABLE]
    world.finish(0, "complete")
    world.advance(100)
    for name in sorted(world.live):
        world.answer_claim(name)
    assert [j.state for j in world.jobs.values()] == [S.COMPLETED, S.RUNNING, S.AVAILABLE]
    assert SEQ.key("a", {"c": 0}) == world.jobs[1].metadata[SEQUENCE_KEY]
