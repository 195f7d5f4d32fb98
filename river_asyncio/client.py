"""``river_asyncio.Client``: the async client (``river_anyio.client``) bound to asyncio.

Its clock is the event loop's, and ``run`` refuses to start under another event loop.
"""

from __future__ import annotations

from typing import ClassVar

from river_anyio import _backend
from river_anyio import client as _shared
from river_anyio.client import ClientStats, InsertManyParams, MaintenanceConfig, QueueConfig


class Client(_shared.Client):
    __doc__ = _shared.Client.__doc__

    ANYIO_BACKEND: ClassVar[str] = "asyncio"
    _clock = _backend.named("asyncio").utcnow  # the loop's clock without a per-call loop lookup


__all__ = ["Client", "ClientStats", "InsertManyParams", "MaintenanceConfig", "QueueConfig"]
