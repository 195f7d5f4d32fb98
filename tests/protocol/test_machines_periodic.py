"""Periodic enqueuer: next runs, one InsertJobs per fire, metadata, run-on-start, add/remove."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import InsertJobs, InsertParams, Notify
from river_protocol.machines.base import IntentSucceeded, Stop, Tick
from river_protocol.machines.periodic import (
    AddPeriodicJobs,
    ClearPeriodicJobs,
    PeriodicEnqueuer,
    PeriodicJob,
    PeriodicOutput,
    RemovePeriodicJobs,
    Start,
    mark_periodic,
)
from river_protocol.machines.throttle import InsertNotifyThrottle

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class FixedRng:
    def random(self) -> float:
        return 0.25


class Every:
    def __init__(self, seconds: float) -> None:
        self.step = timedelta(seconds=seconds)

    def next(self, after: datetime) -> datetime | None:
        return after + self.step


def make(kind: str, metadata: bytes = b"{}") -> PeriodicJob:
    return PeriodicJob(Every(10), lambda: InsertParams(kind=kind, encoded_args=b"{}", metadata=metadata))


def insert_of(out: PeriodicOutput) -> InsertJobs:
    inserts = [i for i in out.intents if isinstance(i, InsertJobs)]
    assert len(inserts) == 1, out.intents
    return inserts[0]


def test_due_jobs_go_out_in_one_insert_with_planned_times() -> None:
    e = PeriodicEnqueuer(
        FixedRng(), jobs=(make("a"), PeriodicJob(Every(20.05), make("b").constructor, id="b_id"))
    )
    out = e.handle(Start(), at(0))
    assert out.intents == () and out.next_deadline == at(10)
    insert = insert_of(e.handle(Tick(), at(10)))
    assert [(j.kind, j.scheduled_at) for j in insert.jobs] == [("a", at(10))]
    assert json.loads(insert.jobs[0].metadata) == {"periodic": True}
    assert insert.nonce == "4000000000000000"
    out = e.handle(Tick(), at(20))  # b (20.05) is within the 100 ms margin: both go out
    insert = insert_of(out)
    assert [(j.kind, j.scheduled_at) for j in insert.jobs] == [("a", at(20)), ("b", at(20.05))]
    assert json.loads(insert.jobs[1].metadata) == {"river:periodic_job_id": "b_id", "periodic": True}
    assert out.next_deadline == at(30)
    assert e.next_run_of(1) == at(40.1)
    e.handle(IntentSucceeded(insert, []), at(20))


def test_run_on_start_and_skip_and_constructor_errors() -> None:
    def boom() -> InsertParams:
        raise RuntimeError("bad")

    e = PeriodicEnqueuer(
        FixedRng(),
        jobs=(
            PeriodicJob(Every(10), make("a").constructor, run_on_start=True),
            PeriodicJob(Every(10), lambda: None, run_on_start=True),
            PeriodicJob(Every(10), boom, id="boom", run_on_start=True),
        ),
    )
    out = e.handle(Start(), at(0))
    insert = insert_of(out)
    assert [(j.kind, j.scheduled_at) for j in insert.jobs] == [("a", at(0))]
    assert [i for i, _ in out.constructor_errors] == ["boom"]


def test_constructor_scheduled_at_wins_and_metadata_kept() -> None:
    job = PeriodicJob(
        Every(5),
        lambda: InsertParams(
            kind="a", encoded_args=b"{}", scheduled_at=at(99), metadata=b'{"x":1,"periodic":false}'
        ),
    )
    e = PeriodicEnqueuer(FixedRng(), jobs=(job,))
    e.handle(Start(), at(0))
    insert = insert_of(e.handle(Tick(), at(5)))
    assert insert.jobs[0].scheduled_at == at(99)
    assert insert.jobs[0].metadata == b'{"x":1,"periodic":true}'


def test_add_and_remove_at_runtime() -> None:
    e = PeriodicEnqueuer(FixedRng())
    out = e.handle(Start(), at(0))
    assert out.next_deadline == at(0) + timedelta(hours=24)
    out = e.handle(
        AddPeriodicJobs((PeriodicJob(Every(3), make("a").constructor, id="xx", run_on_start=True),)), at(1)
    )
    assert out.handles == (0,) and out.next_deadline == at(4)
    assert [j.kind for j in insert_of(out).jobs] == ["a"]
    with pytest.raises(ValidationError):
        e.handle(AddPeriodicJobs((PeriodicJob(Every(3), make("b").constructor, id="xx"),)), at(2))
    out = e.handle(RemovePeriodicJobs(ids=("xx",)), at(2))
    assert out.next_deadline == at(2) + timedelta(hours=24)
    e.handle(AddPeriodicJobs((make("c"),)), at(3))
    out = e.handle(ClearPeriodicJobs(), at(4))
    assert e.handle(Tick(), at(100)).intents == ()


def test_throttled_notify_follows_insert() -> None:
    e = PeriodicEnqueuer(FixedRng(), InsertNotifyThrottle(), jobs=(make("a"),))
    e.handle(Start(), at(0))
    out = e.handle(Tick(), at(10))
    assert out.intents[1] == Notify("river_insert", ('{"queue":"default"}',))


@pytest.mark.parametrize("bad_id", ["x" * 128, "bad id", "-x"])
def test_id_validation(bad_id: str) -> None:
    with pytest.raises(ValidationError):
        PeriodicJob(Every(1), lambda: None, id=bad_id)


def test_duplicate_ids_in_one_add_rejected() -> None:
    with pytest.raises(ValidationError):
        PeriodicEnqueuer(
            FixedRng(),
            jobs=(PeriodicJob(Every(1), lambda: None, id="a"), PeriodicJob(Every(1), lambda: None, id="a")),
        )


def test_illegal_events() -> None:
    e = PeriodicEnqueuer(FixedRng())
    with pytest.raises(ProtocolError):
        e.handle(Tick(), at(0))
    e.handle(Start(), at(0))
    with pytest.raises(ProtocolError):
        e.handle(Start(), at(0))
    e.handle(Stop(), at(1))
    with pytest.raises(ProtocolError):
        e.handle(Start(), at(2))


def test_registry_changes_that_cross_the_stop_are_dropped() -> None:
    # The registry lives with the driver; the next term's enqueuer starts from it.
    e = PeriodicEnqueuer(FixedRng(), jobs=(make("a"),))
    e.handle(Start(), at(0))
    e.handle(Stop(), at(1))
    for event in (AddPeriodicJobs((make("b"),)), RemovePeriodicJobs(handles=(0,)), ClearPeriodicJobs()):
        out = e.handle(event, at(2))
        assert out.intents == () and out.handles == () and out.next_deadline is None


def test_mark_periodic_rejects_non_object() -> None:
    with pytest.raises(ValidationError):
        mark_periodic(InsertParams(kind="a", encoded_args=b"{}", metadata=b"[]"), "")
