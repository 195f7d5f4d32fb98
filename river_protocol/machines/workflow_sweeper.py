"""The workflow sweeper: one Python client at a time promotes the dependents of tasks finalized
by anyone (a Go worker, a Python client that died before promoting, an operator), whoever
holds River's ``river_leader``.

Every Python client that works jobs runs this service, leader election or not: River's
leader may be a Go client, which knows nothing of our workflows, and
``leader_election_disabled`` is River's switch for River's maintenance, not for ours
(docs/guides/workflows.md, "Who sweeps"). Which of them sweeps is decided by a lease of our
own, row ``workflow_sweeper`` of ``river_py_lease`` (the python migration line), never by
River's leader row:

* every ``LEASE_CHECK_EVERY`` intervals a client asks for the lease (``HoldLease``): its
  holder renews it, the others are refused until it lapses, ``LEASE_TTL_INTERVALS`` intervals
  after its last renewal (a holder that died is replaced within that);
* the holder sweeps every interval (``WorkflowPromoterJob``: a full sweep when it takes the
  lease and every minute after, the workflows with recent ends between), and gives the lease
  up when it stops, so another client takes it at its next check.

The lease keeps the sweep's cost to one client, not its correctness: two sweepers at once
(a holder that has not yet seen its lease lapse, and its successor) are safe, since every
promotion and cancellation is an update guarded by ``state = 'pending'`` and moves a task
once (tests/protocol/test_workflow_model.py runs several promoters at once).

Without the python line (no ``river_py_lease`` table) the sweep falls back to River's leader,
as before the lease existed: a client sweeps while ``river_leader`` names it, read at each
check; the output says once what is missing, and a client that never leads says that it
will not sweep at all.

Why a lease row, and not the two other ways considered:

* Postgres advisory locks: a session lock is held by one connection for as long as it
  sweeps, which PgBouncer's transaction pooling breaks and a pooled client does not keep; a
  transaction lock only makes the sweeps take turns, every client still sweeping once per
  interval; and SQLite has neither, so it would need a lease row anyway (two mechanisms).
* Every client sweeping on a jittered interval: correct (the model above), but its cost
  grows with the fleet: each run between full sweeps reads every row finalized in the last
  ``SINCE_MARGIN`` and more, and each full sweep every pending task, once per client per
  interval. The lease costs one upsert per client every ``LEASE_CHECK_EVERY`` intervals.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from river_protocol import constants as C
from river_protocol.errors import ValidationError
from river_protocol.intents import GetLeader, HoldLease, Intent, LeaderRow, ReleaseLease
from river_protocol.machines.base import Rng, Stop
from river_protocol.machines.maintenance import (
    MaintenanceOutput,
    MaintenanceService,
    Step,
    WorkflowPromoterJob,
)
from river_protocol.machines.throttle import InsertNotifyThrottle

LEASE_NAME = "workflow_sweeper"
LEASE_CHECK_EVERY = 5  # intervals between two asks for the lease (River's elector: 5 s of 1 s)
LEASE_TTL_INTERVALS = 15  # intervals a lease lasts after its last renewal (River's leader: 15 s)
SERVICE_NAME = "workflow_sweeper"

MISSING_LINE = (
    "river: the workflow sweeper's lease table river_py_lease is missing (run `river migrate-up "
    "--line python`); until then only River's leader, when it is a Python client, promotes the "
    "dependents of tasks other clients finalized"
)
MISSING_LINE_NEVER_LEADS = (
    "river: the workflow sweeper's lease table river_py_lease is missing (run `river migrate-up "
    "--line python`) and this client never leads River (leader election disabled): it promotes only "
    "the dependents of the tasks it finalizes itself"
)


@dataclass(frozen=True, slots=True)
class SweeperOutput(MaintenanceOutput):
    notices: tuple[str, ...] = ()  # what the driver logs (at info), each once per client
    sweeping: bool = False  # whether this client is the sweeper now (lease, or River's leader)


class WorkflowSweeperJob:
    """One sweeper run: ask for the lease when a check is due, then sweep if this client holds it."""

    batched = True

    def __init__(self, client_id: str, interval: timedelta, *, elects: bool = True,
                 throttle: InsertNotifyThrottle | None = None) -> None:
        if not client_id:
            raise ValidationError("the workflow sweeper needs the client's id")
        if interval <= timedelta(0):
            raise ValidationError(f"the workflow sweeper's interval must be positive, got {interval}")
        self.client_id, self.elects, self.throttle = client_id, elects, throttle
        self.check_every = interval * LEASE_CHECK_EVERY
        self.ttl = interval * LEASE_TTL_INTERVALS
        self.sweeping = False  # this client sweeps (until ``_trust_until``)
        self.via_lease = False  # ... because it holds the lease (given up at stop)
        self.notices: list[str] = []
        self._noticed = False
        self._check_at: datetime | None = None
        self._trust_until: datetime | None = None
        self._asked_at: datetime | None = None
        self._promoter: WorkflowPromoterJob | None = None
        self._in_sweep = False

    def begin(self, now: datetime) -> None:
        self._in_sweep = False
        if self.sweeping and self._trust_until is not None and now >= self._trust_until:
            self._set(False, via_lease=self.via_lease)  # renewals failed past the lease's life

    def first(self, now: datetime, batch_size: int) -> Intent | None:
        if self._in_sweep:  # the next page of this run's sweep
            assert self._promoter is not None
            return self._promoter.first(now, batch_size)
        if self._check_at is None or now >= self._check_at:
            self._asked_at = now
            return HoldLease(LEASE_NAME, self.client_id, self.ttl)
        return self._sweep(now, batch_size) if self.sweeping else None

    def on_result(self, intent: Intent, result: Any, now: datetime, batch_size: int) -> Step:
        if isinstance(intent, HoldLease):
            self._check_at = now + self.check_every
            if result is None:
                return self._without_lease_table()
            self._set(bool(result), via_lease=True)
            # Trusted for the lease's life from when it was asked (the database's expiry is
            # counted from its own now, which is later).
            self._trust_until = (self._asked_at or now) + self.ttl
            return Step(next=self._sweep(now, batch_size)) if self.sweeping else Step()
        if isinstance(intent, GetLeader):
            row: LeaderRow | None = result
            self._set(row is not None and row.leader_id == self.client_id, via_lease=False)
            # Past the next check, so that a check answered "still leads" goes on with the
            # same term; checks that fail for a whole period end it.
            self._trust_until = (self._asked_at or now) + 2 * self.check_every
            return Step(next=self._sweep(now, batch_size)) if self.sweeping else Step()
        assert self._promoter is not None
        return self._promoter.on_result(intent, result, now, batch_size)

    def release(self) -> ReleaseLease | None:
        """The statement giving up the lease at stop (None unless this client holds it)."""
        if not (self.sweeping and self.via_lease):
            return None
        self._set(False, via_lease=False)
        return ReleaseLease(LEASE_NAME, self.client_id)

    def _without_lease_table(self) -> Step:
        if not self._noticed:
            self._noticed = True
            self.notices.append(MISSING_LINE if self.elects else MISSING_LINE_NEVER_LEADS)
        if not self.elects:
            self._set(False, via_lease=False)
            return Step()
        return Step(next=GetLeader())

    def _set(self, sweeping: bool, *, via_lease: bool) -> None:
        if sweeping and not self.sweeping:
            # A new term of sweeping starts with a full sweep: ends seen by nobody meanwhile.
            self._promoter = WorkflowPromoterJob(self.throttle)
        if not sweeping:
            self._promoter = None
        self.sweeping, self.via_lease = sweeping, via_lease and sweeping

    def _sweep(self, now: datetime, batch_size: int) -> Intent | None:
        assert self._promoter is not None
        self._in_sweep = True
        self._promoter.begin(now)
        return self._promoter.first(now, batch_size)


class WorkflowSweeper(MaintenanceService):
    """``MaintenanceService`` running a ``WorkflowSweeperJob``; it gives up its lease at stop."""

    job: WorkflowSweeperJob

    def handle(self, event: Any, now: datetime) -> SweeperOutput:
        out: SweeperOutput = super().handle(event, now)  # type: ignore[assignment]
        return out

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> SweeperOutput:
        base = super()._output(intents, deadline)
        notices, self.job.notices = tuple(self.job.notices), []
        return SweeperOutput(intents=base.intents, next_deadline=base.next_deadline, runs=base.runs,
                             stopped=base.stopped, notices=notices, sweeping=self.job.sweeping)

    def _on_stop(self, event: Stop, now: datetime) -> None:
        super()._on_stop(event, now)
        release = self.job.release()
        if release is not None:
            self._emit(release, self._timeout)


def workflow_sweeper(rng: Rng, client_id: str, *, elects: bool = True,
                     throttle: InsertNotifyThrottle | None = None,
                     interval: timedelta = C.WORKFLOW_PROMOTER_INTERVAL,
                     stagger: bool = True) -> WorkflowSweeper:
    """The sweeper of a client with id ``client_id`` that takes part in River's elections or not
    (``elects``: whether the fallback without the lease table may ever make it sweep)."""
    job = WorkflowSweeperJob(client_id, interval, elects=elects, throttle=throttle)
    return WorkflowSweeper(SERVICE_NAME, job, rng, interval=interval, stagger=stagger)
