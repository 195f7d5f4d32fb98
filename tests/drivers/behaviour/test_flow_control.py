"""Flow control on every client and both databases: a limited queue refuses to start without the
python migration line, holds its concurrency limit per partition, and runs a sequence in order."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from datetime import datetime, timedelta
from typing import Any, ClassVar

import pytest

from river_db.migrator import Migrator
from river_protocol.errors import MigrationError
from river_sync import (
    ConcurrencyConfig,
    EventKind,
    InsertManyParams,
    InsertOpts,
    PartitionConfig,
    QueueConfig,
    QueueLimits,
    RateLimit,
    SequenceOpts,
)
from tests.drivers.behaviour.support import fast_client, wait_for_all
from tests.drivers.harness import Harness


@dataclasses.dataclass
class Call:
    kind: ClassVar[str] = "partner_call"
    customer: int = 0
    n: int = 0


LIMITED = QueueConfig(
    max_workers=10, fetch_cooldown=timedelta(milliseconds=5), fetch_poll_interval=timedelta(milliseconds=50),
    concurrency=ConcurrencyConfig(global_limit=2, partition=PartitionConfig(by_args=["customer"])),
)
SEQUENCED = QueueConfig(
    max_workers=10, fetch_cooldown=timedelta(milliseconds=5), fetch_poll_interval=timedelta(milliseconds=50),
    sequences=True,
)


class Meter:
    """Running jobs per customer, and the most ever seen at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[int, int] = {}
        self.peak: dict[int, int] = {}
        self.order: list[tuple[int, int]] = []

    def work(self, ctx: Any, args: Call) -> None:
        with self.lock:
            self.now[args.customer] = self.now.get(args.customer, 0) + 1
            self.peak[args.customer] = max(self.peak.get(args.customer, 0), self.now[args.customer])
            self.order.append((args.customer, args.n))
        time.sleep(0.01)  # long enough for the other slots to be claimed meanwhile
        with self.lock:
            self.now[args.customer] -= 1


def test_limited_queue_refuses_to_start_without_the_python_line(h: Harness, client_db_url: str) -> None:
    _no_python_line(client_db_url)
    meter = Meter()
    client = fast_client(h, client_db_url, h.workers(meter.work, Call, threaded=True),
                         queues={"default": LIMITED})
    with pytest.raises(MigrationError, match=r"`river migrate-up --line python`"):
        client.start()


def _no_python_line(url: str) -> None:
    """Without the python line (on Postgres another test of the module may have applied it)."""
    with Migrator(url, line="python") as m:
        m.migrate_down(target_version=-1)


def _python_line(url: str) -> None:
    """The python line, and its tables empty (a Postgres database serves the module's tests)."""
    with Migrator(url, line="python") as m:
        m.migrate_up()
        cur = m.conn.cursor()
        for table in ("river_py_job_start", "river_py_queue_limit"):
            cur.execute(f"DELETE FROM {table}")
        cur.close()


def test_global_limit_holds_per_partition(h: Harness, client_db_url: str) -> None:
    _python_line(client_db_url)
    meter = Meter()
    client = fast_client(h, client_db_url, h.workers(meter.work, Call, threaded=True),
                         queues={"default": LIMITED})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        jobs = client.insert_many(
            [InsertManyParams(Call(customer=c, n=i)) for i in range(6) for c in (1, 2, 3)])
        wait_for_all(sub, [r.job.id for r in jobs])
    assert len(meter.order) == 18
    assert max(meter.peak.values()) <= 2
    # Another partition's jobs were not held behind a full one: some customer reached its limit
    # while the others ran too.
    assert set(meter.peak) == {1, 2, 3}


def test_sequence_runs_one_at_a_time_in_insert_order(h: Harness, client_db_url: str) -> None:
    _python_line(client_db_url)
    meter = Meter()
    client = fast_client(h, client_db_url, h.workers(meter.work, Call, threaded=True),
                         queues={"default": SEQUENCED})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    seq = InsertOpts(sequence=SequenceOpts(by_args=["customer"]))
    with client:
        jobs = client.insert_many(
            [InsertManyParams(Call(customer=c, n=i), seq) for i in range(5) for c in (1, 2)])
        wait_for_all(sub, [r.job.id for r in jobs])
    assert meter.peak == {1: 1, 2: 1}
    for customer in (1, 2):
        assert [n for c, n in meter.order if c == customer] == [0, 1, 2, 3, 4]


def test_limits_change_at_runtime_and_show_in_flow_status(h: Harness, client_db_url: str) -> None:
    _python_line(client_db_url)
    release = threading.Event()
    running: list[int] = []
    lock = threading.Lock()

    def work(ctx: Any, args: Call) -> None:
        with lock:
            running.append(args.n)
        release.wait(15)

    client = fast_client(h, client_db_url, h.workers(work, Call, threaded=True), queues={"default": LIMITED})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        jobs = client.insert_many([InsertManyParams(Call(customer=1, n=i)) for i in range(4)])
        _wait(lambda: len(running) == 2)
        (status,) = client.queues.flow_status()
        assert status.queue == "default" and status.limits == QueueLimits(global_limit=2)
        assert status.concurrency_partition == PartitionConfig(by_args=["customer"])
        assert status.running == 2 and [(u.running) for u in status.busiest] == [2]
        client.queues.set_limits("default", QueueLimits(global_limit=3))
        _wait(lambda: len(running) == 3)  # within the next fetch (the poll, here 50 ms)
        assert client.queues.flow_status()[0].limits == QueueLimits(global_limit=3)
        release.set()
        wait_for_all(sub, [r.job.id for r in jobs])
    assert sorted(running) == [0, 1, 2, 3]


def _wait(predicate: Any) -> None:
    deadline = time.monotonic() + 15
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_rate_limit_holds_in_every_window(h: Harness, client_db_url: str) -> None:
    _python_line(client_db_url)
    period = timedelta(milliseconds=300)
    queue = QueueConfig(max_workers=10, fetch_cooldown=timedelta(milliseconds=5),
                        fetch_poll_interval=timedelta(milliseconds=50),
                        rate_limit=RateLimit(allowed=3, period=period))
    meter = Meter()
    client = fast_client(h, client_db_url, h.workers(meter.work, Call, threaded=True),
                         queues={"default": queue})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        jobs = client.insert_many([InsertManyParams(Call(customer=1, n=i)) for i in range(9)])
        wait_for_all(sub, [r.job.id for r in jobs])
    starts = sorted(_start_times(client_db_url))
    assert len(starts) == 9
    for t in starts:  # the worst windows end at a start
        assert sum(1 for other in starts if t - period < other <= t) <= 3
    assert starts[-1] - starts[0] >= 2 * period  # nine starts at three per window need three windows


def _start_times(url: str) -> list[datetime]:
    from river_db.connect import open_connection
    from river_protocol.dialects.rows import _stored_time

    conn, _ = open_connection(url)
    try:
        cur = conn.cursor()
        cur.execute("SELECT started_at FROM river_py_job_start")
        return [t for (value,) in cur.fetchall() if (t := _stored_time(value)) is not None]
    finally:
        conn.close()


def test_a_limited_queue_added_at_runtime_writes_its_limits_or_is_not_started(
    h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture,
) -> None:
    _no_python_line(client_db_url)
    meter = Meter()
    client = fast_client(h, client_db_url, h.workers(meter.work, Call, threaded=True))
    with client:
        client.queues.add("limited", LIMITED)  # no python line yet
        _wait(lambda: "was not started" in caplog.text)
        assert "river migrate-up --line python" in caplog.text
        assert "limited" not in client.queues.worked()
    _python_line(client_db_url)
    client = fast_client(h, client_db_url, h.workers(meter.work, Call, threaded=True))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        client.queues.add("limited", LIMITED)
        job = client.insert(Call(customer=1), InsertOpts(queue="limited")).job
        wait_for_all(sub, [job.id])
        (status,) = client.queues.flow_status()
        assert (status.queue, status.limits) == ("limited", QueueLimits(global_limit=2))


def test_a_hot_partition_moves_on_when_a_completion_is_written(h: Harness, client_db_url: str) -> None:
    """global_limit=1: the next job starts once the last one's completion is written, not at the
    next poll (1 s here)."""
    _python_line(client_db_url)
    one = QueueConfig(max_workers=10, fetch_cooldown=timedelta(milliseconds=5),
                      concurrency=ConcurrencyConfig(global_limit=1))
    meter = Meter()
    client = fast_client(h, client_db_url, h.workers(meter.work, Call, threaded=True),
                         queues={"default": one})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        jobs = client.insert_many([InsertManyParams(Call(customer=1, n=i)) for i in range(5)])
        wait_for_all(sub, [r.job.id for r in jobs])
        rows = sorted((client.jobs.get(r.job.id) for r in jobs), key=lambda j: j.attempted_at)
    gaps = [(b.attempted_at - a.finalized_at).total_seconds() for a, b in itertools.pairwise(rows)]
    assert meter.peak == {1: 1} and all(0 <= g < 0.5 for g in gaps), gaps
