"""The event a client publishes to its subscribers; both drivers deliver the same values."""

from __future__ import annotations

from dataclasses import dataclass

from river_protocol.client_core import EventKind
from river_protocol.job import JobRow


@dataclass(frozen=True, slots=True)
class Event:
    """``job`` is the row as persisted (job events); ``queue`` names the queue (queue events)."""

    kind: EventKind
    job: JobRow | None = None
    queue: str | None = None
    metadata: bytes | None = None
