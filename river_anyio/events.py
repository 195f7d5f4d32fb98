"""Client events for subscribers: bounded buffers that drop (and count) rather than block.

A slow subscriber must never hold up the completer, so a full subscription
drops new events and counts them in ``dropped``. The event type is
``river_db.events.Event`` (the same values on every client).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from river_anyio import _backend
from river_db.events import Event, SubscriptionTimeoutError, kind_ids
from river_protocol.client_core import EventKind, parse_event_kinds
from river_protocol.errors import ValidationError

if True:  # ASYNC
    import anyio
    import anyio.lowlevel
else:
    import time
    from collections.abc import Iterator

__all__ = ["Event", "EventHub", "Subscription", "SubscriptionTimeoutError"]


class Subscription:
    """Iterate it (``async for`` on the async clients), or ``get(timeout)``; ``close()`` ends
    iteration once drained. Also a context manager (sync or async on the async clients)."""

    def __init__(self, hub: EventHub, kinds: frozenset[EventKind], maxsize: int) -> None:
        self.kinds = kinds
        # The filter as the members' ids: EventKind is an Enum, whose __hash__ is Python code run
        # for every ``kind in kinds``, where an int's hash is C. None (every kind) tests nothing.
        self._kind_ids = kind_ids(kinds)
        self._hub = hub
        # A deque: append and popleft are one C call each and atomic, so publishers (under the
        # hub's lock, which keeps the bound) and readers share it without a lock of their own,
        # and an unread subscription is free to be dropped without closing. A publisher wakes a
        # reader only when one is waiting (``_waiters`` is true).
        self._buffer: deque[Event] = deque()
        if True:  # ASYNC
            self._waiter: Any = None  # the loop's Event while a get() waits
            self._waiters = 0  # 1 while _waiter is set
        else:
            # Only a reader that must wait takes _ready (_waiters is raised under _ready before
            # the reader looks at the deque again).
            self._ready = threading.Condition(threading.Lock())
            self._waiters = 0
        self._maxsize = maxsize
        self.dropped = 0
        self.closed = False

    def _offer(self, event: Event) -> None:
        """Called with the hub's lock held: publishers never race past ``maxsize``.

        ``_offer_all`` for one event, written out: ``publish`` is called once per event.
        """
        if self.closed:
            return
        ids = self._kind_ids
        if ids is not None and id(event.kind) not in ids:
            return
        buffer = self._buffer
        if len(buffer) >= self._maxsize:
            self.dropped += 1
            return
        buffer.append(event)
        if self._waiters:
            self._wake()

    def _offer_all(self, events: Sequence[Event]) -> None:
        """``_offer`` each of ``events`` in order (the hub's lock held), the checks made once."""
        if self.closed:
            return
        ids, buffer = self._kind_ids, self._buffer
        room = self._maxsize - len(buffer)
        offered = False
        for event in events:
            if ids is not None and id(event.kind) not in ids:
                continue
            if room <= 0:  # full when last looked: look again, a reader may have made room
                room = self._maxsize - len(buffer)
                if room <= 0:
                    self.dropped += 1
                    continue
            buffer.append(event)
            room -= 1
            offered = True
        if offered and self._waiters:
            self._wake()

    def _wake(self, everyone: bool = False) -> None:
        if True:  # ASYNC
            # The one loop Event wakes every waiting reader; each takes what is there or waits again.
            waiter, self._waiter, self._waiters = self._waiter, None, 0
            if waiter is not None:
                waiter.set()
        else:
            with self._ready:
                if everyone:
                    self._ready.notify_all()
                else:
                    self._ready.notify()

    async def get(self, timeout: float | None = None) -> Event:
        """The next event, waiting up to ``timeout`` seconds (None: for ever; the loop's clock on
        the async clients).

        Raises ``SubscriptionTimeoutError`` when none came in time and ``EOFError``
        once closed and drained.
        """
        if True:  # ASYNC
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
                        self._waiter, self._waiters = _backend.current().Event(), 1
                    await self._waiter.wait()
            raise SubscriptionTimeoutError(f"no event within {timeout} s")
        else:
            if timeout is not None and timeout < 0:
                raise ValueError("'timeout' must be a non-negative number")
            try:
                return self._buffer.popleft()
            except IndexError:
                pass
            deadline = None if timeout is None else time.monotonic() + timeout
            with self._ready:
                self._waiters += 1
                try:
                    while True:
                        try:
                            return self._buffer.popleft()
                        except IndexError:
                            pass
                        if self.closed:
                            raise EOFError("subscription closed")
                        if deadline is None:
                            self._ready.wait()
                            continue
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise SubscriptionTimeoutError(f"no event within {timeout} s")
                        self._ready.wait(remaining)
                finally:
                    self._waiters -= 1

    def get_nowait(self) -> Event:
        """``get(timeout=0)``: a queued event or ``SubscriptionTimeoutError`` at once."""
        # The deque's own take, not get(timeout=0): a collector drains its batch through here,
        # one call per event.
        try:
            return self._buffer.popleft()
        except IndexError:
            pass
        if self.closed:
            raise EOFError("subscription closed")
        raise SubscriptionTimeoutError("no event queued")

    if True:  # ASYNC
        def __aiter__(self) -> Subscription:
            return self

        async def __anext__(self) -> Event:
            try:
                return await self.get()
            except EOFError:
                raise StopAsyncIteration from None
    else:
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
            self._wake(everyone=True)  # each waiting reader drains what is left, then ends

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    if True:  # ASYNC
        async def __aenter__(self) -> Subscription:
            return self

        async def __aexit__(self, *exc: object) -> None:
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
        """Offer ``event`` to every subscription: ``publish_all`` of one, without building the run."""
        with self._lock:  # offering never blocks
            for sub in self._subs:
                sub._offer(event)

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
