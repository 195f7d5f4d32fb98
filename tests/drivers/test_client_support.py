"""Shared pieces of the client suites: the database fixture, args types, fast settings, row reads."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from river_db.migrator import Migrator
from river_protocol.intents import CountJobs, GetJob
from river_protocol.job import JobRow
from river_sync import Client, Database, EventKind, QueueConfig
from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database

FAST = QueueConfig(
    max_workers=10,
    fetch_cooldown=timedelta(milliseconds=5),
    fetch_poll_interval=timedelta(milliseconds=50),
)
WAIT = 15.0  # generous upper bound for anything the client does; never a sleep


@dataclasses.dataclass
class Task:
    kind: ClassVar[str] = "task"
    name: str = ""


@dataclasses.dataclass
class Other:
    kind: ClassVar[str] = "other"
    n: int = 0


def fast_client(url: str, workers: Any, **kwargs: Any) -> Client:
    kwargs.setdefault("queues", {"default": FAST})
    return Client(url, workers=workers, **kwargs)


def job(client: Client, job_id: int) -> JobRow:
    row = client.database.run(GetJob(job_id), readonly=True)
    assert isinstance(row, JobRow)
    return row


def wait_for(sub: Any, job_id: int, kinds: tuple[EventKind, ...] | None = None) -> Any:
    """The first event about ``job_id`` (of ``kinds``); fails after WAIT seconds."""
    while True:
        event = sub.get(timeout=WAIT)
        if event.job is not None and event.job.id == job_id and (kinds is None or event.kind in kinds):
            return event


def wait_for_all(sub: Any, job_ids: Iterable[int], kinds: tuple[EventKind, ...] | None = None) -> None:
    """Events about every one of ``job_ids``, in whatever order they come; fails after WAIT s of silence."""
    missing = set(job_ids)
    while missing:
        event = sub.get(timeout=WAIT)
        if event.job is not None and (kinds is None or event.kind in kinds):
            missing.discard(event.job.id)


def raw_first_error(client: Client, job_id: int) -> dict[str, Any]:
    """errors[0] exactly as stored, decoded by a plain JSON parser (what Go would read)."""
    with client.database.executor(readonly=True) as ex:
        if client.database.dialect.name == "postgres":
            sql = "SELECT errors[1]::text FROM river_job WHERE id = %s"
            rows = ex.conn.execute(sql, (job_id,)).fetchall()
        else:
            rows = ex.conn.execute(
                "SELECT json_extract(json(errors), '$[0]') FROM river_job WHERE id = ?", (job_id,)
            ).fetchall()
    value = json.loads(rows[0][0])
    assert isinstance(value, dict)
    return value


class Gate:
    """A worker-side latch the test opens; records that the worker reached it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()


# ---------------------------------------------------------------- the database fixture

_PG_TABLES = "river_job, river_queue, river_leader"


@pytest.fixture(scope="module", name="_migrated_pg")
def migrated_pg_fixture() -> Iterator[str]:
    url = create_scratch_pg_database()
    try:
        with Migrator(url) as migrator:
            migrator.migrate_up()
        yield url
    finally:
        drop_scratch_pg_database(url)


@pytest.fixture(params=["postgres", "sqlite"], name="client_db_url")
def client_db_url_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database: a module-wide Postgres one (truncated per test) or a new SQLite file."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        url = request.getfixturevalue("_migrated_pg")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"TRUNCATE {_PG_TABLES} RESTART IDENTITY")
        yield url
    else:
        url = f"sqlite:///{tmp_path}/river.sqlite3"
        with Migrator(url) as migrator:
            migrator.migrate_up()
        yield url


def test_fixture_gives_a_migrated_empty_database(client_db_url: str) -> None:
    with Database.from_url(client_db_url) as db:
        assert db.run(CountJobs(), readonly=True) == {}
