"""The low-latency configuration README documents, through the protocol core with explicit time.

A model of ``python -m benchmarks latency``: one client inserts a job every 10 ms
(100 jobs/s); each insert's notification (when the inserter's throttle lets one out)
reaches the worker's producer at once; a claim takes 1 ms and takes every job
inserted before it ran. What a job waits is its claim's time minus its insert's time
(the rows' ``attempted_at - created_at``). Both ends' settings go through the public
configuration objects (``ClientConfig.fetch_cooldown`` for the inserter,
``QueueConfig.fetch_cooldown`` for the worked queue), as a user's arguments do.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from river_protocol.client_core import ClientConfig, ClientCore, QueueConfig
from river_protocol.constants import FETCH_COOLDOWN_DEFAULT, FETCH_COOLDOWN_MIN
from river_protocol.intents import ClaimJobs, QueueRow, UpsertQueue
from river_protocol.job import JobRow
from river_protocol.machines.base import IntentSucceeded, Tick
from river_protocol.machines.producer import InsertNotification, JobFinished, Start
from river_protocol.states import JobState
from river_protocol.workers import Workers

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
GAP = timedelta(milliseconds=10)  # 100 jobs/s
CLAIM_TAKES = timedelta(milliseconds=1)
LOW = FETCH_COOLDOWN_MIN  # 1 ms, what README's low-latency configuration sets at both ends


@dataclass
class Args:
    kind: ClassVar[str] = "noop"


def _workers() -> Workers:
    workers = Workers()
    workers.job(Args)(lambda args: None)
    return workers


@dataclass
class Run:
    waits: list[timedelta] = field(default_factory=list)  # per job: claimed - inserted
    notifications: int = 0
    claims: int = 0

    def p95(self) -> timedelta:
        ordered = sorted(self.waits)
        return ordered[int(0.95 * (len(ordered) - 1))]


def simulate(inserter_cooldown: timedelta, worker_cooldown: timedelta, jobs: int = 300) -> Run:
    inserter = ClientCore(ClientConfig(client_id="inserter", dialect="postgres",
                                       fetch_cooldown=inserter_cooldown), _workers(), random.Random(1))
    worker = ClientCore(ClientConfig(client_id="worker", dialect="postgres",
                                     queues={"default": QueueConfig(fetch_cooldown=worker_cooldown)}),
                        _workers(), random.Random(2))
    producer = worker.make_producer("default", worker.config.queues["default"])
    run = Run()
    events: list[tuple[datetime, int, str, object]] = []
    seq = 0

    def at(when: datetime, what: str, payload: object = None) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (when, seq, what, payload))

    available: list[tuple[int, datetime]] = []  # committed, unclaimed: (id, inserted at)
    next_tick: datetime | None = None

    def handle(event: object, now: datetime) -> None:
        nonlocal next_tick
        out = producer.handle(event, now)  # type: ignore[arg-type]
        for intent in out.intents:
            if isinstance(intent, ClaimJobs):
                run.claims += 1
                at(now + CLAIM_TAKES, "claimed", (intent, now))
            elif isinstance(intent, UpsertQueue):
                at(now, "upserted", intent)
        for job in out.start_jobs:
            at(now, "finished", job.id)
        if out.next_deadline is not None and out.next_deadline != next_tick:
            next_tick = out.next_deadline
            at(max(next_tick, now), "tick")

    for i in range(jobs):
        at(T0 + timedelta(seconds=1) + i * GAP, "insert", i + 1)
    handle(Start(), T0)
    while events:
        now, _, what, payload = heapq.heappop(events)
        if now > T0 + timedelta(seconds=30):
            break
        if what == "insert":
            plan = inserter.plan_insert([Args()], now)
            available.append((int(payload), now))  # type: ignore[call-overload]
            if plan.notify is not None:
                run.notifications += 1
                handle(InsertNotification("default"), now)
        elif what == "claimed":
            intent, issued = payload  # type: ignore[misc]
            taken = [job for job in available if job[1] <= issued][: intent.limit]
            for job in taken:
                available.remove(job)
                run.waits.append(issued - job[1])
            rows = [JobRow(id=job_id, kind="noop", encoded_args=b"{}", state=JobState.RUNNING,
                           queue="default", attempted_at=issued) for job_id, _ in taken]
            handle(IntentSucceeded(intent, rows), now)
        elif what == "upserted":
            queue = QueueRow(name="default", created_at=T0, metadata={}, paused_at=None, updated_at=T0)
            handle(IntentSucceeded(payload, queue), now)  # type: ignore[arg-type]
        elif what == "finished":
            handle(JobFinished(int(payload)), now)  # type: ignore[call-overload]
        elif what == "tick":
            handle(Tick(), now)
    assert len(run.waits) == jobs and not available
    return run


def test_river_defaults_pace_both_ends_at_100_ms() -> None:
    run = simulate(FETCH_COOLDOWN_DEFAULT, FETCH_COOLDOWN_DEFAULT)
    assert run.notifications == 30  # one insert in ten is announced
    assert run.p95() >= timedelta(milliseconds=80)
    assert max(run.waits) <= timedelta(milliseconds=100)


def test_low_latency_announces_and_claims_every_insert_at_once() -> None:
    run = simulate(LOW, LOW)
    assert run.notifications == 300
    assert run.p95() == timedelta(0)  # claimed as its notification arrived
    # ... or, when a poll's claim was in flight, as soon as that claim returned.
    assert max(run.waits) <= CLAIM_TAKES + LOW
    assert run.claims >= 300  # the cost: a claim per job (plus the start's and polls')


def test_one_end_alone_keeps_the_other_ends_pacing() -> None:
    # The worker's cooldown alone: the inserter still announces one insert in ten.
    worker_only = simulate(FETCH_COOLDOWN_DEFAULT, LOW)
    assert worker_only.notifications == 30 and worker_only.p95() >= timedelta(milliseconds=80)
    # The inserter's alone: every insert is announced, but the producer claims once per 100 ms.
    inserter_only = simulate(LOW, FETCH_COOLDOWN_DEFAULT)
    assert inserter_only.notifications == 300 and inserter_only.p95() >= timedelta(milliseconds=80)
