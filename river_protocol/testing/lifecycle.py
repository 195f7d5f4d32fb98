"""River's job lifecycle as a hypothesis state machine.

``JobLifecycleMachine`` keeps a model ``river_job`` table and lets hypothesis
interleave everything that moves jobs: inserts (available, scheduled,
pending; unique or not), producer claims, work outcomes turned into
set-state requests by ``outcome_to_update`` and applied by
``apply_set_state``, late (stale) completions, the scheduler, the rescuer,
the cancel/retry/delete APIs, the job cleaner and the clock. Every state
change is checked against ``states.check_transition`` and every step against
River's invariants:

* no illegal transition, for any actor;
* ``finalized_at`` is set iff the state is finalized;
* ``attempt`` counts claims minus the attempts snoozes and interrupts gave
  back, never exceeds ``max_attempts``, and ``len(errors) <= attempt``;
* ``metadata.snoozes`` equals the number of snoozes recorded for the job;
* ``errors`` grows by exactly one per failure, cancel, discard or rescue;
* a finalized job is never claimed (unless the retry API revived it);
* a failed job's retry is never scheduled before the failure;
* at most one row per unique key sits in a state its ``unique_states`` covers.

Parameterise it with your own retry policy and unique options, either by
subclassing (add ``@invariant`` methods or override ``on_transition``)::

    class MyRules(JobLifecycleMachine):
        retry_policy = MyRetryPolicy()
        unique_opts = UniqueOpts(by_args=True, by_period=timedelta(minutes=5))

    TestMyRules = MyRules.TestCase

or through ``run_lifecycle(retry_policy=..., unique_opts=..., settings=...)``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from river_protocol.constants import MAX_ATTEMPTED_BY, SCHEDULER_INTERVAL
from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import RescueUpdate
from river_protocol.job import AttemptError, JobRow
from river_protocol.machines.maintenance import WorkerInfo, rescue_decision
from river_protocol.options import InsertOpts, resolve_insert_params
from river_protocol.outcomes import (
    CANCEL_ATTEMPTED_AT_KEY,
    SNOOZES_KEY,
    Cancel,
    Completed,
    Discard,
    Failed,
    Interrupted,
    Outcome,
    Snooze,
    apply_cancel,
    apply_set_state,
    gjson_int,
    outcome_to_update,
)
from river_protocol.retry import DefaultRetryPolicy, RetryPolicy
from river_protocol.states import Actor, JobState, check_transition
from river_protocol.testing.harness import InvariantViolation
from river_protocol.testing.strategies import outcomes
from river_protocol.unique import STATE_BITS, UniqueOpts

__all__ = ["InvariantViolation", "JobLedger", "JobLifecycleMachine", "run_lifecycle"]

S = JobState
LIFECYCLE_START = datetime(2025, 1, 1, tzinfo=UTC)
# A kind no worker is registered for: the rescuer discards it.
ORPHAN_KIND = "river_testing_orphan"
KINDS = ("river_testing_alpha", "river_testing_beta", ORPHAN_KIND)
ARGS = (b'{"n":1}', b'{"n":2}', b'{"n":1,"x":"y"}')
CONFLICT_KEY = "unique_key_conflict"


@dataclass(slots=True)
class JobLedger:
    """What the model expects of one job, counted independently of the row."""

    claims: int = 0
    refunds: int = 0  # attempts given back by snoozes and interrupts
    snoozes: int = 0
    errors: int = 0
    finalized: bool = False  # finalized and not revived by the retry API since

    @property
    def attempt(self) -> int:
        return self.claims - self.refunds


class _Rng:
    """A fixed draw, for APIs that take a ``random.Random``-like source."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def _in_bitmask(row: JobRow) -> bool:
    return (
        row.unique_key is not None
        and row.unique_states is not None
        and bool(row.unique_states & STATE_BITS[row.state])
    )


_ADVANCES = st.one_of(
    st.sampled_from([timedelta(seconds=s) for s in (1, 5, 6, 30, 300, 3600, 5400)]),
    st.timedeltas(timedelta(microseconds=1), timedelta(hours=2)),
)
_RAND = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


class JobLifecycleMachine(RuleBasedStateMachine):
    """A model job table driven through River's lifecycle; see the module docstring.

    Class attributes configure it: ``retry_policy`` (a ``RetryPolicy``),
    ``unique_opts`` (applied to inserts that ask for uniqueness; ``None``
    disables unique inserts), ``max_attempts_range``, ``job_timeout``,
    ``rescue_after``, ``client_id`` and ``start``.
    """

    retry_policy: ClassVar[RetryPolicy] = DefaultRetryPolicy()
    unique_opts: ClassVar[UniqueOpts | None] = UniqueOpts(by_args=True)
    max_attempts_range: ClassVar[tuple[int, int]] = (1, 4)
    job_timeout: ClassVar[timedelta] = timedelta(minutes=1)
    rescue_after: ClassVar[timedelta] = timedelta(hours=1)
    client_id: ClassVar[str] = "client_a"
    start: ClassVar[datetime] = LIFECYCLE_START
    outcome_strategy: ClassVar[st.SearchStrategy[Outcome]] = outcomes(max_snooze=timedelta(minutes=10))

    def __init__(self) -> None:
        super().__init__()
        self.now = self.start
        self.jobs: dict[int, JobRow] = {}
        self.ledger: dict[int, JobLedger] = {}
        self.next_id = 1
        self.transitions: list[tuple[int, JobState | None, Actor, JobState | None]] = []
        self.workers: Mapping[str, WorkerInfo] = {k: WorkerInfo() for k in KINDS if k != ORPHAN_KIND}

    # ------------------------------------------------------------ hooks

    def on_transition(self, job_id: int, before: JobRow | None, actor: Actor, after: JobRow | None) -> None:
        """Called after every row change (``None`` = no row); override to add checks."""

    def _move(self, job_id: int, actor: Actor, after: JobRow | None) -> None:
        before = self.jobs.get(job_id)
        old = before.state if before is not None else None
        new = after.state if after is not None else None
        if old != new or actor in (Actor.INSERT, Actor.PRODUCER, Actor.RETRY_API):
            try:
                check_transition(old, actor, new)
            except ProtocolError as exc:
                raise InvariantViolation(f"job {job_id}: {exc}") from None
            self.transitions.append((job_id, old, actor, new))
        if after is None:
            self.jobs.pop(job_id, None)
            self.ledger.pop(job_id, None)
        else:
            self.jobs[job_id] = after
            if after.state.finalized and (before is None or not before.state.finalized):
                self.ledger[job_id].finalized = True
        self.on_transition(job_id, before, actor, after)

    def _ids(self, *states: JobState) -> list[int]:
        return sorted(i for i, row in self.jobs.items() if row.state in states)

    def _pick(self, data: st.DataObject, ids: list[int]) -> int:
        return data.draw(st.sampled_from(ids), label="job")

    # ------------------------------------------------------------ insert

    @rule(
        kind=st.sampled_from(KINDS),
        args=st.sampled_from(ARGS),
        how=st.sampled_from(["available", "available", "scheduled_future", "scheduled_past", "pending"]),
        delay=st.timedeltas(timedelta(seconds=1), timedelta(hours=1)),
        unique=st.booleans(),
        max_attempts=st.integers(1, 25),
    )
    def insert(
        self, kind: str, args: bytes, how: str, delay: timedelta, unique: bool, max_attempts: int
    ) -> None:
        low, high = self.max_attempts_range
        scheduled_at = {"scheduled_future": self.now + delay, "scheduled_past": self.now - delay}.get(how)
        opts = InsertOpts(
            max_attempts=low + max_attempts % (high - low + 1),
            scheduled_at=scheduled_at,
            pending=how == "pending",
            unique_opts=self.unique_opts if unique else None,
        )
        params = resolve_insert_params(
            kind, args, insert_opts=opts, args_opts=None, unique_fields=(), now=self.now
        )
        row = JobRow(
            id=self.next_id, kind=params.kind, encoded_args=params.encoded_args, state=params.state,
            queue=params.queue, priority=params.priority, max_attempts=params.max_attempts,
            created_at=self.now, scheduled_at=params.scheduled_at or self.now,
            metadata=json.loads(params.metadata), tags=params.tags,
            unique_key=params.unique_key, unique_states=params.unique_states,
        )
        if _in_bitmask(row) and any(
            _in_bitmask(other) and other.unique_key == row.unique_key for other in self.jobs.values()
        ):
            return  # River returns the existing row, flagged as a skipped duplicate
        self.next_id += 1
        self.ledger[row.id] = JobLedger()
        self._move(row.id, Actor.INSERT, row)

    @initialize(kind=st.sampled_from(KINDS), max_attempts=st.integers(1, 25))
    def seed_job(self, kind: str, max_attempts: int) -> None:
        """Every run starts with one available job, so work rules apply from the first steps."""
        self.insert(kind, ARGS[0], "available", timedelta(seconds=1), False, max_attempts)

    # ------------------------------------------------------------ producer

    def _claimable(self) -> list[JobRow]:
        due = [r for r in self.jobs.values() if r.state is S.AVAILABLE and r.scheduled_at is not None
               and r.scheduled_at <= self.now]
        return sorted(due, key=lambda r: (r.priority, r.scheduled_at, r.id))

    @precondition(lambda self: bool(self._claimable()))
    @rule(limit=st.integers(1, 3))
    def claim(self, limit: int) -> None:
        for row in self._claimable()[:limit]:
            ledger = self.ledger[row.id]
            if ledger.finalized:
                raise InvariantViolation(f"job {row.id} was claimed again after it was finalized")
            attempted_by = (*row.attempted_by, self.client_id)[-MAX_ATTEMPTED_BY:]
            claimed = dataclasses.replace(
                row, state=S.RUNNING, attempt=row.attempt + 1, attempted_at=self.now,
                attempted_by=attempted_by,
            )
            ledger.claims += 1
            self._move(row.id, Actor.PRODUCER, claimed)

    # ------------------------------------------------------------ completer

    @precondition(lambda self: bool(self._ids(S.RUNNING)))
    @rule(data=st.data(), rand=_RAND, remote=st.booleans(), handler_cancel=st.booleans(),
          took=st.timedeltas(timedelta(0), timedelta(seconds=30)))
    def work(
        self, data: st.DataObject, rand: float, remote: bool, handler_cancel: bool, took: timedelta
    ) -> None:
        outcome = data.draw(self.outcome_strategy, label="outcome")
        self._work(data, outcome, rand, remote, handler_cancel, took)

    @precondition(lambda self: bool(self._ids(S.RUNNING)))
    @rule(data=st.data(), failure=outcomes(kinds=(Failed,)), rand=_RAND)
    def fail(self, data: st.DataObject, failure: Outcome, rand: float) -> None:
        """Failures get a rule of their own: retries and discards need several in a row."""
        self._work(data, failure, rand, False, False, timedelta(seconds=1))

    def _work(
        self, data: st.DataObject, outcome: Outcome, rand: float, remote: bool, handler_cancel: bool,
        took: timedelta,
    ) -> None:
        job_id = self._pick(data, self._ids(S.RUNNING))
        row = self.jobs[job_id]
        remote_cancelled = remote and CANCEL_ATTEMPTED_AT_KEY in row.metadata
        started = row.attempted_at or self.now
        finished = max(self.now, started + took)
        update = outcome_to_update(
            row, outcome, now=finished, started_at=started, retry_policy=self.retry_policy, rand=rand,
            error_handler_cancel=handler_cancel, remote_cancelled=remote_cancelled,
        )
        after = apply_set_state(row, update, finished)
        self._expect_work(row, after, outcome, remote_cancelled, handler_cancel, finished)
        self._move(job_id, Actor.COMPLETER, after)

    def _expect_work(
        self, row: JobRow, after: JobRow, outcome: Outcome, remote: bool, handler_cancel: bool, now: datetime
    ) -> None:
        """River's rules for a run's end, written independently of ``outcome_to_update``."""
        ledger = self.ledger[row.id]
        final: Outcome = outcome
        if remote and not isinstance(outcome, Completed):
            final = Cancel("job cancelled remotely")
        elif handler_cancel and isinstance(outcome, Failed):
            final = Cancel(outcome.error)
        pending_cancel = CANCEL_ATTEMPTED_AT_KEY in row.metadata
        expected: set[JobState]
        if isinstance(final, Completed):
            expected = {S.COMPLETED}
        elif isinstance(final, Snooze):
            ledger.snoozes += 1
            soon = final.duration_ns <= SCHEDULER_INTERVAL // timedelta(microseconds=1) * 1000
            if not soon and pending_cancel:
                expected = {S.CANCELLED}
            else:
                expected = {S.AVAILABLE if soon else S.SCHEDULED}
                ledger.refunds += 1
        elif isinstance(final, Interrupted):
            expected = {S.AVAILABLE}
            ledger.refunds += 1
        elif isinstance(final, Cancel):
            expected, ledger.errors = {S.CANCELLED}, ledger.errors + 1
        elif isinstance(final, Discard):
            expected, ledger.errors = {S.DISCARDED}, ledger.errors + 1
        else:
            ledger.errors += 1
            if row.attempt >= row.max_attempts:
                expected = {S.DISCARDED}
            else:
                expected = {S.AVAILABLE, S.CANCELLED if pending_cancel else S.RETRYABLE}
                retried = after.state in (S.AVAILABLE, S.RETRYABLE)
                if retried and (after.scheduled_at is None or after.scheduled_at < now):
                    raise InvariantViolation(
                        f"job {row.id}: retry scheduled at {after.scheduled_at}, before {now}"
                    )
        if after.state not in expected:
            names = ", ".join(sorted(s.value for s in expected))
            raise InvariantViolation(
                f"job {row.id}: {type(outcome).__name__} led to {after.state.value}, expected {names}"
            )

    @precondition(lambda self: any(r.attempt > 0 and r.state is not S.RUNNING for r in self.jobs.values()))
    @rule(data=st.data(), rand=_RAND)
    def late_completion(self, data: st.DataObject, rand: float) -> None:
        """A worker finishes after its job left ``running`` (rescued, or cancelled and retried)."""
        job_id = self._pick(data, sorted(i for i, r in self.jobs.items() if r.attempt > 0
                                         and r.state is not S.RUNNING))
        row = self.jobs[job_id]
        outcome = data.draw(self.outcome_strategy, label="outcome")
        as_running = dataclasses.replace(row, state=S.RUNNING)
        update = outcome_to_update(as_running, outcome, now=self.now, started_at=row.attempted_at or self.now,
                                   retry_policy=self.retry_policy, rand=rand)
        after = apply_set_state(row, update, self.now)
        fields = ("state", "attempt", "errors", "finalized_at", "scheduled_at", "max_attempts")
        changed = [f for f in fields if getattr(after, f) != getattr(row, f)]
        if changed:
            raise InvariantViolation(f"job {job_id}: a stale completion changed {', '.join(changed)}")
        if isinstance(outcome, Snooze):
            self.ledger[job_id].snoozes += 1  # the metadata merge still applies, as in River
        self._move(job_id, Actor.COMPLETER, after)

    # ------------------------------------------------------------ maintenance

    @rule()
    def schedule(self) -> None:
        """The scheduler: due retryable/scheduled jobs become available, unique conflicts discarded."""
        horizon = self.now + SCHEDULER_INTERVAL
        due = sorted(
            (r for r in self.jobs.values() if r.state in (S.RETRYABLE, S.SCHEDULED)
             and r.scheduled_at is not None and r.scheduled_at <= horizon),
            key=lambda r: (r.priority, r.scheduled_at, r.id),
        )
        snapshot = dict(self.jobs)
        seen_keys: set[bytes] = set()
        for row in due:
            discard = False
            if row.unique_key is not None and row.unique_states is not None:
                conflict = any(o.id != row.id and o.unique_key == row.unique_key and _in_bitmask(o)
                               for o in snapshot.values())
                discard = conflict or row.unique_key in seen_keys
                seen_keys.add(row.unique_key)
            if discard:
                after = dataclasses.replace(row, state=S.DISCARDED, finalized_at=self.now,
                                            metadata={**row.metadata, CONFLICT_KEY: "scheduler_discarded"})
            else:
                after = dataclasses.replace(row, state=S.AVAILABLE)
            self._move(row.id, Actor.SCHEDULER, after)

    @precondition(lambda self: bool(self._ids(S.RUNNING)))
    @rule(rand=_RAND)
    def rescue(self, rand: float) -> None:
        """The rescuer: running jobs attempted before the stuck horizon are retried or finalized."""
        horizon = self.now - self.rescue_after
        for job_id in self._ids(S.RUNNING):
            row = self.jobs[job_id]
            if row.attempted_at is None or row.attempted_at >= horizon:
                continue
            decision = rescue_decision(
                row, self.now, self.workers, self.job_timeout, self.retry_policy, _Rng(rand)
            )
            if decision is None:
                continue
            self.ledger[job_id].errors += 1
            self._move(job_id, Actor.RESCUER, self._apply_rescue(row, decision))

    @staticmethod
    def _apply_rescue(row: JobRow, update: RescueUpdate) -> JobRow:
        patch = json.loads(update.metadata_updates)
        return dataclasses.replace(
            row, state=update.state, finalized_at=update.finalized_at, scheduled_at=update.scheduled_at,
            errors=(*row.errors, AttemptError.from_json(json.loads(update.error))),
            metadata={**row.metadata, **patch},
        )

    @precondition(lambda self: any(r.state.finalized for r in self.jobs.values()))
    @rule(data=st.data())
    def clean(self, data: st.DataObject) -> None:
        """The job cleaner deletes a finalized job (retention is not modelled)."""
        job_id = self._pick(data, self._ids(S.CANCELLED, S.COMPLETED, S.DISCARDED))
        self._move(job_id, Actor.JOB_CLEANER, None)

    # ------------------------------------------------------------ client APIs

    @precondition(lambda self: bool(self.jobs))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job_id = self._pick(data, sorted(self.jobs))
        row = self.jobs[job_id]
        after = apply_cancel(row, cancel_attempted_at=self.now, now=self.now)
        if row.state.finalized and after != row:
            raise InvariantViolation(f"job {job_id}: cancelling a finalized job changed it")
        if after is not row:
            self._move(job_id, Actor.CANCEL_API, after)

    @precondition(lambda self: bool(self.jobs))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        """The retry API: any non-running job is made available now (max_attempts bumped if spent)."""
        job_id = self._pick(data, sorted(self.jobs))
        row = self.jobs[job_id]
        if row.state is S.RUNNING:
            return
        if row.state is S.AVAILABLE and row.scheduled_at is not None and row.scheduled_at < self.now:
            return
        after = dataclasses.replace(
            row, state=S.AVAILABLE, finalized_at=None, scheduled_at=self.now,
            max_attempts=row.max_attempts + 1 if row.attempt == row.max_attempts else row.max_attempts,
        )
        if _in_bitmask(after) and not _in_bitmask(row) and any(
            o.id != job_id and o.unique_key == after.unique_key and _in_bitmask(o) for o in self.jobs.values()
        ):
            return  # the unique index refuses it; River returns the error
        self.ledger[job_id].finalized = False
        self._move(job_id, Actor.RETRY_API, after)

    @precondition(lambda self: any(r.state is not S.RUNNING for r in self.jobs.values()))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        job_id = self._pick(data, sorted(i for i, r in self.jobs.items() if r.state is not S.RUNNING))
        self._move(job_id, Actor.DELETE_API, None)

    @rule(by=_ADVANCES)
    def advance_clock(self, by: timedelta) -> None:
        self.now += by

    def _next_due(self) -> datetime | None:
        waiting = [r.scheduled_at for r in self.jobs.values()
                   if r.state in (S.AVAILABLE, S.RETRYABLE, S.SCHEDULED) and r.scheduled_at is not None
                   and r.scheduled_at > self.now]
        return min(waiting, default=None)

    @precondition(lambda self: self._next_due() is not None)
    @rule()
    def advance_to_next_due(self) -> None:
        """Jump to the next scheduled time, so retries and snoozes come due within a run."""
        due = self._next_due()
        assert due is not None
        self.now = due

    # ------------------------------------------------------------ invariants

    @invariant()
    def finalized_at_iff_finalized(self) -> None:
        for row in self.jobs.values():
            if (row.finalized_at is not None) != row.state.finalized:
                raise InvariantViolation(
                    f"job {row.id}: state {row.state.value} with finalized_at={row.finalized_at}"
                )

    @invariant()
    def attempts_and_errors_accounted(self) -> None:
        for row in self.jobs.values():
            ledger = self.ledger[row.id]
            if row.attempt != ledger.attempt:
                raise InvariantViolation(
                    f"job {row.id}: attempt {row.attempt}, "
                    f"but {ledger.claims} claims - {ledger.refunds} refunds"
                )
            if row.attempt > row.max_attempts:
                raise InvariantViolation(
                    f"job {row.id}: attempt {row.attempt} > max_attempts {row.max_attempts}"
                )
            if len(row.errors) != ledger.errors:
                raise InvariantViolation(f"job {row.id}: {len(row.errors)} errors, expected {ledger.errors}")
            if len(row.errors) > row.attempt:
                raise InvariantViolation(f"job {row.id}: {len(row.errors)} errors in {row.attempt} attempts")
            snoozes = gjson_int(row.metadata.get(SNOOZES_KEY))
            if snoozes != ledger.snoozes:
                raise InvariantViolation(
                    f"job {row.id}: metadata snoozes={snoozes}, expected {ledger.snoozes}"
                )
            if row.state is S.RUNNING and (row.attempted_at is None or not row.attempted_by):
                raise InvariantViolation(f"job {row.id}: running without attempted_at/attempted_by")

    @invariant()
    def unique_keys_held_once(self) -> None:
        holders: dict[bytes, int] = {}
        for row in self.jobs.values():
            if _in_bitmask(row):
                assert row.unique_key is not None
                if row.unique_key in holders:
                    raise InvariantViolation(
                        f"jobs {holders[row.unique_key]} and {row.id} both hold unique key "
                        f"{row.unique_key.hex()[:12]}..."
                    )
                holders[row.unique_key] = row.id


def run_lifecycle(
    *,
    retry_policy: RetryPolicy | None = None,
    unique_opts: UniqueOpts | Any | None = ...,
    max_attempts_range: tuple[int, int] | None = None,
    settings: Settings | None = None,
    machine: type[JobLifecycleMachine] = JobLifecycleMachine,
) -> None:
    """Run ``machine`` (default ``JobLifecycleMachine``) with the given rules; raise on a violation.

    ``unique_opts`` left out keeps the machine's own; pass ``None`` to disable unique inserts::

        run_lifecycle(retry_policy=MyPolicy(), settings=settings(max_examples=50))
    """
    attrs: dict[str, Any] = {}
    if retry_policy is not None:
        attrs["retry_policy"] = retry_policy
    if unique_opts is not ...:
        if unique_opts is not None and not isinstance(unique_opts, UniqueOpts):
            raise ValidationError(f"unique_opts must be UniqueOpts or None, got {type(unique_opts).__name__}")
        attrs["unique_opts"] = unique_opts
    if max_attempts_range is not None:
        low, high = max_attempts_range
        if not 1 <= low <= high:
            raise ValidationError(
                f"max_attempts_range must satisfy 1 <= low <= high, got {max_attempts_range}"
            )
        attrs["max_attempts_range"] = max_attempts_range
    configured = type(f"Configured{machine.__name__}", (machine,), attrs) if attrs else machine
    run_state_machine_as_test(configured, settings=settings)  # type: ignore[no-untyped-call,unused-ignore]  # untyped in newer hypothesis

