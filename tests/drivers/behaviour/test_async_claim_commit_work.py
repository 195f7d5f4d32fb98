"""``QueueConfig(async_claim_commit=True)`` end to end, both drivers, Postgres and SQLite: jobs are
claimed, worked and completed as with River's default claim."""

from __future__ import annotations

import dataclasses

from river_sync import EventKind, JobState
from tests.drivers.behaviour.support import FAST, fast_client, row, wait_for
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task


def test_async_claim_commit_works_jobs(h: Harness, client_db_url: str) -> None:
    seen: list[str] = []
    workers = h.workers(lambda ctx, args: seen.append(args.name), Task)
    queue = dataclasses.replace(FAST, async_claim_commit=True)
    client = fast_client(h, client_db_url, workers, queues={"default": queue})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        ids = [client.insert(Task(name)).job.id for name in ("a", "b", "c")]
        for job_id in ids:
            assert wait_for(sub, job_id).job.state is JobState.COMPLETED
    assert sorted(seen) == ["a", "b", "c"]
    for job_id in ids:
        stored = row(client_db_url, job_id)
        assert stored.state is JobState.COMPLETED and stored.attempt == 1
        assert stored.attempted_by == (client.client_id,)
