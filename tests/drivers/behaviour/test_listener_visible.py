"""A started client's listener is found the way River's conformance harness finds one.

The harness (and any operator tool that does the same) looks in ``pg_stat_activity`` for a
connection whose last statement is a ``LISTEN``. The client's start-up probe UNLISTENs its
private channel after the client's own LISTENs, so without care that UNLISTEN is what shows.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.drivers.behaviour.support import fast_client
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task

pytestmark = pytest.mark.postgres

HARNESS_WAIT = 10.0  # what River's harness waits for a listener before it gives up


def _listeners(url: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND query ILIKE 'listen %'"
        ).fetchall()
    return [str(row[0]) for row in rows]


def test_started_client_is_found_as_a_listener(h: Harness, _migrated_pg: str) -> None:
    client = fast_client(h, _migrated_pg, h.workers(lambda args: None, Task))
    with client:
        deadline = time.monotonic() + HARNESS_WAIT
        while not (found := _listeners(_migrated_pg)):
            assert time.monotonic() < deadline, "no connection's last statement is a LISTEN"
            time.sleep(0.05)
        assert all(query.startswith('LISTEN "public.river_') for query in found)
