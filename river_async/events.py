"""Client events for subscribers: bounded buffers that drop (and count) rather than block.

A slow subscriber must never hold up the completer, so a full subscription
drops new events and counts them in ``dropped``. The event type is
``river_db.events.Event`` (the same values on both drivers).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from river_async import _backend
from river_db.events import Event, SubscriptionTimeoutError, kind_ids
from river_protocol.client_core import EventKind, parse_event_kinds
from river_protocol.errors import ValidationError

__all__ = ["Event", "EventHub", "Subscription", "SubscriptionTimeoutError"]


class Subscription:
    """``async for event in sub``, or ``await sub.get(timeout)``; ``close()`` ends iteration once drained.

    Also a (sync or async) context manager that closes it.
    """

    def __init__(self, hub: EventHub, kinds: frozenset[EventKind], maxsize: int) -> None:
        self.kinds = kinds
        # Tested by member id, as river_sync's is: an Enum member's hash is Python code, an int's is C.
        self._kind_ids = kind_ids(kinds)
        self._hub = hub
        # A deque and one wake-up event, not a memory stream: publishing is on the completer's
        # path, and an unread subscription must be free to be dropped without closing.
        self._buffer: deque[Event] = deque()
        self._maxsize = maxsize
        self._waiter: Any = None  # the loop's Event while a get() waits
        self.dropped = 0
        self.closed = False

    def _offer(self, event: Event) -> None:
        if self.closed:
            return
        ids = self._kind_ids
        if ids is not None and id(event.kind) not in ids:
            return
        if len(self._buffer) >= self._maxsize:
            self.dropped += 1
            return
        self._buffer.append(event)
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()

    async def get(self, timeout: float | None = None) -> Event:
        """The next event, waiting up to ``timeout`` seconds on the loop's clock (None: for ever).

        Raises ``SubscriptionTimeoutError`` when none came in time and ``EOFError``
        once closed and drained, as ``river_sync.Subscription.get`` does.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            event = self.get_nowait()
        except SubscriptionTimeoutError:
            pass
        else:
            # Taken already: a cancel here would lose it, so this checkpoint cannot be cancelled.
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return event
        with anyio.move_on_after(timeout):
            while True:
                try:
                    return self.get_nowait()  # no checkpoint between the wake-up and the take
                except SubscriptionTimeoutError:
                    pass
                if self._waiter is None:
                    self._waiter = _backend.current().Event()
                await self._waiter.wait()
        raise SubscriptionTimeoutError(f"no event within {timeout} s")

    def get_nowait(self) -> Event:
        """``get(timeout=0)`` without waiting: a queued event or ``SubscriptionTimeoutError`` at once."""
        if self._buffer:
            return self._buffer.popleft()
        if self.closed:
            raise EOFError("subscription closed")
        raise SubscriptionTimeoutError("no event queued")

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self.get()
        except EOFError:
            raise StopAsyncIteration from None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._hub._remove(self)
            self._wake()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class EventHub:
    def __init__(self) -> None:
        self._subs: list[Subscription] = []

    def subscribe(self, kinds: Iterable[EventKind | str] | None = None, maxsize: int = 1000) -> Subscription:
        if maxsize < 1:
            raise ValidationError(f"maxsize must be at least 1, got {maxsize}")
        sub = Subscription(self, parse_event_kinds(kinds), maxsize)
        self._subs.append(sub)
        return sub

    def publish(self, event: Event) -> None:
        self.publish_all((event,))

    def publish_all(self, events: Sequence[Event]) -> None:
        """Offer each of ``events``, in order, to every subscription."""
        for sub in list(self._subs):
            for event in events:
                sub._offer(event)

    def _remove(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

    def close_all(self) -> None:
        subs, self._subs = list(self._subs), []
        for sub in subs:
            sub.close()
