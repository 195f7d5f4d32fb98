"""Throughput and notification latency of the trio I/O layer.

``python -m benchmarks.trio_io [postgres-url]`` prints:

- queries/s with 10 tasks through ``AsyncDatabase`` (borrow a connection, run
  one statement, give it back; and with one executor held per task), next to
  the naive alternative the issue measured (``trio.to_thread.run_sync`` with a
  CapacityLimiter around a psycopg pool);
- NOTIFY to delivery latency of the thread-free LISTEN notifier (p50/p99);
- the same two figures for SQLite (outbox polled every 50 ms).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.intents import Notify, Statement
from river_trio.database import AsyncDatabase
from river_trio.notifier import notifier_for

TASKS = 10
DURATION = 2.0
NOTIFY_ROUNDS = 300
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


async def _rate(op: Callable[[], Awaitable[Any]], tasks: int = TASKS, duration: float = DURATION) -> float:
    count = 0
    deadline = trio.current_time() + duration

    async def worker() -> None:
        nonlocal count
        while trio.current_time() < deadline:
            await op()
            count += 1

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(worker)
    return count / (time.perf_counter() - started)


async def _executor_rate(db: AsyncDatabase, readonly: bool) -> float:
    async def op() -> None:
        async with db.executor(readonly=readonly) as ex:
            await ex.execute(Statement("SELECT 1"))

    return await _rate(op)


async def _held_rate(db: AsyncDatabase, tasks: int = TASKS, duration: float = DURATION) -> float:
    """Each task keeps one executor (as a client component does) and runs statements on it."""
    count = 0
    deadline = trio.current_time() + duration

    async def worker() -> None:
        nonlocal count
        async with db.executor() as ex:
            while trio.current_time() < deadline:
                await ex.execute(Statement("SELECT 1"))
                count += 1

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(worker)
    return count / (time.perf_counter() - started)


async def _naive_rate(url: str) -> float:
    from psycopg_pool import ConnectionPool

    pool: ConnectionPool[Any] = ConnectionPool(url, min_size=TASKS, max_size=TASKS,
                                               kwargs={"autocommit": True}, open=True)
    pool.wait()
    limiter = trio.CapacityLimiter(TASKS)

    def query() -> None:
        with pool.connection() as conn:
            conn.execute("SELECT 1").fetchall()

    async def op() -> None:
        await trio.to_thread.run_sync(query, limiter=limiter)

    try:
        return await _rate(op)
    finally:
        pool.close()


async def _latency(db: AsyncDatabase, rounds: int) -> tuple[float, float]:
    notifier = notifier_for(db)
    send, recv = trio.open_memory_channel[tuple[str, str]](rounds)
    samples: list[float] = []
    async with trio.open_nursery() as nursery:
        await notifier.subscribe("river_bench", send)
        await nursery.start(notifier.run)
        for i in range(rounds):
            started = time.perf_counter()
            await db.run(Notify("river_bench", (str(i),)))
            with trio.fail_after(10):
                while (await recv.receive())[1] != str(i):
                    pass
            samples.append(time.perf_counter() - started)
        nursery.cancel_scope.cancel()
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.99) - 1] * 1000


async def _postgres(url: str) -> None:
    async with await AsyncDatabase.from_url(url, pool_size=TASKS) as db:
        ours = await _executor_rate(db, readonly=False)
        held = await _held_rate(db)
        naive = await _naive_rate(url)
        p50, p99 = await _latency(db, NOTIFY_ROUNDS)
    print(f"postgres  queries/s, {TASKS} tasks, AsyncDatabase executor : {ours:8.0f}")
    print(f"postgres  queries/s, {TASKS} tasks, one executor per task  : {held:8.0f}")
    print(f"postgres  queries/s, {TASKS} tasks, to_thread + psycopg_pool: {naive:8.0f}")
    print(f"postgres  LISTEN notification latency: p50 {p50:.2f} ms, p99 {p99:.2f} ms")


async def _sqlite() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.sqlite3")
        conn = connect_sqlite(path)
        Migrator(conn).migrate_up()
        conn.close()
        async with await AsyncDatabase.from_sqlite_path(path, readers=TASKS) as db:
            reads = await _executor_rate(db, readonly=True)
            writes = await _executor_rate(db, readonly=False)
            p50, p99 = await _latency(db, 40)
    print(f"sqlite    queries/s, {TASKS} tasks, readers: {reads:8.0f}, writer: {writes:8.0f}")
    print(f"sqlite    outbox notification latency (50 ms poll): p50 {p50:.1f} ms, p99 {p99:.1f} ms")


def main(argv: list[str] | None = None) -> None:
    args = argv if argv is not None else sys.argv[1:]
    url = args[0] if args else os.environ.get("RIVER_TEST_DATABASE_URL", DEFAULT_URL)
    try:
        trio.run(_postgres, url)
    except Exception as exc:  # no server: still report SQLite
        print(f"postgres benchmark skipped: {type(exc).__name__}: {exc}")
    trio.run(_sqlite)


if __name__ == "__main__":
    main()
