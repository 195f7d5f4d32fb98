"""The driver fixture: every behavioural test runs on river_sync, river_trio and river_asyncio
(x Postgres, SQLite)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import DRIVERS, Harness, make_harness  # type: ignore[import-not-found]
from test_client_support import (  # type: ignore[import-not-found]  # noqa: F401  (fixtures)
    client_db_url_fixture,
    migrated_pg_fixture,
)


@pytest.fixture(params=DRIVERS, name="h")
def driver_fixture(request: pytest.FixtureRequest) -> Iterator[Harness]:
    """The harness for one driver; it stops every client it made when the test ends."""
    harness = make_harness(request.param)
    try:
        yield harness
    finally:
        harness.close()
