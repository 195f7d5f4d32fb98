"""The non-waiting client logic both drivers share (river_db.client_support)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

import pytest

from river_db.client_support import (
    accepts_triggers,
    election_config,
    report_completer_output,
    report_producer_output,
)
from river_db.events import Event, SubscriptionTimeoutError
from river_db.testing.builder import build_job
from river_protocol.args import arg_field
from river_protocol.client_core import EventKind, LeaderElectionConfig
from river_protocol.errors import ValidationError
from river_protocol.machines.completer import CompleterOutput, Completion, CompletionReason
from river_protocol.machines.producer import ProducerOutput, QueueEvent, QueueEventKind

log = logging.getLogger("test.client_common")


@dataclass
class Ping:
    kind: ClassVar[str] = "ping"
    n: int = arg_field(json="n")


def test_election_config() -> None:
    custom = LeaderElectionConfig()
    assert election_config(custom) is custom
    assert isinstance(election_config(True), LeaderElectionConfig)
    assert election_config(False) is None
    with pytest.raises(ValidationError, match="leader_election must be a bool"):
        election_config("yes")  # type: ignore[arg-type]


def test_accepts_triggers_only_after_start() -> None:
    class Runner:
        class machine:
            class state:
                value = "new"

    assert not accepts_triggers(Runner)
    Runner.machine.state.value = "starting"
    assert not accepts_triggers(Runner)
    Runner.machine.state.value = "running"
    assert accepts_triggers(Runner)


def test_report_producer_output(caplog: pytest.LogCaptureFixture) -> None:
    events: list[Event] = []
    paused = QueueEvent(QueueEventKind.PAUSED, "q")
    out = ProducerOutput(queue_events=(paused,), start_error=RuntimeError("x"))
    with caplog.at_level(logging.ERROR, logger="test.client_common"):
        report_producer_output("q", out, events.append, log)
    assert [(e.kind, e.queue) for e in events] == [(EventKind.QUEUE_PAUSED, "q")]
    assert "producer for queue 'q' failed to start: x" in caplog.text


def test_report_completer_output(caplog: pytest.LogCaptureFixture) -> None:
    events: list[Event] = []
    job = build_job(Ping(1), id=7)
    gone = build_job(Ping(2), id=8)
    out = CompleterOutput(completions=(
        Completion(job, CompletionReason.SNOOZED, persisted=CompletionReason.CANCELLED),
        Completion(gone, CompletionReason.COMPLETED, persisted=None),  # the row was no longer running
    ))
    with caplog.at_level(logging.INFO, logger=log.name):
        report_completer_output(out, events.extend, log)
    assert [(e.kind, e.job.id if e.job else None, e.queue) for e in events] == [
        (EventKind.JOB_CANCELLED, 7, job.queue)
    ]
    assert "job 8 was no longer running" in caplog.text


def test_sync_subscription_bound_counts_events_across_batches_and_frees_as_read() -> None:
    from river_sync.events import EventHub as SyncHub

    def events(*ids: int) -> list[Event]:
        return [Event(EventKind.JOB_COMPLETED, job=build_job(Ping(i), id=i)) for i in ids]

    hub = SyncHub()
    sub = hub.subscribe(maxsize=3)
    hub.publish_all(events(1, 2))
    hub.publish_all(events(3, 4))  # one place left: 3 is kept, 4 dropped
    assert sub.dropped == 1
    assert [sub.get_nowait().job.id for _ in range(2)] == [1, 2]  # type: ignore[union-attr]
    hub.publish_all(events(5, 6, 7))  # two read, so two places: 5 and 6
    assert sub.dropped == 2
    assert [e.job.id for e in (sub.get(timeout=1) for _ in range(3))] == [3, 5, 6]  # type: ignore[union-attr]
    with pytest.raises(SubscriptionTimeoutError):
        sub.get(timeout=0.01)
    hub.publish(events(8)[0])
    sub.close()
    assert [e.job.id for e in sub] == [8]  # type: ignore[union-attr]  # drained, then the end
    with pytest.raises(EOFError):
        sub.get_nowait()


def test_publish_all_offers_each_event_in_order_within_kinds_and_bounds() -> None:
    import trio

    from river_sync.events import EventHub as SyncHub
    from river_trio.events import EventHub as TrioHub

    def batch() -> list[Event]:
        return [Event(EventKind.JOB_COMPLETED, job=build_job(Ping(i), id=i)) for i in (1, 2, 3)] + [
            Event(EventKind.JOB_FAILED, job=build_job(Ping(4), id=4))]

    hub = SyncHub()
    done, capped = hub.subscribe([EventKind.JOB_COMPLETED]), hub.subscribe(maxsize=2)
    hub.publish_all(batch())
    assert [done.get_nowait().job.id for _ in range(3)] == [1, 2, 3]  # type: ignore[union-attr]
    assert [capped.get_nowait().job.id for _ in range(2)] == [1, 2]  # type: ignore[union-attr]
    assert capped.dropped == 2

    async def on_trio() -> None:
        hub = TrioHub()
        sub = hub.subscribe([EventKind.JOB_FAILED, EventKind.JOB_COMPLETED])
        hub.publish_all(batch())
        assert [sub.get_nowait().job.id for _ in range(4)] == [1, 2, 3, 4]  # type: ignore[union-attr]

    trio.run(on_trio)


def test_kind_ids_is_the_filter_by_member_id_and_none_for_every_kind() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from river_db.events import kind_ids

    assert kind_ids(frozenset(EventKind)) is None

    @given(st.frozensets(st.sampled_from(list(EventKind)), min_size=1))
    def agrees(kinds: frozenset[EventKind]) -> None:
        ids = kind_ids(kinds)
        for kind in EventKind:  # the id test says what the member test says
            assert (ids is None or id(kind) in ids) == (kind in kinds)

    agrees()


@pytest.mark.parametrize("hub_module", ["river_sync.events", "river_trio.events"])
def test_subscription_filters_by_kind_on_both_drivers(hub_module: str) -> None:
    import importlib

    hub = importlib.import_module(hub_module).EventHub()
    failed = hub.subscribe(["job_failed"])
    every = hub.subscribe()
    kinds = list(EventKind)
    for kind in kinds:
        hub.publish(Event(kind))
    hub.publish_all([Event(kind) for kind in kinds])
    assert [failed.get_nowait().kind for _ in range(2)] == [EventKind.JOB_FAILED] * 2
    assert [every.get_nowait().kind for _ in range(2 * len(kinds))] == kinds * 2
    for sub in (failed, every):
        with pytest.raises(SubscriptionTimeoutError):
            sub.get_nowait()


def test_sync_subscription_bound_holds_for_publish_one_at_a_time() -> None:
    from river_sync.events import EventHub as SyncHub

    hub = SyncHub()
    sub = hub.subscribe(maxsize=2)
    for i in (1, 2, 3):
        hub.publish(Event(EventKind.JOB_COMPLETED, job=build_job(Ping(i), id=i)))
    assert sub.dropped == 1
    assert sub.get_nowait().job.id == 1  # type: ignore[union-attr]
    hub.publish(Event(EventKind.JOB_COMPLETED, job=build_job(Ping(4), id=4)))  # room again
    assert [sub.get_nowait().job.id for _ in range(2)] == [2, 4]  # type: ignore[union-attr]
    assert sub.dropped == 1


def test_sync_subscription_get_waits_for_another_threads_publish_and_close_ends_every_reader() -> None:
    import threading

    from river_sync.events import EventHub as SyncHub

    hub = SyncHub()
    sub = hub.subscribe()
    with pytest.raises(ValueError):
        sub.get(timeout=-1)
    got: list[object] = []
    started = threading.Barrier(3)

    def reader() -> None:
        started.wait()
        got.extend(sub)  # blocks in get() until an event or the close

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    started.wait()
    for i in range(1, 51):  # published while the readers wait: each is taken exactly once
        hub.publish(Event(EventKind.JOB_COMPLETED, job=build_job(Ping(i), id=i)))
    hub.publish_all([Event(EventKind.QUEUE_PAUSED, queue="q")] * 10)
    deadline = 100
    while sum(1 for _ in got) < 60 and deadline:
        threading.Event().wait(0.01)
        deadline -= 1
    sub.close()
    for t in readers:
        t.join(timeout=5)
        assert not t.is_alive()
    assert len(got) == 60
    with pytest.raises(EOFError):
        sub.get(timeout=1)  # closed and drained: at once, not after the timeout
