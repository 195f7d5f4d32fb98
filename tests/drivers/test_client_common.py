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
from river_db.events import SubscriptionTimeoutError
from river_db.testing.builder import build_job
from river_protocol.args import arg_field
from river_protocol.client_core import EventKind, LeaderElectionConfig
from river_protocol.errors import ValidationError
from river_protocol.machines.completer import CompleterOutput, Completion, CompletionReason
from river_protocol.machines.producer import ProducerOutput, QueueEvent, QueueEventKind
from river_sync.events import Event

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
