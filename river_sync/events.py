"""Client events for subscribers: bounded queues that drop (and count) rather than block.

A slow subscriber must never hold up the completer, so a full subscription
drops new events and counts them in ``dropped``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from river_db.events import Event, SubscriptionTimeoutError
from river_protocol.client_core import EventKind, parse_event_kinds
from river_protocol.errors import ValidationError

_CLOSED: Any = object()


class Subscription:
    """Iterate it, or ``get(timeout)``; ``close()`` ends iteration. Also a context manager."""

    def __init__(self, hub: EventHub, kinds: frozenset[EventKind], maxsize: int) -> None:
        self.kinds = kinds
        self._hub = hub
        # SimpleQueue: put and get are one C call each, where queue.Queue takes a Python-level
        # Condition per event; the bound is kept by _offer, under the hub's lock.
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._maxsize = maxsize
        self.dropped = 0
        self.closed = False

    def _offer(self, event: Event) -> None:
        """Called with the hub's lock held: publishers never race past ``maxsize``."""
        self._offer_all((event,))

    def _offer_all(self, events: Sequence[Event]) -> None:
        """``_offer`` each of ``events`` in order (the hub's lock held), the checks made once."""
        if self.closed:
            return
        kinds, queue = self.kinds, self._queue
        room = self._maxsize - queue.qsize()
        for event in events:
            if event.kind not in kinds:
                continue
            if room <= 0:  # full when last looked: look again, a reader may have made room
                room = self._maxsize - queue.qsize()
                if room <= 0:
                    self.dropped += 1
                    continue
            queue.put(event)
            room -= 1

    def get(self, timeout: float | None = None) -> Event:
        """The next event, waiting up to ``timeout`` seconds (None: for ever).

        Raises ``SubscriptionTimeoutError`` when none came in time and ``EOFError``
        once closed and drained.
        """
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise SubscriptionTimeoutError(f"no event within {timeout} s") from None
        if item is _CLOSED:
            self._queue.put_nowait(_CLOSED)
            raise EOFError("subscription closed")
        assert isinstance(item, Event)
        return item

    def get_nowait(self) -> Event:
        """``get(timeout=0)``: a queued event or ``SubscriptionTimeoutError`` at once."""
        return self.get(timeout=0)

    def __iter__(self) -> Iterator[Event]:
        while True:
            try:
                yield self.get()
            except EOFError:
                return

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._hub._remove(self)
            self._queue.put(_CLOSED)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventHub:
    def __init__(self) -> None:
        self._subs: list[Subscription] = []
        self._lock = threading.Lock()

    def subscribe(self, kinds: Iterable[EventKind | str] | None = None, maxsize: int = 1000) -> Subscription:
        if maxsize < 1:
            raise ValidationError(f"maxsize must be at least 1, got {maxsize}")
        sub = Subscription(self, parse_event_kinds(kinds), maxsize)
        with self._lock:
            self._subs.append(sub)
        return sub

    def publish(self, event: Event) -> None:
        self.publish_all((event,))

    def publish_all(self, events: Sequence[Event]) -> None:
        """Offer each of ``events``, in order, to every subscription (one lock for them all)."""
        with self._lock:  # offering never blocks
            for sub in self._subs:
                sub._offer_all(events)

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def close_all(self) -> None:
        with self._lock:
            subs, self._subs = list(self._subs), []
        for sub in subs:
            sub.close()
