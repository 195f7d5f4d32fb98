"""``river bench --driver trio`` and ``--driver asyncio``: River's benchmark worked by an async client.

One runner for both async clients, on AnyIO: ``river_trio.Client`` under the
trio backend, ``river_asyncio.Client`` under asyncio (each class names its
backend in ``ANYIO_BACKEND``). The accounting, figures and output lines are
``river_tools.bench``'s; this is only the async runner: the client, its
completion events, the continuous inserter and the one-second progress lines
as tasks of one task group.

The per-job path is the collector alone, and it uses only the client's own
subscription (``async for`` and ``get_nowait``), so AnyIO adds nothing per job;
the other tasks wake once a second, or once per inserted batch.
"""

from __future__ import annotations

import threading
import time
from typing import Any, TextIO

import anyio

from river_protocol.workers import Workers
from river_tools import async_runner
from river_tools.async_runner import DriverUnavailableError  # raised by client_class
from river_tools.bench import (
    CONTINUOUS_BATCH,
    FETCH_COOLDOWN,
    FINISH_EVENTS,
    MODE_CONTINUOUS,
    REPORT_PERIOD,
    STOP_SIGNALS,
    SUBSCRIBE_SIZE,
    BenchmarkArgs,
    BenchPlan,
    BenchResult,
    Tally,
    bench_queues,
    drain,
    on_events,
    period_line,
    result_of,
)

ASYNC_DRIVERS = async_runner.PACKAGES  # driver (its backend's name) -> the package of its Client


def client_class(driver: str) -> Any:
    """The ``Client`` class of async ``driver``, imported only now (an asyncio run loads no trio)."""
    if driver not in ASYNC_DRIVERS:
        raise ValueError(f"no async driver {driver!r}; async drivers: {', '.join(ASYNC_DRIVERS)}")
    return async_runner.client_package(driver, needed_by=f"--driver {driver}").Client


def bench_workers() -> Workers:
    """The no-op async worker."""

    async def work(args: BenchmarkArgs) -> None:
        return None

    workers = Workers()
    workers.job(BenchmarkArgs)(work)
    return workers


def new_client(client_cls: Any, plan: BenchPlan) -> Any:
    return client_cls(plan.url, schema=plan.schema, workers=bench_workers(),
                      queues=bench_queues(plan.max_workers), fetch_cooldown=FETCH_COOLDOWN)


async def _run(client_cls: Any, plan: BenchPlan, tally: Tally, out: TextIO) -> float:
    client = new_client(client_cls, plan)
    sub = client.subscribe(FINISH_EVENTS, maxsize=max(SUBSCRIBE_SIZE, plan.total_jobs or 0))
    done = anyio.Event()

    async def collect() -> None:
        async for event in sub:
            # With whatever else is queued: a scheduling round per event would cost more
            # than the event (Go's bench reads its channel in a loop the same way).
            on_events(tally, drain(sub, event))
            if plan.total_jobs and tally.worked >= plan.total_jobs:
                done.set()

    async def insert_continuously() -> None:
        num = tally.inserted
        while True:
            count = min(tally.backlog_shortfall(), CONTINUOUS_BATCH)
            if not count:
                await anyio.sleep(0.002)
                continue
            args = [BenchmarkArgs(num + i + 1) for i in range(count)]
            num += count
            at = time.perf_counter()
            results = await client.insert_many(args)
            tally.add_inserted([r.job.id for r in results], at)

    async def report() -> None:
        next_report = time.perf_counter() + REPORT_PERIOD
        while True:
            await anyio.sleep(max(next_report - time.perf_counter(), 0))
            print(period_line(tally.take_period(time.perf_counter())), file=out, flush=True)
            next_report += REPORT_PERIOD

    async def until_signalled() -> None:
        # The first SIGINT/SIGTERM ends the run with its summary (as Go's bench); once this
        # receiver is closed a second one interrupts as usual, abandoning a slow stop.
        if threading.current_thread() is not threading.main_thread():
            return
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async for _ in signals:
                print("bench: signal received; stopping (a second one abandons the stop)", file=out,
                      flush=True)
                done.set()
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(collect)
        if plan.mode == MODE_CONTINUOUS:
            at = time.perf_counter()  # a first backlog, so workers have jobs from the start
            results = await client.insert_many([BenchmarkArgs(i + 1) for i in range(CONTINUOUS_BATCH)])
            tally.add_inserted([r.job.id for r in results], at)
        await tg.start(client.run)
        tally.start(time.perf_counter())
        async with anyio.create_task_group() as measuring:
            measuring.start_soon(report)
            measuring.start_soon(until_signalled)
            if plan.mode == MODE_CONTINUOUS:
                measuring.start_soon(insert_continuously)
            with anyio.move_on_after(plan.duration if plan.duration is not None else float("inf")):
                await done.wait()
            measuring.cancel_scope.cancel()
        ended_at = time.perf_counter()
        tally.end(ended_at)
        final = tally.take_period(ended_at)
        if final.seconds > 0.05 or final.worked:
            print(period_line(final), file=out, flush=True)
        await client.stop()  # closes the subscription: collect() drains it and returns
    tally.dropped = sub.dropped
    return ended_at


def run_async(plan: BenchPlan, tally: Tally, out: TextIO, *, driver: str | None = None) -> BenchResult:
    """Work the benchmark with the Client of async ``driver`` (default ``plan.driver``) on the
    AnyIO backend it names (see ``river_tools.bench.run_sync``)."""
    client_cls = client_class(driver or plan.driver)
    backend = async_runner.backend_of(client_cls)
    ended_at: float = async_runner.run(_run, client_cls, plan, tally, out, backend=backend, loop=plan.loop)
    return result_of(plan, tally, ended_at)


__all__ = ["ASYNC_DRIVERS", "DriverUnavailableError", "bench_workers", "client_class", "new_client",
           "run_async"]
