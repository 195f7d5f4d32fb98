"""The driver fixture: every behavioural test runs on river_sync, river_trio and river_asyncio
(x Postgres, SQLite)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.drivers.harness import DRIVERS, Harness, make_harness
from tests.drivers.test_client_support import (  # noqa: F401  (fixtures)
    client_db_url_fixture,
    migrated_pg_fixture,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.one_async_backend``: a slow test whose wait is River's timers, not the event
    loop's, runs on sync and trio only (its asyncio run would repeat trio's: one implementation)."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        once = item.get_closest_marker("one_async_backend") is not None
        on_asyncio = callspec is not None and callspec.params.get("h") == "asyncio"
        (dropped if once and on_asyncio else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(params=DRIVERS, name="h")
def driver_fixture(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The harness for one driver; it stops every client it made when the test ends."""
    harness = make_harness(request.param)
    try:
        yield harness
    finally:
        harness.close()
