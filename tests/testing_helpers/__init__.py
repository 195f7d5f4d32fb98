"""Tests of river_sync.testing and the pytest plugin; shared args types and the database fixture."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import ClassVar

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
