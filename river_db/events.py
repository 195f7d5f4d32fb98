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


class SubscriptionTimeoutError(RiverError, TimeoutError):
    """``Subscription.get(timeout)`` or ``get_nowait()`` found no event in time; the subscription stays open.

    A closed and drained subscription raises ``EOFError`` instead.
    """
