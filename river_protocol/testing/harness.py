"""A strict driver for River's machines, fed by ``strategies.event_sequences``.

``drive`` plays a sequence of ``(step, advance)`` pairs against a producer,
completer or elector the way a real driver must (``machines.base``): it moves
the clock, delivers a ``Tick`` whenever a deadline passes on the way, answers
intents only while they are in flight and each exactly once, and builds
plausible database results for them. After every ``handle`` it checks the
driver contract and the machine's own invariants, raising
``InvariantViolation`` with the step history when one breaks::

    @given(rst.event_sequences("completer"))
    def test_completer(steps):
        drive(Completer(random.Random(0)), steps, start=T0)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.intents import (
    ClaimJobs,
    GetQueue,
    Intent,
    LeaderElect,
    LeaderReelect,
    LeaderResign,
    LeaderRow,
    QueueRow,
    SetStateIfRunning,
    UpsertQueue,
)
from river_protocol.job import JobRow
from river_protocol.machines.base import (
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Tick,
)
from river_protocol.machines.completer import Completer, CompleterOutput, Submit
from river_protocol.machines.elector import Elector, ElectorOutput, ElectorState
from river_protocol.machines.producer import JobFinished, Producer, ProducerOutput, SlotReleased
from river_protocol.states import JobState
from river_protocol.testing.strategies import FinishJob, ReleaseSlot, Reply, Step

__all__ = ["DriveLog", "InvariantViolation", "build_result", "drive"]

MAX_TICKS_PER_ADVANCE = 10_000


class InvariantViolation(AssertionError):
    """A River invariant or the driver contract broke; the message says which and where."""


@dataclass(slots=True)
class DriveLog:
    """What happened: every ``(now, event, output)`` handled, and intents still unanswered."""

    now: datetime
    handled: list[tuple[datetime, Event, Output]] = field(default_factory=list)
    pending: list[Intent] = field(default_factory=list)

    def outputs(self) -> list[Output]:
        return [out for _, _, out in self.handled]


def build_result(intent: Intent, variant: int, now: datetime, next_id: int) -> Any:
    """A plausible successful result for ``intent``; ``variant`` picks among the possibilities.

    Claimed rows get ids from ``next_id`` upwards, so they never repeat.
    """
    if isinstance(intent, ClaimJobs):
        count = variant % (intent.limit + 1)
        return tuple(
            JobRow(
                id=next_id + i, kind="river_testing_sample", encoded_args=b"{}", state=JobState.RUNNING,
                queue=intent.queue, attempt=1, attempted_at=now, attempted_by=(intent.client_id,),
                created_at=now, scheduled_at=now,
            )
            for i in range(count)
        )
    if isinstance(intent, UpsertQueue | GetQueue):
        choice = variant % 3
        if choice == 0:
            return None
        paused = now if choice == 2 else None
        return QueueRow(name=intent.name, created_at=now, metadata={"v": variant % 5},
                        paused_at=paused, updated_at=now)
    if isinstance(intent, LeaderElect):
        if variant % 2:
            return None
        return LeaderRow(intent.leader_id, elected_at=now, expires_at=now + intent.ttl)
    if isinstance(intent, LeaderReelect):
        if variant % 4 == 0:
            return None
        return LeaderRow(intent.leader_id, elected_at=intent.elected_at, expires_at=now + intent.ttl)
    if isinstance(intent, LeaderResign):
        return bool(variant % 2)
    if isinstance(intent, SetStateIfRunning):
        # Some rows may have been deleted meanwhile: the machine reports those as missing.
        return tuple(
            JobRow(id=u.id, kind="river_testing_sample", encoded_args=b"{}", state=u.state)
            for i, u in enumerate(intent.updates)
            if (variant + i) % 5 != 0
        )
    return None


class _Driver:
    def __init__(self, machine: Machine, start: datetime) -> None:
        self.machine = machine
        self.log = DriveLog(now=start)
        self.next_id = 1
        self.open_ids: set[int] = set()  # completer: submitted, not yet settled

    def fail(self, message: str) -> InvariantViolation:
        recent = "\n".join(f"  {t.isoformat()} {e!r}" for t, e, _ in self.log.handled[-8:])
        return InvariantViolation(f"{type(self.machine).__name__}: {message}\nlast events:\n{recent}")

    # ------------------------------------------------------------ stepping

    def advance(self, by: timedelta) -> None:
        if by < timedelta(0):
            raise ValidationError(f"advance must not be negative, got {by}")
        target = self.log.now + by
        for _ in range(MAX_TICKS_PER_ADVANCE):
            deadline = self.machine.next_deadline()
            if deadline is None or deadline > target:
                self.log.now = target
                return
            self.log.now = max(self.log.now, deadline)
            self.feed(Tick())
        raise self.fail(f"deadline stays at or before {self.log.now} however often it ticks")

    def step(self, step: Step) -> None:
        if isinstance(step, Reply):
            self.reply(step)
        elif isinstance(step, FinishJob | ReleaseSlot):
            if not isinstance(self.machine, Producer):
                raise ValidationError(f"{type(step).__name__} steps only apply to a Producer")
            running = sorted(self.machine.running_job_ids)
            if running:
                job_id = running[step.pick % len(running)]
                self.feed(JobFinished(job_id) if isinstance(step, FinishJob) else SlotReleased(job_id))
        elif self.machine.accepts(step):
            self.feed(step)
        # Otherwise a real driver would not send it in this state (e.g. Submit after Stop).

    def reply(self, step: Reply) -> None:
        if not self.log.pending:
            return
        intent = self.log.pending.pop(step.pick % len(self.log.pending))
        if step.ok:
            result = build_result(intent, step.variant, self.log.now, self.next_id)
            if isinstance(intent, ClaimJobs):
                self.next_id += len(result)
            self.feed(IntentSucceeded(intent, result))
        else:
            error: BaseException = (
                TimeoutError("statement timed out") if step.variant % 2 else RuntimeError("database error")
            )
            self.feed(IntentFailed(intent, error, fatal=step.fatal))

    def feed(self, event: Event) -> None:
        before = self.machine.state
        now = self.log.now
        out = self.machine.handle(event, now)
        self.log.handled.append((now, event, out))
        for intent in out.intents:
            if any(intent is p for p in self.log.pending):
                raise self.fail(f"{type(intent).__name__} emitted twice")
            self.log.pending.append(intent)
        in_flight = {id(i) for i in self.machine.in_flight}
        if in_flight != {id(i) for i in self.log.pending}:
            raise self.fail("the machine's intents in flight differ from those the driver must answer")
        if out.next_deadline != self.machine.next_deadline():
            raise self.fail("output.next_deadline differs from next_deadline()")
        if isinstance(self.machine, Producer) and isinstance(out, ProducerOutput):
            self.check_producer(self.machine, out)
        elif isinstance(self.machine, Completer) and isinstance(out, CompleterOutput):
            self.check_completer(self.machine, event, out)
        elif isinstance(self.machine, Elector) and isinstance(out, ElectorOutput):
            self.check_elector(self.machine, before, out)

    # ------------------------------------------------------------ invariants

    def check_producer(self, p: Producer, out: ProducerOutput) -> None:
        claims = [i for i in self.log.pending if isinstance(i, ClaimJobs)]
        if len(claims) > 1:
            raise self.fail("more than one claim in flight")
        if p.active_count > p.config.max_workers:
            raise self.fail(f"{p.active_count} active jobs exceed max_workers={p.config.max_workers}")
        for claim in claims:
            if not 1 <= claim.limit <= p.config.max_workers - p.active_count:
                raise self.fail(f"claim limit {claim.limit} exceeds the free slots")
        if p.paused and any(isinstance(i, ClaimJobs) for i in out.intents):
            raise self.fail("a claim was emitted while paused")
        if out.stopped and (p.running_job_ids or claims):
            raise self.fail("reported stopped with jobs running or a claim in flight")
        for job_id in out.cancel_job_ids:
            if job_id not in p.running_job_ids:
                raise self.fail(f"asked to cancel job {job_id}, which is not running here")

    def check_completer(self, c: Completer, event: Event, out: CompleterOutput) -> None:
        statements = [i for i in self.log.pending if isinstance(i, SetStateIfRunning)]
        if len(statements) > 1:
            raise self.fail("more than one set-state statement in flight")
        if isinstance(event, Submit):
            self.open_ids.add(event.update.id)
        settled = {x.job.id for x in out.completions} | {x.update.id for x in out.missing}
        settled |= {x.update.id for x in out.dropped}
        outstanding = c.outstanding_ids
        self.open_ids -= settled - outstanding
        lost = self.open_ids - outstanding
        if lost:
            raise self.fail(f"updates for jobs {sorted(lost)} vanished without completion, missing or drop")
        if out.stopped and (outstanding or statements):
            raise self.fail("reported stopped with updates outstanding")

    def check_elector(self, e: Elector, before: Any, out: ElectorOutput) -> None:
        now = self.log.now
        if e.is_leader and (e.term is None or now >= e.term.trust_until):
            raise self.fail("leads past its trust window")
        if out.became_leader and not e.is_leader:
            raise self.fail("reported became_leader but is not leader")
        resigns = any(isinstance(i, LeaderResign) for i in out.intents)
        if before is ElectorState.LEADER and not e.is_leader and not out.lost_leadership:
            raise self.fail("left leadership without reporting lost_leadership")
        if resigns and before is ElectorState.LEADER and not out.lost_leadership:
            raise self.fail("resigned without first reporting lost_leadership")
        if out.stopped and e.state is not ElectorState.STOPPED:
            raise self.fail("reported stopped while not stopped")


def drive(machine: Machine, steps: Iterable[tuple[Step, timedelta]], *, start: datetime) -> DriveLog:
    """Play ``steps`` against ``machine`` from ``start``; raise ``InvariantViolation`` on a broken rule.

    Events the machine's table does not accept in its current state are
    skipped (a real driver would not send them); ``Reply``/``FinishJob``/
    ``ReleaseSlot`` with nothing to act on are skipped too. Intent results are
    never skipped: an in-flight intent's answer must be accepted in any state.
    """
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValidationError(f"start must be timezone-aware, got {start!r}")
    driver = _Driver(machine, start)
    for step, advance in steps:
        driver.advance(advance)
        driver.step(step)
    return driver.log
