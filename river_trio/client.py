"""``river_trio.Client``: the async client (``river_anyio.client``) bound to trio.

Its clock is trio's (a ``trio.testing.MockClock`` drives every timeout), and
``run`` refuses to start under another event loop.
"""

from __future__ import annotations

from typing import ClassVar

from river_anyio import _backend
from river_anyio import client as _shared
from river_anyio.client import (
    CANCEL_GRACE,
    DEADLINE_GRAIN,
    ClientStats,
    InsertManyParams,
    MaintenanceConfig,
    QueueConfig,
    is_async_worker,
)
from river_anyio.resumable import resumable_middleware


class Client(_shared.Client):
    __doc__ = _shared.Client.__doc__

    ANYIO_BACKEND: ClassVar[str] = "trio"
    _clock = _backend.named("trio").utcnow  # trio's clock without a per-call loop lookup


__all__ = [
    "CANCEL_GRACE",
    "DEADLINE_GRAIN",
    "Client",
    "ClientStats",
    "InsertManyParams",
    "MaintenanceConfig",
    "QueueConfig",
    "is_async_worker",
    "resumable_middleware",
]
