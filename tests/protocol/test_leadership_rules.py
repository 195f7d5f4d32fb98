"""river_protocol.leadership and the client core's leader-only machines, without I/O."""

from __future__ import annotations

import dataclasses
import json
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
from river_protocol.intents import InsertJobs, LeaderElect, LeaderResign, LeaderRow, Notify
from river_protocol.leadership import (
    Leadership,
    LeadershipState,
    PeriodicJob,
    PeriodicRegistry,
    ServicesStarted,
    Start,
    constructed_args,
)
from river_protocol.machines import periodic as pm
from river_protocol.machines.base import IntentSucceeded, Stop, Tick
from river_protocol.machines.elector import Elector, LeadershipNotification
from river_protocol.machines.notifications import TOPIC_LEADERSHIP, LeadershipPayload, build_request_resign
from river_protocol.options import InsertOpts
from river_protocol.workers import Workers

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class FixedRng:
    def random(self) -> float:
        return 0.5


@dataclasses.dataclass
class Ping:
    kind: ClassVar[str] = "ping"
    n: int = 0


def leading(**kwargs: Any) -> tuple[Leadership, Any]:
    """A Leadership that just won its first term; returns it and that output."""
    machine = Leadership(Elector("me", FixedRng()), FixedRng(), **kwargs)
    machine.handle(Start(), at(0))
    (elect,) = machine.handle(Tick(), at(0)).intents
    assert isinstance(elect, LeaderElect)
    out = machine.handle(IntentSucceeded(elect, LeaderRow("me", at(0), at(15))), at(0.1))
    return machine, out


def test_winning_asks_for_the_services_and_success_leads() -> None:
    machine, out = leading()
    assert out.became_leader and out.start_services == 1 and not out.stop_services
    assert machine.state is LeadershipState.STARTING and machine.is_leader
    out = machine.handle(ServicesStarted(1), at(0.2))
    assert machine.state is LeadershipState.LEADING and out.intents == ()


def test_stop_flags_stop_services_with_the_resign() -> None:
    machine, _ = leading()
    machine.handle(ServicesStarted(1), at(0.2))
    out = machine.handle(Stop(), at(1))
    # Same output: the driver acts on stop_services before it runs the resign.
    assert out.lost_leadership and out.stop_services
    assert [type(i) for i in out.intents] == [LeaderResign]
    assert machine.state is LeadershipState.FOLLOWING
    out = machine.handle(IntentSucceeded(out.intents[0], True), at(1.1))
    assert out.stopped and not out.stop_services


def test_failed_starts_retry_then_request_resign() -> None:
    machine, _ = leading()
    out = machine.handle(ServicesStarted(1, RuntimeError("no")), at(1))
    assert out.stop_services and isinstance(out.start_error, RuntimeError)
    assert machine.state is LeadershipState.RETRY_WAIT and out.start_services is None
    # Back-off 1 s (rng 0.5 = no jitter) before attempt 2.
    assert machine.handle(Tick(), at(1.5)).start_services is None
    out = machine.handle(Tick(), at(2))
    assert out.start_services == 1
    machine.handle(ServicesStarted(1, RuntimeError("no")), at(2))
    out = machine.handle(Tick(), at(4))  # 2 s back-off
    assert out.start_services == 1
    out = machine.handle(ServicesStarted(1, RuntimeError("no")), at(4))
    assert out.resign_requested and out.stop_services
    assert out.intents == (Notify(topic=TOPIC_LEADERSHIP, payloads=(build_request_resign(),)),)
    assert machine.state is LeadershipState.GAVE_UP and machine.is_leader  # the notification does the rest
    out = machine.handle(IntentSucceeded(out.intents[0]), at(4.1))
    assert out.intents == ()
    out = machine.handle(LeadershipNotification(LeadershipPayload("request_resign", "")), at(4.2))
    assert out.lost_leadership and isinstance(out.intents[0], LeaderResign)


def test_poll_only_clients_resign_without_hearing_their_request() -> None:
    machine, _ = leading(max_start_attempts=1, deliver_request_locally=True)
    out = machine.handle(ServicesStarted(1, RuntimeError("no")), at(1))
    assert out.resign_requested and out.lost_leadership and not machine.is_leader
    assert [type(i) for i in out.intents] == [LeaderResign, Notify]


def test_answers_from_an_old_term_are_ignored() -> None:
    machine, _ = leading()
    out = machine.handle(LeadershipNotification(LeadershipPayload("request_resign", "")), at(1))
    assert out.stop_services and out.lost_leadership
    assert machine.handle(ServicesStarted(1), at(1.1)).intents == ()
    assert machine.state is LeadershipState.FOLLOWING
    with pytest.raises(ValidationError):
        Leadership(Elector("me", FixedRng()), FixedRng(), max_start_attempts=0)


def test_notifications_before_start_are_dropped() -> None:
    machine = Leadership(Elector("me", FixedRng()), FixedRng())
    out = machine.handle(LeadershipNotification(LeadershipPayload("resigned", "x")), at(0))
    assert out.intents == () and machine.next_deadline() is None
    machine.handle(Start(), at(0))
    assert machine.next_deadline() == at(0)


# ---------------------------------------------------------------- periodic definitions


def _define(job: PeriodicJob) -> pm.PeriodicJob:
    return pm.PeriodicJob(job.schedule, lambda: None, id=job.id or "")


def test_registry_numbers_definitions_per_term() -> None:
    every = timedelta(seconds=1)
    registry = PeriodicRegistry(_define)
    h1, event = registry.add(PeriodicJob(every, lambda: 1, id="aa"))
    assert event is None  # no enqueuer yet
    h2, _ = registry.add(PeriodicJob(every, lambda: 2))
    with pytest.raises(ValidationError, match="already registered: aa"):
        registry.add(PeriodicJob(every, lambda: 3, id="aa"))
    assert [d.id for d in registry.start_term()] == ["aa", ""]
    h3, event = registry.add(PeriodicJob(every, lambda: 4, id="cc"))
    assert isinstance(event, pm.AddPeriodicJobs) and [d.id for d in event.jobs] == ["cc"]
    assert registry.remove(h3) == (True, pm.RemovePeriodicJobs(handles=(2,)))
    assert registry.remove_by_id("aa") == (True, pm.RemovePeriodicJobs(handles=(0,)))
    assert registry.remove_by_id("aa") == (False, None)
    registry.end_term()
    assert registry.remove(h2) == (True, None)
    assert len(registry) == 0 and h1 != h2


def test_constructed_args_forms() -> None:
    opts = InsertOpts(queue="q")
    assert constructed_args(PeriodicJob(timedelta(seconds=1), lambda: None)) is None
    assert constructed_args(PeriodicJob(timedelta(seconds=1), lambda: Ping(), opts=opts)) == (Ping(), opts)
    other = InsertOpts(priority=2)
    job = PeriodicJob(timedelta(seconds=1), lambda: (Ping(1), other), opts=opts)
    assert constructed_args(job) == (Ping(1), other)
    assert constructed_args(PeriodicJob(timedelta(seconds=1), lambda: (None, other))) is None
    with pytest.raises(ValidationError, match="3-tuple"):
        constructed_args(PeriodicJob(timedelta(seconds=1), lambda: (1, 2, 3)))


# ---------------------------------------------------------------- the client core's machines


def core(dialect: str = "sqlite", **kwargs: Any) -> ClientCore:
    workers = Workers()
    workers.job(Ping)(lambda args: None)
    config = ClientConfig(client_id="me", dialect=dialect, queues={"default": QueueConfig()}, **kwargs)
    return ClientCore(config, workers, FixedRng())


def test_services_per_dialect_and_breakers_for_life() -> None:
    assert set(core("sqlite").make_maintenance_services()) == {
        "job_cleaner", "job_rescuer", "job_scheduler", "queue_cleaner", "sqlite_notification_cleaner",
        "reindexer",
    }
    pg = core("postgres", maintenance=MaintenanceConfig(reindexer=False))
    first = pg.make_maintenance_services()
    assert "reindexer" not in first and "sqlite_notification_cleaner" not in first
    first["job_cleaner"].breaker.trip(T0)
    assert pg.make_maintenance_services()["job_cleaner"].breaker is first["job_cleaner"].breaker
    unstaggered = core(maintenance=MaintenanceConfig(stagger_start=False)).make_maintenance_services()
    from river_protocol.machines.maintenance import Start as ServiceStart

    out = unstaggered["job_scheduler"].handle(ServiceStart(), T0)
    assert out.next_deadline == T0


def test_leadership_needs_queues_and_election() -> None:
    assert core().runs_elector
    assert not core(leader_election=None).runs_elector
    with pytest.raises(ValidationError, match="disabled"):
        core(leader_election=None).make_leadership()
    fast = LeaderElectionConfig(interval=timedelta(milliseconds=200), ttl=timedelta(seconds=2))
    machine = core(leader_election=fast).make_leadership()
    machine.handle(Start(), T0)
    (elect,) = machine.handle(Tick(), T0).intents
    assert isinstance(elect, LeaderElect) and elect.ttl == timedelta(seconds=2)
    assert LeaderElectionConfig().effective_ttl == timedelta(seconds=15)
    with pytest.raises(ValidationError, match="TTL"):
        LeaderElectionConfig(interval=timedelta(seconds=5), ttl=timedelta(seconds=5))


def test_periodic_definition_resolves_like_insert() -> None:
    c = core()
    job = PeriodicJob(timedelta(seconds=1), lambda: Ping(3), id="pp", run_on_start=True)
    definition = c.periodic_definition(job)
    enqueuer = c.make_periodic_enqueuer((definition,))
    out = enqueuer.handle(pm.Start(), T0)
    (insert,) = [i for i in out.intents if isinstance(i, InsertJobs)]
    (params,) = insert.jobs
    assert params.kind == "ping" and json.loads(params.encoded_args) == {"n": 3}
    assert json.loads(params.metadata) == {"river:periodic_job_id": "pp", "periodic": True}
    unknown = c.periodic_definition(PeriodicJob(timedelta(seconds=1), lambda: "text", run_on_start=True))
    out = c.make_periodic_enqueuer((unknown,)).handle(pm.Start(), T0)
    assert out.intents == () and len(out.constructor_errors) == 1


# ---------------------------------------------------------------- random runs against the table


@settings(max_examples=150, deadline=None, database=None)
@given(st.data())
def test_random_runs_stay_within_the_leadership_table(data: st.DataObject) -> None:
    """Every conditional row's choice is checked by the machine; a wrong table raises here.

    Duties are on exactly while the elector leads, whatever the order of events.
    """
    import random

    from river_protocol.intents import Intent
    from river_protocol.machines.base import IntentFailed
    from river_protocol.machines.notifications import ACTION_REQUEST_RESIGN, ACTION_RESIGNED
    from river_protocol.testing.harness import build_result

    machine = Leadership(Elector("me", random.Random(1)), random.Random(2),
                         deliver_request_locally=data.draw(st.booleans()))
    now = at(0)
    pending: list[Intent] = []
    terms: list[int] = []

    def feed(event: Any) -> None:
        out = machine.handle(event, now)
        pending.extend(out.intents)
        if out.start_services is not None:
            terms.append(out.start_services)
        assert (machine.state is not LeadershipState.FOLLOWING) == machine.is_leader

    feed(Start())
    for _ in range(data.draw(st.integers(0, 60))):
        now += timedelta(seconds=data.draw(st.sampled_from([0, 0.5, 1, 5, 14, 30])))
        while (deadline := machine.next_deadline()) is not None and deadline <= now:
            feed(Tick())
        action = data.draw(st.sampled_from(["reply", "reply", "reply", "started", "notify", "stop"]))
        if action == "reply" and pending:
            intent = pending.pop(data.draw(st.integers(0, len(pending) - 1)))
            if data.draw(st.booleans()):
                feed(IntentSucceeded(intent, build_result(intent, data.draw(st.integers(0, 7)), now, 1)))
            else:
                feed(IntentFailed(intent, TimeoutError("slow")))
        elif action == "started" and terms:
            error = RuntimeError("service") if data.draw(st.booleans()) else None
            feed(ServicesStarted(data.draw(st.sampled_from(terms)), error))
        elif action == "notify":
            kind = data.draw(st.sampled_from([ACTION_RESIGNED, ACTION_REQUEST_RESIGN]))
            feed(LeadershipNotification(LeadershipPayload(kind, data.draw(st.sampled_from(["me", "other"])))))
        elif action == "stop":
            feed(Stop())
