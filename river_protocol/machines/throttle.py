"""The per-process insert-notification throttle (docs/protocol.md §5.4).

A queue is announced on ``river_insert`` at most once per fetch cooldown per
client process. The send time is recorded when permission is granted, before
the transaction commits, exactly like Go: a rolled-back insert still uses up
the window, which only costs a poll interval of latency.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from river_protocol.constants import FETCH_COOLDOWN_DEFAULT
from river_protocol.errors import ValidationError
from river_protocol.intents import InsertParams, Notify
from river_protocol.machines.base import require_aware
from river_protocol.machines.notifications import TOPIC_INSERT, build_insert
from river_protocol.states import JobState


class InsertNotifyThrottle:
    def __init__(self, cooldown: timedelta = FETCH_COOLDOWN_DEFAULT) -> None:
        if cooldown <= timedelta(0):
            raise ValidationError(f"insert notification cooldown must be positive, got {cooldown}")
        self.cooldown = cooldown
        self._last_sent: dict[str, datetime] = {}

    def admit(self, queues: Iterable[str], now: datetime) -> tuple[str, ...]:
        """The queues (deduplicated, first-seen order) allowed a notification now; records them sent."""
        require_aware(now)
        admitted: list[str] = []
        for queue in dict.fromkeys(queues):
            last = self._last_sent.get(queue)
            if last is not None and now - last < self.cooldown:
                continue
            self._last_sent[queue] = now
            admitted.append(queue)
        return tuple(admitted)

    def notify_for_queues(self, queues: Iterable[str], now: datetime) -> Notify | None:
        """The ``river_insert`` Notify intent for the admitted queues, or None when none passed."""
        admitted = self.admit(queues, now)
        if not admitted:
            return None
        return Notify(topic=TOPIC_INSERT, payloads=tuple(build_insert(q) for q in admitted))

    def notify_for_insert(self, jobs: Iterable[InsertParams], now: datetime) -> Notify | None:
        """Notify for an insert batch: only rows *requested* as available count (§5.4 step 1)."""
        return self.notify_for_queues((j.queue for j in jobs if j.state == JobState.AVAILABLE), now)

    def forget_before(self, horizon: datetime) -> None:
        """Drop records older than ``horizon`` so a process with many short-lived queues stays small."""
        for queue in [q for q, at in self._last_sent.items() if at < horizon]:
            del self._last_sent[queue]
