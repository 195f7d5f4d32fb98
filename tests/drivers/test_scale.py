"""The threaded client at scale and under concurrency, on real Postgres and SQLite.

- 10,000 jobs worked by two client processes: each completed exactly once.
- Unique inserts racing from many threads through two clients: one row.
- Business row and job in one transaction while a fast-polling client runs:
  the job never starts before the transaction commits, and when it starts the
  business row is visible (psycopg and SQLAlchemy).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

from river_db.migrator import Migrator
from river_protocol.intents import CountJobs
from river_sync import Client, Database, EventKind, InsertOpts, QueueConfig, UniqueOpts, WorkContext, Workers
from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database
from tests.drivers.test_client_support import WAIT, wait_for, wait_for_all

pytestmark = pytest.mark.slow

JOBS = 10_000
INSERT_BATCH = 500
CHILD = Path(__file__).with_name("scale_child.py")
ROOT = Path(__file__).resolve().parents[2]
# Upper bounds that only turn a hang into a readable failure; a healthy run needs a fraction.
WORK_DEADLINE = 100.0
CHILD_DEADLINE = 30.0


@dataclasses.dataclass
class ScaleJob:
    kind: ClassVar[str] = "scale_job"
    n: int = 0


@dataclasses.dataclass
class UniqueJob:
    kind: ClassVar[str] = "scale_unique"
    customer: int = 0


@dataclasses.dataclass
class BizJob:
    kind: ClassVar[str] = "scale_biz"
    biz_id: int = 0


@dataclasses.dataclass
class Probe:
    kind: ClassVar[str] = "scale_probe"
    n: int = 0


@contextmanager
def _fresh_database(kind: str, tmp_path: Path) -> Iterator[str]:
    """A new, migrated database of ``kind``, dropped (Postgres) afterwards."""
    if kind == "postgres":
        url = create_scratch_pg_database()
        try:
            with Migrator(url) as migrator:
                migrator.migrate_up()
            yield url
        finally:
            drop_scratch_pg_database(url)
    else:
        url = f"sqlite:///{tmp_path}/river.sqlite3"
        with Migrator(url) as migrator:
            migrator.migrate_up()
        yield url


@pytest.fixture(params=["postgres", "sqlite"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
    with _fresh_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def pg_db_url(tmp_path: Path) -> Iterator[str]:
    # A SQLite write transaction held open blocks every claim (one writer per file),
    # so "the client polls while the insert transaction is open" exists on Postgres only.
    with _fresh_database("postgres", tmp_path) as url:
        yield url


def _counts(db: Database) -> Counter[str]:
    counts: Counter[str] = Counter()
    for (state, _queue, _kind), n in db.run(CountJobs(), readonly=True).items():
        counts[state.value] += n
    return counts


def _rows(db: Database, sql: str) -> list[tuple[Any, ...]]:
    with db.executor(readonly=True) as ex:
        return [tuple(r) for r in ex.conn.execute(sql).fetchall()]


# ---------------------------------------------------------------- two worker processes


class _Worker:
    """A scale_child.py process; its stderr goes to a file so a full pipe never blocks it."""

    def __init__(self, url: str, tmp_path: Path, index: int) -> None:
        self.record = tmp_path / f"executions-{index}.txt"
        self.stderr_path = tmp_path / f"stderr-{index}.txt"
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in close()
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), url, str(self.record), "8"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env,
        )

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == "ready", f"worker process failed to start: {self.stderr()}"

    def finish(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=CHILD_DEADLINE)

    def executions(self) -> list[int]:
        return [int(line) for line in self.record.read_text().split()] if self.record.exists() else []

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


def test_two_processes_work_10000_jobs_exactly_once(db_url: str, tmp_path: Path) -> None:
    postgres = db_url.startswith("postgres")
    if postgres:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE scale_done (job_id bigint NOT NULL)")
    workers = [_Worker(db_url, tmp_path, i) for i in range(2)]
    try:
        for worker in workers:
            worker.wait_ready()
        # Inserted while both already work, so claims race from the first batch on.
        inserted: list[int] = []
        with Database.from_url(db_url, pool_size=2) as handle, Client(handle) as inserter:
            for first in range(0, JOBS, INSERT_BATCH):
                results = inserter.insert_many([ScaleJob(n) for n in range(first, first + INSERT_BATCH)])
                inserted.extend(r.job.id for r in results)
        with Database.from_url(db_url, pool_size=1) as db:
            deadline = time.monotonic() + WORK_DEADLINE
            while (counts := _counts(db))["completed"] < JOBS:
                alive = [w.proc.poll() is None for w in workers]
                assert all(alive), f"a worker process died: {[w.stderr() for w in workers]}"
                assert time.monotonic() < deadline, f"not all jobs completed: {dict(counts)}"
                time.sleep(0.05)
            exit_codes = [w.finish() for w in workers]
            assert exit_codes == [0, 0], [w.stderr() for w in workers]

            counts = _counts(db)
            assert counts == Counter(completed=JOBS), dict(counts)  # none lost, none left running
            assert _rows(db, "SELECT count(*) FROM river_job WHERE attempt <> 1") == [(0,)]
            length = "cardinality(attempted_by)" if postgres else "json_array_length(json(attempted_by))"
            assert _rows(db, f"SELECT count(*) FROM river_job WHERE {length} <> 1") == [(0,)]
            if postgres:
                done = _rows(db, "SELECT count(*), count(DISTINCT job_id) FROM scale_done")
                assert done == [(JOBS, JOBS)]
        per_process = [w.executions() for w in workers]
        executions = [job_id for ids in per_process for job_id in ids]
        twice = [job_id for job_id, n in Counter(executions).items() if n > 1]
        assert not twice, f"jobs executed more than once: {twice[:20]}"
        assert sorted(executions) == sorted(inserted)
        assert all(per_process), f"one process worked nothing: {[len(ids) for ids in per_process]}"
    finally:
        for worker in workers:
            worker.close()


# ---------------------------------------------------------------- unique inserts racing


def test_unique_inserts_from_many_threads_make_one_row(db_url: str) -> None:
    threads, per_thread = 16, 50
    opts = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    # Two clients: two connection pools (two SQLite writer connections), so the race
    # reaches the database rather than one client's lock.
    clients = [Client(db_url), Client(db_url)]
    barrier = threading.Barrier(threads)
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def insert(index: int) -> None:
        client = clients[index % 2]
        try:
            barrier.wait(timeout=WAIT)
            mine = [client.insert(UniqueJob(42), opts) for _ in range(per_thread)]
        except BaseException as exc:
            with lock:
                errors.append(exc)
            return
        with lock:
            results.extend(mine)

    try:
        pool = [threading.Thread(target=insert, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert not errors, errors[:3]
        assert len(results) == threads * per_thread
        fresh = [r for r in results if not r.unique_skipped_as_duplicate]
        assert len(fresh) == 1
        assert {r.job.id for r in results} == {fresh[0].job.id}
        counts = clients[0].database.run(CountJobs(), readonly=True)
        assert sum(counts.values()) == 1
    finally:
        for client in clients:
            client.stop()


# ---------------------------------------------------------------- dual write under a running client


class _BizWorld:
    """A fast-polling client whose biz worker records whether its business row was visible."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.started: dict[int, bool] = {}  # biz_id -> business row visible when the job started
        self._lock = threading.Lock()
        workers = Workers()
        workers.job(BizJob)(self._work_biz)
        workers.job(Probe)(lambda args: None)
        fast = QueueConfig(max_workers=10, fetch_cooldown=timedelta(milliseconds=1),
                           fetch_poll_interval=timedelta(milliseconds=5))
        self.client = Client(url, workers=workers, queues={"default": fast})
        self.events = self.client.subscribe([EventKind.JOB_COMPLETED], maxsize=10_000)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS biz (id bigint PRIMARY KEY)")

    def _work_biz(self, ctx: WorkContext, args: BizJob) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            visible = conn.execute("SELECT count(*) FROM biz WHERE id = %s", (args.biz_id,)).fetchone()
        with self._lock:
            self.started[args.biz_id] = bool(visible and visible[0] == 1)

    def probe_rounds(self, rounds: int) -> None:
        """Committed probes, each worked to completion: the client claimed after every one."""
        for n in range(rounds):
            wait_for(self.events, self.client.insert(Probe(n)).job.id)


@pytest.mark.postgres
@pytest.mark.parametrize("via", ["psycopg", "sqlalchemy"])
def test_job_never_starts_while_its_insert_transaction_is_open(pg_db_url: str, via: str) -> None:
    db_url = pg_db_url
    world = _BizWorld(db_url)
    open_txs: list[tuple[int, Any, Any]] = []  # (biz_id, connection, job row)
    engine = None
    with world.client:
        try:
            if via == "sqlalchemy":
                import sqlalchemy

                engine = sqlalchemy.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1))
            for biz_id in range(1, 7):
                if engine is None:
                    conn: Any = psycopg.connect(db_url)
                    conn.execute("INSERT INTO biz (id) VALUES (%s)", (biz_id,))
                    handle = conn
                else:
                    conn = engine.connect()
                    conn.begin()
                    conn.exec_driver_sql("INSERT INTO biz (id) VALUES (%(id)s)", {"id": biz_id})
                    handle = conn
                inserted = world.client.insert(BizJob(biz_id), InsertOpts(priority=1), tx=handle)
                open_txs.append((biz_id, conn, inserted.job))
            # Six transactions open at once, each holding a business row and its job,
            # while the client keeps claiming committed work around them.
            world.probe_rounds(8)
            assert world.started == {}
            committed = {biz_id for biz_id, _c, _j in open_txs if biz_id % 2 == 0}
            for biz_id, conn, _job in open_txs:
                if biz_id in committed:
                    conn.commit()
                else:
                    conn.rollback()
            wait_for_all(world.events, [job.id for biz_id, _c, job in open_txs if biz_id in committed])
            world.probe_rounds(3)
        finally:
            for _biz_id, conn, _job in open_txs:
                conn.close()
            if engine is not None:
                engine.dispose()
    assert world.started == {biz_id: True for biz_id in committed}
    with Database.from_url(db_url, pool_size=1) as db:
        kinds = {kind for (_state, _q, kind) in db.run(CountJobs(), readonly=True)}
        assert _counts(db) == Counter(completed=len(committed) + 11)  # rolled-back jobs never existed
    assert kinds == {"scale_biz", "scale_probe"}
