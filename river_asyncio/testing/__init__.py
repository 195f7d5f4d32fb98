"""Test helpers for code using ``river_asyncio``: ``river_sync.testing``'s names, as coroutines where
they do I/O or run workers (``river_anyio.testing``; ``InlineClient`` makes ``river_asyncio.Client``s).

Run them inside ``asyncio.run`` or a test runner: anyio's pytest plugin
(``@pytest.mark.anyio`` with an ``anyio_backend`` fixture returning ``"asyncio"``)
or pytest-asyncio.
"""

from river_anyio.testing import *  # noqa: F403  (the shared helpers; their list is river_anyio.testing)
from river_anyio.testing import __all__ as _shared

# This driver's own, replacing the shared ones the * brought (they make a river_asyncio.Client).
from river_asyncio.testing.inline import InlineClient, inline_client  # type: ignore[assignment]  # noqa: F401

__all__ = sorted(_shared)
