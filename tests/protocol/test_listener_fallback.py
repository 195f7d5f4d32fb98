"""A client whose listener hears nothing becomes a poll-only client (ClientCore and the producer)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from river_protocol.client_core import ClientConfig, ClientCore, QueueConfig
from river_protocol.intents import GetQueue, QueueRow, UpsertQueue
from river_protocol.machines.base import IntentSucceeded, Tick
from river_protocol.machines.producer import Producer, ProducerConfig, Start
from river_protocol.workers import Workers

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@dataclass
class _Task:
    kind: ClassVar[str] = "task"


class _Rng:
    def random(self) -> float:
        return 0.0


def _get_queue_after_start(start: Start, *, poll_only: bool = False) -> bool:
    """Whether a producer started with ``start`` polls its queue's settings."""
    p = Producer(ProducerConfig(queue="q", client_id="c", max_workers=1, poll_only=poll_only), _Rng())
    (upsert,) = p.handle(start, T0).intents
    assert isinstance(upsert, UpsertQueue)
    now = T0
    p.handle(IntentSucceeded(upsert, QueueRow(name="q", created_at=T0, updated_at=T0, metadata={},
                                              paused_at=None)), now)
    for _ in range(60):
        now += timedelta(milliseconds=100)
        if any(isinstance(i, GetQueue) for i in p.handle(Tick(), now).intents):
            return True
    return False


def test_a_start_event_can_make_a_producer_poll_only() -> None:
    assert not _get_queue_after_start(Start())
    assert _get_queue_after_start(Start(poll_only=True))
    assert _get_queue_after_start(Start(), poll_only=True)  # the configuration alone still does


def test_listener_unavailable_turns_the_client_core_poll_only() -> None:
    workers = Workers()
    workers.job(_Task)(lambda args: None)
    core = ClientCore(ClientConfig(client_id="c", dialect="postgres", queues={"default": QueueConfig()}),
                      workers, _Rng())
    assert core.producer_start() == Start(poll_only=False)
    assert not core.make_leadership()._deliver_locally
    core.listener_unavailable()
    assert core.config.notifications is False
    assert core.producer_start() == Start(poll_only=True)
    assert core.make_leadership()._deliver_locally
    assert core.make_producer("other", QueueConfig()).config.poll_only
