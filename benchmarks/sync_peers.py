"""The Python peers through the sync benchmark's workload: bulk insert, then burn-down.

Run in a child process (``python -m benchmarks.sync_driver child-peer NAME URL N``)
so peak RSS is the peer's own. The peers are installed by nox's bench session
only; a missing one is reported, not fatal. Each gets the settings its own
docs suggest for throughput (async no-op tasks, batch fetching where offered).
"""

from __future__ import annotations

import asyncio
import resource
import time
from contextlib import suppress
from importlib import metadata
from typing import Any

from benchmarks.fresh_state import AUTOVACUUM_OFF

BATCH = 1_000
TIME_LIMIT = 120.0  # seconds of burn-down; the rate is then what got done


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _pgqueuer(url: str, n: int) -> dict[str, Any]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    conn = await asyncpg.connect(url)
    queries = Queries(AsyncpgDriver(conn))
    await queries.install()

    async def fill() -> float:
        start = time.perf_counter()
        for first in range(0, n, BATCH):
            size = min(BATCH, n - first)
            await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
        return n / (time.perf_counter() - start)

    async def burn(batch_size: int, threaded: bool, tasks: int | None = None) -> tuple[float, int]:
        qm = QueueManager(Queries(AsyncpgDriver(await asyncpg.connect(url))))

        def blocking() -> None:
            return None

        @qm.entrypoint("noop")
        async def noop(job: Any) -> None:
            if threaded:
                await asyncio.to_thread(blocking)

        start = time.perf_counter()
        with suppress(TimeoutError):
            await asyncio.wait_for(qm.run(batch_size=batch_size, mode=QueueExecutionMode.drain,
                                          max_concurrent_tasks=tasks), TIME_LIMIT)
        elapsed = time.perf_counter() - start
        done = n - int(await conn.fetchval("SELECT count(*) FROM pgqueuer"))
        await conn.execute("DELETE FROM pgqueuer")
        return done / elapsed, done

    insert = await fill()
    # QueueManager.run's default batch size is 10; sync work goes through asyncio.to_thread
    # (pgqueuer refuses plain functions), the like-for-like case for our thread workers.
    variants = {}
    # batch 500 with 1,000 concurrent tasks measured best here for issue 9 (18,021 jobs/s).
    for label, batch_size, threaded, tasks in (
        ("batch_size 10", 10, False, None), ("batch_size 100", 100, False, None),
        ("batch_size 500, max_concurrent_tasks 1000", 500, False, 1000),
        ("batch_size 100, sync no-op via to_thread", 100, True, None),
    ):
        if variants:
            await fill()
        variants[label] = await burn(batch_size, threaded, tasks)
    await conn.close()
    best = max(variants, key=lambda k: variants[k][0])
    setup = "asyncpg, async entrypoint, drain mode; " + "; ".join(
        f"{k}: {r:,.0f} jobs/s" + ("" if d == n else f" ({d:,} done)") for k, (r, d) in variants.items()
    )
    return {"version": metadata.version("pgqueuer"), "setup": setup, "insert": insert,
            "burn": variants[best][0], "done": variants[best][1], "best": best,
            "variants": {k: r for k, (r, _d) in variants.items()}, "rss_mb": _rss_mb()}


async def _procrastinate(url: str, n: int) -> dict[str, Any]:
    import procrastinate

    concurrency = 100
    setup = f"psycopg, async no-op task, concurrency {concurrency}, wait=False"
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, max_size=20))

    @app.task(name="noop")
    async def noop(n: int) -> None:
        return None

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        start = time.perf_counter()
        for first in range(0, n, BATCH):
            await noop.batch_defer_async(*({"n": i} for i in range(first, min(n, first + BATCH))))
        insert = n / (time.perf_counter() - start)
        start = time.perf_counter()
        with suppress(TimeoutError):
            await asyncio.wait_for(
                app.run_worker_async(concurrency=concurrency, wait=False, install_signal_handlers=False),
                TIME_LIMIT,
            )
        elapsed = time.perf_counter() - start
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'").fetchone()
    done = int(row[0]) if row else 0
    return {"version": metadata.version("procrastinate"), "setup": setup, "insert": insert,
            "burn": done / elapsed, "done": done, "rss_mb": _rss_mb()}


async def pgqueuer_burn(url: str, n: int, batch_size: int, tasks: int | None) -> dict[str, Any]:
    """Bulk-load ``n`` no-op jobs, then drain them with one pgqueuer QueueManager configured
    so; jobs/s and the process's CPU per job during the drain (what ``river bench`` reports)."""
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    conn = await asyncpg.connect(url)
    queries = Queries(AsyncpgDriver(conn))
    with suppress(Exception):  # already installed by an earlier round
        await queries.install()
    # Emptied as River Go's bench empties its own table (TRUNCATE, then VACUUM): a round
    # must not inherit the dead rows and the log of the ones before it (rounds also gives
    # each run a new database). Autovacuum off, as for River's tables (benchmarks.fresh_state).
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
    await conn.execute("VACUUM ANALYZE pgqueuer")
    await conn.execute(AUTOVACUUM_OFF)
    for first in range(0, n, BATCH):
        size = min(BATCH, n - first)
        await queries.enqueue(["noop"] * size, [None] * size, [0] * size)
    qm = QueueManager(Queries(AsyncpgDriver(await asyncpg.connect(url))))

    @qm.entrypoint("noop")
    async def noop(job: Any) -> None:
        return None

    start, cpu = time.perf_counter(), time.process_time()
    with suppress(TimeoutError):
        await asyncio.wait_for(qm.run(batch_size=batch_size, mode=QueueExecutionMode.drain,
                                      max_concurrent_tasks=tasks), TIME_LIMIT)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    done = n - int(await conn.fetchval("SELECT count(*) FROM pgqueuer"))
    await conn.close()
    return {"version": metadata.version("pgqueuer"), "jobs_per_sec": done / elapsed, "done": done,
            "client_cpu_us_per_job": cpu / max(done, 1) * 1e6, "peak_rss_mb": _rss_mb()}


def run(peer: str, url: str, n: int) -> dict[str, Any]:
    runner = {"pgqueuer": _pgqueuer, "procrastinate": _procrastinate}.get(peer)
    if runner is None:
        return {"error": f"unknown peer {peer!r}"}
    try:
        return asyncio.run(runner(url, n))
    except ImportError as exc:
        return {"error": f"{peer} is not installed here ({exc}); `nox -s bench` installs it"}
