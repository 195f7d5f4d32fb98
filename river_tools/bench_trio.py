"""``river bench --driver trio``: River's benchmark worked by a ``river_trio.Client``.

The accounting, figures and output lines are ``river_tools.bench``'s; this is
only the trio runner: the client, its completion events, the continuous
inserter and the one-second progress lines as tasks of one nursery.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

import trio

from river_protocol.workers import Workers
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


def bench_workers() -> Workers:
    """The no-op async worker."""

    async def work(args: BenchmarkArgs) -> None:
        return None

    workers = Workers()
    workers.job(BenchmarkArgs)(work)
    return workers


async def _run(plan: BenchPlan, tally: Tally, out: TextIO) -> float:
    from river_trio.client import Client

    client = Client(plan.url, schema=plan.schema, workers=bench_workers(),
                    queues=bench_queues(plan.max_workers), fetch_cooldown=FETCH_COOLDOWN)
    sub = client.subscribe(FINISH_EVENTS, maxsize=max(SUBSCRIBE_SIZE, plan.total_jobs or 0))
    done = trio.Event()

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
                await trio.sleep(0.002)
                continue
            args = [BenchmarkArgs(num + i + 1) for i in range(count)]
            num += count
            at = time.perf_counter()
            results = await client.insert_many(args)
            tally.add_inserted([r.job.id for r in results], at)

    async def report() -> None:
        next_report = time.perf_counter() + REPORT_PERIOD
        while True:
            await trio.sleep(max(next_report - time.perf_counter(), 0))
            print(period_line(tally.take_period(time.perf_counter())), file=out, flush=True)
            next_report += REPORT_PERIOD

    async def until_signalled() -> None:
        # The first SIGINT/SIGTERM ends the run with its summary (as Go's bench); once this
        # receiver is closed a second one interrupts as usual, abandoning a slow stop.
        if threading.current_thread() is not threading.main_thread():
            return
        with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async for _ in signals:
                print("bench: signal received; stopping (a second one abandons the stop)", file=out,
                      flush=True)
                done.set()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect)
        if plan.mode == MODE_CONTINUOUS:
            at = time.perf_counter()  # a first backlog, so workers have jobs from the start
            results = await client.insert_many([BenchmarkArgs(i + 1) for i in range(CONTINUOUS_BATCH)])
            tally.add_inserted([r.job.id for r in results], at)
        await nursery.start(client.run)
        tally.start(time.perf_counter())
        async with trio.open_nursery() as measuring:
            measuring.start_soon(report)
            measuring.start_soon(until_signalled)
            if plan.mode == MODE_CONTINUOUS:
                measuring.start_soon(insert_continuously)
            with trio.move_on_after(plan.duration if plan.duration is not None else float("inf")):
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


def run_trio(plan: BenchPlan, tally: Tally, out: TextIO) -> BenchResult:
    """Work the benchmark with a ``river_trio.Client`` (see ``river_tools.bench.run_sync``)."""
    ended_at: float = trio.run(_run, plan, tally, out)
    return result_of(plan, tally, ended_at)


__all__ = ["bench_workers", "run_trio"]
