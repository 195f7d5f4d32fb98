"""``testing_claim_hook`` (``river_db.client_base.ClaimHook``): a claim held after it committed."""

from __future__ import annotations

import threading
from typing import Any

from river_sync import EventKind, JobState
from tests.drivers.behaviour.support import WAIT, fast_client, row, wait_for
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task


def test_a_held_claim_is_running_and_hears_a_cancel_before_it_starts(h: Harness, client_db_url: str) -> None:
    started_cancelled: list[bool] = []
    claims: list[tuple[str, list[int]]] = []
    held, release = threading.Event(), threading.Event()

    def work(ctx: Any, args: Task) -> None:
        started_cancelled.append(ctx.cancelled)

    def hook(queue: str, jobs: Any) -> None:
        claims.append((queue, [job.id for job in jobs]))
        held.set()
        release.wait(WAIT)

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True))
    h.raw(client).testing_claim_hook = hook
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        job_id = client.insert(Task("held")).job.id
        assert held.wait(WAIT)
        assert row(client_db_url, job_id).state is JobState.RUNNING  # the claim committed
        # The producer applies the cancel (and acks it) while the hook still holds the claim.
        client.jobs.cancel(job_id)
        assert started_cancelled == []
        release.set()
        wait_for(sub, job_id)
    assert claims == [("default", [job_id])]
    assert started_cancelled == [True]


def test_without_the_hook_claims_start_at_once(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task))
    assert h.raw(client).testing_claim_hook is None
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        job_id = client.insert(Task("plain")).job.id
        assert wait_for(sub, job_id).kind is EventKind.JOB_COMPLETED
