"""``run``: ``anyio.run(main)`` on trio and on asyncio, for tests of the shared async implementation
(``river_anyio``, under ``river_trio`` and ``river_asyncio``) that need no trio MockClock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

Run = Callable[[Callable[[], Awaitable[Any]]], Any]

ASYNC_BACKENDS = ("trio", "asyncio")


@pytest.fixture(params=ASYNC_BACKENDS)
def run(request: pytest.FixtureRequest) -> Run:
    """``run(main)`` runs ``main()`` to completion in a new event loop of one backend."""
    backend: str = request.param

    def run_main(main: Callable[[], Awaitable[Any]]) -> Any:
        return anyio.run(main, backend=backend)

    return run_main
