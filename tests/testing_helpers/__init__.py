"""Tests of river_sync.testing and the pytest plugin; shared args types and the database fixture."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, ClassVar

import anyio
import pytest

from river_protocol.options import InsertOpts
from tests.drivers.test_client_support import (  # the fixtures, re-exported for the test modules
    FAST,
    WAIT,
    client_db_url_fixture,
    migrated_pg_fixture,
)


@dataclasses.dataclass
class Task:
    kind: ClassVar[str] = "task"
    name: str = ""


@dataclasses.dataclass
class Other:
    kind: ClassVar[str] = "other"
    n: int = 0


@dataclasses.dataclass
class Urgent:
    """An args type with its own insert options."""

    kind: ClassVar[str] = "urgent"
    what: str = ""

    def insert_opts(self) -> InsertOpts:
        return InsertOpts(queue="urgent", priority=2, max_attempts=3, tags=("hot",))


__all__ = [
    "FAST",
    "WAIT",
    "Other",
    "Task",
    "Urgent",
    "client_db_url_fixture",
    "migrated_pg_fixture",
    "timedelta",
]


@dataclasses.dataclass(frozen=True)
class AsyncDriver:
    """``river_trio`` or ``river_asyncio`` with its ``testing`` module and ``run(main)`` on its loop."""

    name: str
    package: Any
    testing: Any

    def run(self, main: Callable[[], Awaitable[Any]]) -> Any:
        return anyio.run(main, backend=self.name)


@pytest.fixture(params=["trio", "asyncio"], name="drv")
def async_driver_fixture(request: pytest.FixtureRequest) -> AsyncDriver:
    """One async driver; its helpers are river_anyio's, its Client and InlineClient its own."""
    name: str = request.param
    package = importlib.import_module(f"river_{name}")
    return AsyncDriver(name, package, importlib.import_module(f"river_{name}.testing"))
