"""Test helpers for code using ``river_trio``: ``river_sync.testing``'s names, as coroutines where
they do I/O or run workers (``river_anyio.testing``; ``InlineClient`` makes ``river_trio.Client``s).

Run them inside ``trio.run`` (or a trio test runner such as pytest-trio or anyio's pytest plugin).
"""

from river_anyio.testing import *  # noqa: F403  (the shared helpers; their list is river_anyio.testing)
from river_anyio.testing import __all__ as _shared

# This driver's own, replacing the shared ones the * brought (they make a river_trio.Client).
from river_trio.testing.inline import InlineClient, inline_client  # type: ignore[assignment]  # noqa: F401

__all__ = sorted(_shared)
