"""Inline mode for trio code (``river_anyio.testing.inline``), making ``river_trio.Client``s."""

from __future__ import annotations

from typing import ClassVar

from river_anyio.testing import inline as _shared
from river_anyio.testing.inline import InlineResult
from river_trio.client import Client


class InlineClient(_shared.InlineClient):
    __doc__ = _shared.InlineClient.__doc__

    _client_class: ClassVar[type[Client]] = Client


def inline_client(client: Client) -> InlineClient:
    """An inline client on ``client``'s database and settings (workers, middleware, retry policy...).

    ``client`` must not be running; closing the inline client leaves it open.
    """
    return _shared.inline_client_of(InlineClient, client)  # type: ignore[return-value]


__all__ = ["InlineClient", "InlineResult", "inline_client"]
