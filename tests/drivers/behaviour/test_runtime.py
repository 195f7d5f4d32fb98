"""Runtime features on both drivers: queues added/removed on a running client, configure before start,
mixed-kind insert_many, custom schema, pure polling, fetch_only_known_kinds, tag-filtered worker pools."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from river_db.migrator import Migrator
from river_protocol.errors import RiverError
from river_protocol.machines.notifications import quoted_channel
from river_protocol.workers import Workers
from river_sync import (
    EventKind,
    InsertManyParams,
    InsertOpts,
    JobState,
    QueueAlreadyAddedError,
    QueueNotAddedError,
    TagFilter,
)
from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database
from tests.drivers.behaviour.support import fast_client, wait_for, wait_for_all
from tests.drivers.harness import WAIT, Harness
from tests.drivers.test_client_support import FAST, Gate, Other, Task


def _recording(h: Harness, *types: type) -> tuple[Workers, list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []
    workers = Workers()
    for t in types:
        workers.job(t)(h.worker(lambda ctx, args: seen.append((ctx.job.queue, args))))
    return workers, seen


def test_add_and_remove_queues_on_a_running_client(h: Harness, client_db_url: str) -> None:
    workers, seen = _recording(h, Task)
    client = fast_client(h, client_db_url, workers)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        with pytest.raises(QueueAlreadyAddedError):
            client.queues.add("default", FAST)
        client.queues.add("extra", FAST)
        assert set(client.queues.worked()) == {"default", "extra"}
        extra = client.insert(Task("x"), InsertOpts(queue="extra")).job.id
        wait_for(sub, extra)
        client.queues.remove("extra")
        assert set(client.queues.worked()) == {"default"}
        with pytest.raises(QueueNotAddedError):
            client.queues.remove("extra")
        # Not worked any more: a new job there stays available while default still works.
        parked = client.insert(Task("parked"), InsertOpts(queue="extra")).job.id
        done = client.insert(Task("d")).job.id
        wait_for(sub, done)
        assert client.jobs.get(parked).state is JobState.AVAILABLE
        assert {"default", "extra"} <= {q.name for q in client.queues.list()}  # the record stays
    assert ("extra", Task("x")) in seen and ("extra", Task("parked")) not in seen


def test_remove_waits_for_running_jobs(h: Harness, client_db_url: str) -> None:
    gate = Gate()
    finished = threading.Event()

    def work(ctx: Any, args: Task) -> None:
        gate.entered.set()
        gate.release.wait(WAIT)
        finished.set()

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True),
                         queues={"default": FAST, "slow": FAST})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        job_id = client.insert(Task("s"), InsertOpts(queue="slow")).job.id
        assert gate.entered.wait(WAIT)
        with pytest.raises(TimeoutError):
            client.queues.remove("slow", timeout=0.05)
        gate.release.set()
        client.queues.remove("slow")
        # Like Go's Remove: returns once the job has run; its outcome is recorded by the completer.
        assert finished.is_set()
        assert wait_for(sub, job_id).job.state is JobState.COMPLETED


def test_queue_added_before_start_is_worked(h: Harness, client_db_url: str) -> None:
    workers, seen = _recording(h, Task)
    client = fast_client(h, client_db_url, workers)
    client.queues.add("later", FAST)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        wait_for(sub, client.insert(Task("l"), InsertOpts(queue="later")).job.id)
    assert seen == [("later", Task("l"))]


def test_configure_before_start_only(h: Harness, client_db_url: str) -> None:
    workers, seen = _recording(h, Task)
    client = fast_client(h, client_db_url, workers)
    client.configure(queues={"only": FAST})
    assert set(client.queues.worked()) == {"only"}
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        with pytest.raises(RiverError, match="before it starts"):
            client.configure(queues={"default": FAST})
        parked = client.insert(Task("default")).job.id
        wait_for(sub, client.insert(Task("o"), InsertOpts(queue="only")).job.id)
        assert client.jobs.get(parked).state is JobState.AVAILABLE
    assert seen == [("only", Task("o"))]


def test_insert_only_client_cannot_add_queues(h: Harness, client_db_url: str) -> None:
    with h.client(client_db_url) as client, pytest.raises(ValueError, match="not configured to execute jobs"):
        client.queues.add("q", FAST)


def test_insert_many_mixed_kinds_all_worked(h: Harness, client_db_url: str) -> None:
    workers, seen = _recording(h, Task, Other)
    client = fast_client(h, client_db_url, workers, notifications=False)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        items = [Task("a"), Other(2), InsertManyParams(Other(3), InsertOpts(priority=2))]
        results = client.insert_many(items)
        wait_for_all(sub, [r.job.id for r in results])
    assert [r.job.kind for r in results] == ["task", "other", "other"]
    assert sorted(str(a) for _, a in seen) == sorted(str(a) for a in (Task("a"), Other(2), Other(3)))


def test_fetch_only_known_kinds(h: Harness, client_db_url: str) -> None:
    workers, seen = _recording(h, Task)
    client = fast_client(h, client_db_url, workers, fetch_only_known_kinds=True, skip_unknown_job_check=True)
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED])
    with client:
        unknown = client.insert(Other(1)).job.id
        known = client.insert(Task("k")).job.id
        wait_for(sub, known)
        assert client.jobs.get(unknown).state is JobState.AVAILABLE  # never claimed, so never failed
    assert seen == [("default", Task("k"))]


def test_tag_filter_pools(h: Harness, client_db_url: str) -> None:
    tagged_workers, tagged_seen = _recording(h, Task)
    plain_workers, plain_seen = _recording(h, Task)
    tagged = fast_client(h, client_db_url, tagged_workers, tag_filter=TagFilter(("gpu",)))
    plain = fast_client(h, client_db_url, plain_workers, tag_filter=TagFilter())
    sub_t = tagged.subscribe([EventKind.JOB_COMPLETED])
    sub_p = plain.subscribe([EventKind.JOB_COMPLETED])
    with tagged, plain:
        gpu = tagged.insert(Task("gpu"), InsertOpts(tags=("gpu", "big"))).job.id
        cpu = tagged.insert(Task("cpu")).job.id
        wait_for(sub_t, gpu)
        wait_for(sub_p, cpu)
    assert tagged_seen == [("default", Task("gpu"))] and plain_seen == [("default", Task("cpu"))]


def test_pure_polling_client_works_jobs(h: Harness, client_db_url: str) -> None:
    """notifications=False: no listener at all; inserts by another client are found by the fetch poll."""
    workers, seen = _recording(h, Task)
    client = fast_client(h, client_db_url, workers, notifications=False)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client, h.client(client_db_url) as other:
        notifier = h.raw(client)._notifier
        assert notifier is not None and type(notifier).__name__ == "NullNotifier"
        wait_for(sub, other.insert(Task("polled")).job.id)
    assert seen == [("default", Task("polled"))]


# ---------------------------------------------------------------- custom schema (Postgres)


@pytest.fixture
def custom_schema_url() -> Iterator[str]:
    url = create_scratch_pg_database()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA custom")
        with Migrator(url, schema="custom") as migrator:
            migrator.migrate_up()
        yield url
    finally:
        drop_scratch_pg_database(url)


@pytest.mark.postgres
def test_custom_schema_migrates_works_and_notifies(h: Harness, custom_schema_url: str) -> None:
    workers, seen = _recording(h, Task)
    heard: list[str] = []
    with psycopg.connect(custom_schema_url, autocommit=True) as listener:
        listener.execute(f"LISTEN {quoted_channel('custom', 'river_insert')}")
        client = fast_client(h, custom_schema_url, workers, schema="custom")
        sub = client.subscribe([EventKind.JOB_COMPLETED])
        with client:
            assert client.schema == "custom"
            job_id = client.insert(Task("in custom")).job.id
            wait_for(sub, job_id)
            assert client.jobs.get(job_id).state is JobState.COMPLETED
        for note in listener.notifies(timeout=WAIT, stop_after=1):
            heard.append(f"{note.channel} {note.payload}")
        with psycopg.connect(custom_schema_url) as conn:
            in_custom = conn.execute("SELECT count(*) FROM custom.river_job").fetchone()
            in_public = conn.execute("SELECT to_regclass('public.river_job')").fetchone()
    assert seen == [("default", Task("in custom"))]
    assert heard == ['custom.river_insert {"queue":"default"}']
    assert in_custom == (1,) and in_public == (None,)
