"""The workflow sweeper (river_protocol.machines.workflow_sweeper): one Python client at a time
sweeps, chosen by its own lease whoever leads River; River's leader row only without the
python line. Driven event by event on a fake clock; a hypothesis model runs several clients on
one in-memory lease table."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.client_core import (
    ClientConfig,
    ClientCore,
    LeaderElectionConfig,
    MaintenanceConfig,
    QueueConfig,
)
from river_protocol.errors import ValidationError
from river_protocol.intents import (
    GetLeader,
    HoldLease,
    LeaderRow,
    PromoteWorkflowTasks,
    PromotionResult,
    ReleaseLease,
)
from river_protocol.machines.base import IntentFailed, IntentSucceeded, Stop, Tick
from river_protocol.machines.maintenance import Start
from river_protocol.machines.workflow_sweeper import (
    LEASE_CHECK_EVERY,
    LEASE_NAME,
    LEASE_TTL_INTERVALS,
    MISSING_LINE,
    MISSING_LINE_NEVER_LEADS,
    SweeperOutput,
    WorkflowSweeper,
    WorkflowSweeperJob,
    workflow_sweeper,
)
from river_protocol.workers import Workers

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def sweeper(client_id: str = "me", *, elects: bool = True) -> WorkflowSweeper:
    s = workflow_sweeper(random.Random(1), client_id, elects=elects, interval=SECOND, stagger=False)
    s.handle(Start(), T0)
    return s


def run(s: WorkflowSweeper, now: datetime, answers: dict[type, Any]) -> tuple[list[Any], SweeperOutput]:
    """One tick at ``now``, each statement answered from ``answers`` by its type; the intents seen."""
    seen: list[Any] = []
    out = s.handle(Tick(), now)
    pending = list(out.intents)
    while pending:
        intent = pending.pop(0)
        seen.append(intent)
        answer = answers[type(intent)]
        event = IntentFailed(intent, answer) if isinstance(answer, BaseException) else IntentSucceeded(
            intent, answer)
        out = s.handle(event, now)
        pending += out.intents
    return seen, out


def kinds(seen: list[Any]) -> list[type]:
    return [type(i) for i in seen]


NOTHING = PromotionResult(0, 0)


def test_the_lease_holder_sweeps_every_interval_and_renews_every_few() -> None:
    s = sweeper()
    seen, out = run(s, T0, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    assert kinds(seen) == [HoldLease, PromoteWorkflowTasks] and out.sweeping
    hold = seen[0]
    assert (hold.name, hold.holder, hold.ttl) == (LEASE_NAME, "me", SECOND * LEASE_TTL_INTERVALS)
    assert seen[1].sweep  # a new term of sweeping starts with a full sweep
    assert s.next_deadline() == T0 + SECOND
    for i in range(1, LEASE_CHECK_EVERY):
        seen, _ = run(s, T0 + i * SECOND, {PromoteWorkflowTasks: NOTHING})
        assert kinds(seen) == [PromoteWorkflowTasks] and seen[0].finished_since is not None
    seen, _ = run(s, T0 + LEASE_CHECK_EVERY * SECOND, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    assert kinds(seen) == [HoldLease, PromoteWorkflowTasks]


def test_a_refused_client_sweeps_nothing_and_asks_again_at_its_next_check() -> None:
    s = sweeper()
    seen, out = run(s, T0, {HoldLease: False})
    assert kinds(seen) == [HoldLease] and not out.sweeping
    for i in range(1, LEASE_CHECK_EVERY):
        seen, _ = run(s, T0 + i * SECOND, {})
        assert seen == []
    seen, out = run(s, T0 + LEASE_CHECK_EVERY * SECOND, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    assert kinds(seen) == [HoldLease, PromoteWorkflowTasks] and seen[1].sweep and out.sweeping


def test_a_full_page_sweeps_on_after_the_lease() -> None:
    s = sweeper()
    seen, _ = run(s, T0, {HoldLease: True, PromoteWorkflowTasks: PromotionResult(10_000, 77)})
    assert kinds(seen) == [HoldLease, PromoteWorkflowTasks]
    out = s.handle(Tick(), s.next_deadline() or T0)  # the batch pause is over: the next page
    assert isinstance(out.intents[0], PromoteWorkflowTasks) and out.intents[0].after_id == 77


def test_a_lost_lease_stops_the_sweep_and_a_regained_one_starts_with_a_full_sweep() -> None:
    s = sweeper()
    run(s, T0, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    at = T0 + LEASE_CHECK_EVERY * SECOND
    seen, out = run(s, at, {HoldLease: False})
    assert kinds(seen) == [HoldLease] and not out.sweeping
    at += LEASE_CHECK_EVERY * SECOND
    seen, _ = run(s, at, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    assert seen[1].sweep


def test_the_sweep_stops_when_renewals_fail_past_the_leases_life() -> None:
    s = sweeper()
    run(s, T0, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    down = RuntimeError("database down")
    at = T0 + LEASE_CHECK_EVERY * SECOND
    seen, out = run(s, at, {HoldLease: down})
    assert kinds(seen) == [HoldLease] and out.runs[-1].error is down and out.sweeping
    seen, _ = run(s, at + SECOND, {HoldLease: down})  # the failed check is asked again each run
    assert kinds(seen) == [HoldLease]
    seen, out = run(s, T0 + LEASE_TTL_INTERVALS * SECOND, {HoldLease: down})
    assert kinds(seen) == [HoldLease] and not out.sweeping


def test_stop_gives_the_lease_up_only_when_held() -> None:
    s = sweeper()
    run(s, T0, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    out = s.handle(Stop(), T0 + SECOND)
    assert out.intents == (ReleaseLease(LEASE_NAME, "me"),) and out.stopped and not out.sweeping
    assert s.handle(IntentSucceeded(out.intents[0], True), T0 + SECOND).intents == ()
    refused = sweeper()
    run(refused, T0, {HoldLease: False})
    assert refused.handle(Stop(), T0).intents == ()


def test_without_the_lease_table_river_leader_sweeps_and_the_notice_comes_once() -> None:
    s = sweeper()
    me = LeaderRow("me", T0, T0 + 15 * SECOND)
    seen, out = run(s, T0, {HoldLease: None, GetLeader: me, PromoteWorkflowTasks: NOTHING})
    assert kinds(seen) == [HoldLease, GetLeader, PromoteWorkflowTasks] and out.sweeping
    notices = [n for o in [out] for n in o.notices]
    assert notices == [] or notices == [MISSING_LINE]
    seen, out = run(s, T0 + SECOND, {PromoteWorkflowTasks: NOTHING})
    assert kinds(seen) == [PromoteWorkflowTasks] and out.notices == ()
    for i in range(2, LEASE_CHECK_EVERY + 1):
        seen, out = run(s, T0 + i * SECOND, {HoldLease: None, GetLeader: me, PromoteWorkflowTasks: NOTHING})
    # Still leading at the next check: the same term goes on (no new full sweep).
    assert kinds(seen) == [HoldLease, GetLeader, PromoteWorkflowTasks] and not seen[-1].sweep
    go = LeaderRow("a-go-client", T0, T0 + 15 * SECOND)
    seen, out = run(s, T0 + 2 * LEASE_CHECK_EVERY * SECOND, {HoldLease: None, GetLeader: go})
    assert kinds(seen) == [HoldLease, GetLeader] and not out.sweeping and out.notices == ()
    # Nothing to release: River's row is the elector's.
    assert s.handle(Stop(), T0 + 11 * SECOND).intents == ()


def test_without_the_lease_table_failed_checks_end_the_sweep_after_a_period() -> None:
    s = sweeper()
    me = LeaderRow("me", T0, T0 + 15 * SECOND)
    run(s, T0, {HoldLease: None, GetLeader: me, PromoteWorkflowTasks: NOTHING})
    down = RuntimeError("database down")
    seen, out = run(s, T0 + LEASE_CHECK_EVERY * SECOND, {HoldLease: down})
    assert kinds(seen) == [HoldLease] and out.sweeping
    seen, out = run(s, T0 + 2 * LEASE_CHECK_EVERY * SECOND, {HoldLease: down})
    assert kinds(seen) == [HoldLease] and not out.sweeping


def test_missing_table_notice_is_reported() -> None:
    s = sweeper()
    out = s.handle(Tick(), T0)
    out = s.handle(IntentSucceeded(out.intents[0], None), T0)
    assert out.notices == (MISSING_LINE,) and isinstance(out.intents[0], GetLeader)


def test_without_the_lease_table_a_client_that_never_leads_never_sweeps() -> None:
    s = sweeper(elects=False)
    out = s.handle(Tick(), T0)
    out = s.handle(IntentSucceeded(out.intents[0], None), T0)
    assert out.intents == () and out.notices == (MISSING_LINE_NEVER_LEADS,) and not out.sweeping
    seen, out = run(s, T0 + LEASE_CHECK_EVERY * SECOND, {HoldLease: None})
    assert kinds(seen) == [HoldLease] and out.notices == ()


def test_with_the_lease_table_a_client_that_never_leads_sweeps_like_any_other() -> None:
    s = sweeper(elects=False)
    seen, out = run(s, T0, {HoldLease: True, PromoteWorkflowTasks: NOTHING})
    assert kinds(seen) == [HoldLease, PromoteWorkflowTasks] and out.sweeping


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValidationError, match="client's id"):
        WorkflowSweeperJob("", SECOND)
    with pytest.raises(ValidationError, match="must be positive"):
        WorkflowSweeperJob("me", timedelta(0))


@dataclasses.dataclass
class Ping:
    kind: ClassVar[str] = "ping"


def _core(**kwargs: Any) -> ClientCore:
    workers = Workers()
    workers.job(Ping)(lambda args: None)
    config = ClientConfig(client_id="me", dialect="sqlite", **kwargs)
    return ClientCore(config, workers, random.Random(1))


def test_core_runs_the_sweeper_on_working_clients_leader_election_or_not() -> None:
    queues = {"default": QueueConfig()}
    interval = timedelta(milliseconds=100)
    working = _core(queues=queues, leader_election=None,
                    maintenance=MaintenanceConfig(workflow_promoter_interval=interval))
    assert working.runs_workflow_sweeper
    made = working.make_workflow_sweeper()
    assert made.name == "workflow_sweeper" and not made.job.elects
    assert made.job.check_every == interval * LEASE_CHECK_EVERY
    assert made.job.ttl == interval * LEASE_TTL_INTERVALS
    assert working.make_workflow_sweeper().breaker is made.breaker  # one breaker for the client's life
    assert _core(queues=queues, leader_election=LeaderElectionConfig()).make_workflow_sweeper().job.elects
    assert not _core().runs_workflow_sweeper  # an insert-only client sweeps nothing


# ---------------------------------------------------------------- several clients, one lease table


class LeaseTable:
    """``river_py_lease``'s one row as the dialects' upsert treats it, on a shared clock."""

    def __init__(self) -> None:
        self.holder: str | None = None
        self.expires_at = T0

    def hold(self, intent: HoldLease, now: datetime) -> bool:
        if self.holder in (None, intent.holder) or self.expires_at < now:
            self.holder, self.expires_at = intent.holder, now + intent.ttl
            return True
        return False

    def release(self, intent: ReleaseLease) -> bool:
        if self.holder == intent.holder:
            self.holder = None
            return True
        return False


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_model_one_sweeper_at_a_time_and_never_none_for_long(data: st.DataObject) -> None:
    """Clients start, stop, crash and stall (are not run for a while) at random, on one clock
    ticking a second a step. Claims: two clients sweep in one step only within a lease's life
    of the lease changing hands (a stalled holder that has not yet seen it go); while some
    client runs, one sweeps again within one check plus one lease's life."""
    table = LeaseTable()
    clients: dict[str, WorkflowSweeper] = {}
    stalled: dict[str, int] = {}  # client -> steps it is not run for
    serial = 0
    now = T0
    last_handover = T0
    quiet_since: datetime | None = None  # no sweep since, with some client running
    ttl = SECOND * LEASE_TTL_INTERVALS
    bound = SECOND * (LEASE_CHECK_EVERY + LEASE_TTL_INTERVALS + 2)

    def start() -> None:
        nonlocal serial
        serial += 1
        s = workflow_sweeper(random.Random(serial), f"c{serial}", interval=SECOND,
                             stagger=data.draw(st.booleans()))
        s.handle(Start(), now)
        clients[f"c{serial}"] = s

    def feed(s: WorkflowSweeper, intents: tuple[Any, ...]) -> bool:
        nonlocal last_handover
        swept = False
        pending = list(intents)
        while pending:
            intent = pending.pop(0)
            if isinstance(intent, HoldLease):
                before = table.holder
                answer: Any = table.hold(intent, now)
                if answer and before != intent.holder:
                    last_handover = now
            elif isinstance(intent, ReleaseLease):
                answer = table.release(intent)
            else:
                assert isinstance(intent, PromoteWorkflowTasks)
                swept = True
                answer = NOTHING
            pending += s.handle(IntentSucceeded(intent, answer), now).intents
        return swept

    start()
    for _ in range(data.draw(st.integers(20, 80))):
        action = data.draw(st.sampled_from(("tick", "tick", "tick", "start", "stop", "crash", "stall")))
        if action == "start" and len(clients) < 4:
            start()
        elif action in ("stop", "crash", "stall") and clients:
            name = data.draw(st.sampled_from(sorted(clients)))
            if action == "stall":
                stalled[name] = data.draw(st.integers(1, 25))
            else:
                s = clients.pop(name)
                stalled.pop(name, None)
                if action == "stop":
                    feed(s, s.handle(Stop(), now).intents)
        now += SECOND
        sweepers = []
        for name in sorted(clients):
            if stalled.get(name, 0) > 0:
                stalled[name] -= 1
                continue
            if feed(clients[name], clients[name].handle(Tick(), now).intents):
                sweepers.append(name)
        if len(sweepers) > 1:
            assert now - last_handover <= ttl + SECOND, "two sweepers long after the lease changed hands"
        running = [name for name in clients if not stalled.get(name)]
        if sweepers or not running:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        else:
            assert now - quiet_since <= bound, "nobody swept for too long"
