"""Shared pieces of the leadership, maintenance and periodic suites: fast settings, waits, raw rows."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol.golang.gotime import format_sqlite_time
from river_protocol.intents import GetLeader, LeaderRow, ListJobs
from river_protocol.job import JobRow
from river_sync import Client, Database, LeaderElectionConfig, MaintenanceConfig, QueueConfig, Workers

WAIT = 15.0  # upper bound for anything to happen; never an assertion about speed

FAST_QUEUE = QueueConfig(
    max_workers=10, fetch_cooldown=timedelta(milliseconds=5), fetch_poll_interval=timedelta(milliseconds=50),
)
FAST_ELECTION = LeaderElectionConfig(
    interval=timedelta(milliseconds=200), jitter=timedelta(milliseconds=50), ttl=timedelta(seconds=2),
)
MS = timedelta(milliseconds=1)


def fast_maintenance(**overrides: Any) -> MaintenanceConfig:
    """Every service on a 100 ms interval, no start stagger, no reindexer (unless overridden)."""
    settings: dict[str, Any] = {
        "stagger_start": False, "reindexer": False,
        "job_cleaner_interval": 100 * MS, "rescuer_interval": 100 * MS, "scheduler_interval": 100 * MS,
        "queue_cleaner_interval": 100 * MS, "notification_cleaner_interval": 100 * MS,
    }
    settings.update(overrides)
    return MaintenanceConfig(**settings)


def leader_client(url: str, workers: Workers, **kwargs: Any) -> Client:
    kwargs.setdefault("queues", {"default": FAST_QUEUE})
    kwargs.setdefault("leader_election", FAST_ELECTION)
    kwargs.setdefault("maintenance", fast_maintenance())
    return Client(url, workers=workers, **kwargs)


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll ``predicate`` until truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def _db(source: Client | Database) -> Database:
    return source.database if isinstance(source, Client) else source


def leader_row(source: Client | Database) -> LeaderRow | None:
    row = _db(source).run(GetLeader(), readonly=True)
    assert row is None or isinstance(row, LeaderRow)
    return row


def leader_id(source: Client | Database) -> str | None:
    row = leader_row(source)
    return None if row is None else row.leader_id


def all_jobs(source: Client | Database) -> list[JobRow]:
    rows = _db(source).run(ListJobs(limit=10_000), readonly=True)
    return list(rows)


def ago(**delta: float) -> datetime:
    return datetime.now(UTC) - timedelta(**delta)


def execute(source: Client | Database, pg_sql: str, sqlite_sql: str, params: tuple[Any, ...] = ()) -> None:
    """Raw SQL for setting up rows the public API can't create (old timestamps)."""
    db = _db(source)
    with db.transaction() as ex:
        sql = pg_sql if db.dialect.name == "postgres" else sqlite_sql
        ex.conn.execute(sql, params)


def db_time(source: Client | Database, value: datetime) -> Any:
    return value if _db(source).dialect.name == "postgres" else format_sqlite_time(value)


def metadata(row: JobRow) -> dict[str, Any]:
    value = row.metadata
    if isinstance(value, bytes | str):
        value = json.loads(value)
    assert isinstance(value, dict)
    return value
