"""Databases for the dashboard's tests: River's schema filled by ``river_ui.demo.seed_demo``,
on SQLite and on Postgres (``db_url`` is parametrized over both)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("starlette")  # the ui extra; the test extra installs it, so CI never skips

from river_protocol.errors import JobNotFoundError
from river_protocol.intents import FullJobRow
from river_protocol.states import JobState
from river_sync import Client
from river_ui.demo import Seeded, attempt_error, insert_rows, seed_demo
from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database

# What a hostile inserter puts in every field the pages show.
SCRIPT = "<script>window.__pwned = 1</script>"
IMG = '"><img src=x onerror="window.__pwned = 2">'
HOSTILE = SCRIPT + IMG


def hostile_rows(now: datetime) -> list[FullJobRow]:
    """A discarded job with markup in every field shown, and a workflow task named with it."""
    task = {"river_py:workflow_id": "wf_hostile", "river_py:workflow_name": HOSTILE, "river_py:task": HOSTILE}
    return [
        FullJobRow(
            kind=f"evil{HOSTILE}",
            queue=f"q{HOSTILE}",
            state=JobState.DISCARDED,
            attempt=1,
            max_attempts=1,
            encoded_args=json.dumps({"html": HOSTILE, HOSTILE: 1}).encode(),
            metadata=json.dumps({"note": HOSTILE, "output": HOSTILE, **task}).encode(),
            errors=(attempt_error(now - timedelta(minutes=1), 1, f"error {HOSTILE}", f"trace {HOSTILE}"),),
            tags=(f"t{HOSTILE}",),
            attempted_by=(f"w{HOSTILE}",),
            created_at=now - timedelta(minutes=2),
            scheduled_at=now - timedelta(minutes=2),
            attempted_at=now - timedelta(minutes=1),
            finalized_at=now - timedelta(minutes=1),
        )
    ]


def insert_hostile(url: str) -> int:
    client = Client(url, leader_election=False, notifications=False)
    try:
        (job_id,) = insert_rows(client, hostile_rows(datetime.now(UTC)))
    finally:
        client.close()
    return job_id


def make_db(kind: str, tmp: Path) -> tuple[str, Seeded]:
    url = (
        create_scratch_pg_database()
        if kind == "postgres"
        else f"sqlite://{tmp / f'ui-{uuid.uuid4().hex[:8]}.sqlite3'}"
    )
    return url, seed_demo(url)


def drop_db(url: str) -> None:
    if url.startswith("postgres"):
        drop_scratch_pg_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Seeded]]:
    """A freshly seeded database for one test (actions change it)."""
    url, seeded = make_db(request.param, tmp_path)
    try:
        yield url, seeded
    finally:
        drop_db(url)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Seeded]]:
    """A seeded database shared by a module's read-only tests."""
    url, seeded = make_db(request.param, tmp_path_factory.mktemp("ui"))
    try:
        yield url, seeded
    finally:
        drop_db(url)


def state_of(url: str, job_id: int) -> JobState | None:
    """The job's state in river_job now (None: no such row)."""
    client = Client(url, leader_election=False, notifications=False)
    try:
        return client.jobs.get(job_id).state
    except JobNotFoundError:
        return None
    finally:
        client.close()


def queue_paused(url: str, name: str) -> bool:
    client = Client(url, leader_election=False, notifications=False)
    try:
        return client.queues.get(name).paused_at is not None
    finally:
        client.close()


CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_token(html: str) -> str:
    match = CSRF_RE.search(html)
    assert match, "the page carries no CSRF token"
    return match.group(1)
