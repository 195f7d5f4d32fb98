"""The event a client publishes to subscribers, and the error ``Subscription.get`` raises when none came.

Both drivers deliver the same values and raise the same errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from river_protocol.client_core import EventKind
from river_protocol.errors import RiverError
from river_protocol.frozen import quick_init
from river_protocol.job import JobRow


@quick_init
@dataclass(frozen=True, slots=True)
class Event:
    """``job`` is the row as persisted (job events); ``queue`` names the queue (queue events)."""

    kind: EventKind
    job: JobRow | None = None
    queue: str | None = None
    metadata: bytes | None = None


def kind_ids(kinds: frozenset[EventKind]) -> frozenset[int] | None:
    """A subscription's filter as its members' ids, or None when it holds every kind.

    EventKind is an Enum, whose ``__hash__`` is Python code run for each ``kind in kinds``; an
    int hashes in C. Members are singletons, so ``id(event.kind) in ids`` is ``event.kind in kinds``.
    """
    if len(kinds) == len(EventKind):
        return None
    return frozenset(map(id, kinds))


class SubscriptionTimeoutError(RiverError, TimeoutError):
    """``Subscription.get(timeout)`` or ``get_nowait()`` found no event in time; the subscription stays open.

    A closed and drained subscription raises ``EOFError`` instead.
    """
