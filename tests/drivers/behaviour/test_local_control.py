"""A client's own pause holds for its own producers the moment ``pause()`` returns, on every database."""

from __future__ import annotations

from river_sync import EventKind, InsertOpts, JobState
from tests.drivers.behaviour.support import fast_client, row, wait_for
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import FAST, Task

ROUNDS = 10


def test_insert_right_after_pause_is_never_worked(h: Harness, client_db_url: str) -> None:
    worked: list[int] = []
    client = fast_client(h, client_db_url, h.workers(lambda ctx, args: worked.append(ctx.job.id), Task))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        for i in range(ROUNDS):
            # A fresh queue each round: a paused queue stays paused in the database.
            queue = f"pause_{i}"
            client.queues.add(queue, FAST)
            warm = client.insert(Task("warm"), InsertOpts(queue=queue)).job.id
            wait_for(sub, warm)  # its producer runs, and a fetch would answer the next insert
            client.queues.pause(queue)
            held = client.insert(Task("held"), InsertOpts(queue=queue)).job.id
            # The producer handles everything queued before remove's Stop (the insert's wake-up
            # among them) and waits for any job it started: a claim would show now.
            client.queues.remove(queue)
            assert held not in worked, f"round {i}: worked while paused"
            assert row(client_db_url, held).state is JobState.AVAILABLE
    assert len(worked) == ROUNDS


def test_resume_lets_this_clients_producers_fetch_again(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task))
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.QUEUE_PAUSED, EventKind.QUEUE_RESUMED])
    with client:
        warm = client.insert(Task("warm")).job.id
        wait_for(sub, warm)  # the producer has upserted the queue row that pause() needs
        client.queues.pause("default")
        paused = sub.get(timeout=0)  # published before pause() returned
        held = client.insert(Task("held")).job.id
        client.queues.resume("default")
        resumed = sub.get(timeout=0)
        done = wait_for(sub, held)
    assert (paused.kind, resumed.kind, done.kind) == (
        EventKind.QUEUE_PAUSED, EventKind.QUEUE_RESUMED, EventKind.JOB_COMPLETED,
    )
