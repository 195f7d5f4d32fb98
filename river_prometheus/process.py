"""This process's job metrics, counted by middleware that serves both kinds of client.

``RiverMetrics.work``/``insert_many`` are ``river_sync``'s middleware,
``work_async``/``insert_many_async`` those of ``river_trio`` and ``river_asyncio``;
all four count through the same collectors and differ only in how they wait for
``call_next`` (``river_protocol.middleware.ClientMiddleware``, shared with ``river_otel``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from river_prometheus.database import DatabaseCollector
from river_protocol.intents import InsertParams, InsertResult
from river_protocol.job import JobRow
from river_protocol.middleware import ClientMiddleware, InsertFinish, insert_outcomes, outcome_label

# Seconds: from a few milliseconds (most jobs) to River's default job timeout (one minute) and past it.
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class RiverMetrics(ClientMiddleware):
    """Counters of the jobs this process worked and inserted, in ``registry``.

    ``registry`` defaults to a new ``CollectorRegistry``, never prometheus_client's global
    one: pass ``prometheus_client.REGISTRY`` to add River's metrics to it. Two
    ``RiverMetrics`` cannot share a registry (their names would collide); one serves any
    number of clients of this process.

    - ``river_jobs_worked_total{kind,queue,outcome}``: runs ended, by the outcome the
      completer records (``completed``, ``error``, ``discard``, ``cancel``, ``snooze``,
      ``interrupted``);
    - ``river_job_run_duration_seconds{kind}``: how long each run took (the worker and
      any middleware inside this one);
    - ``river_jobs_running{queue}``: runs in progress now;
    - ``river_jobs_inserted_total{kind,queue,outcome}``: rows inserted, found as unique
      duplicates (``duplicate``), or lost with an insert that raised (``error``).
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, buckets: Sequence[float] = DEFAULT_BUCKETS
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.jobs_worked = Counter(
            "river_jobs_worked", "Job runs ended in this process, by kind, queue and outcome",
            ["kind", "queue", "outcome"], registry=self.registry,
        )
        self.run_duration = Histogram(
            "river_job_run_duration_seconds", "Duration of one job run in this process, by kind",
            ["kind"], registry=self.registry, buckets=tuple(buckets),
        )
        self.jobs_running = Gauge(
            "river_jobs_running", "Job runs in progress in this process, by queue", ["queue"],
            registry=self.registry,
        )
        self.jobs_inserted = Counter(
            "river_jobs_inserted", "Jobs inserted by this process, by kind, queue and outcome "
            "(inserted, duplicate: a unique job already there, error: the insert raised)",
            ["kind", "queue", "outcome"], registry=self.registry,
        )

    def watch_database(
        self, database_url: str, *, schema: str | None = None, cache_seconds: float = 5.0
    ) -> DatabaseCollector:
        """Add the database's job counts and queue ages, read at scrape time, to this registry."""
        collector = DatabaseCollector(database_url, schema=schema, cache_seconds=cache_seconds)
        self.registry.register(collector)
        return collector

    def middleware_for(self, client: Any, *, asynchronous: bool) -> dict[str, tuple[Callable[..., Any], ...]]:
        """``client``'s middleware with this one's outermost, for ``client.configure(**...)``:
        instruments a client built elsewhere (``river work --metrics-port``) before it starts."""
        work: Callable[..., Any] = self.work_async if asynchronous else self.work
        insert: Callable[..., Any] = self.insert_many_async if asynchronous else self.insert_many
        return {
            "middleware": (work, *client.middleware),
            "insert_middleware": (insert, *client.insert_middleware),
        }

    # ---------------------------------------------------------------- shared

    @contextmanager
    def _working(self, ctx: Any) -> Iterator[Callable[[Any], None]]:
        job: JobRow = ctx.job
        running = self.jobs_running.labels(job.queue)
        running.inc()
        started = time.perf_counter()
        done: list[Any] = []
        outcome = "error"
        try:
            yield done.append
            outcome = outcome_label(job, done[0] if done else None, None, cancel_cause=ctx.cancel_cause)
        except BaseException as exc:
            outcome = outcome_label(job, None, exc, cancel_cause=ctx.cancel_cause)
            raise
        finally:
            running.dec()
            self.run_duration.labels(job.kind).observe(time.perf_counter() - started)
            self.jobs_worked.labels(job.kind, job.queue, outcome).inc()

    @contextmanager
    def _inserting(
        self, params: Sequence[InsertParams]
    ) -> Iterator[tuple[Sequence[InsertParams], InsertFinish]]:
        done: list[Sequence[InsertResult]] = []
        try:
            yield params, done.append
        finally:
            for (kind, queue, outcome), n in insert_outcomes(params, done[0] if done else None).items():
                self.jobs_inserted.labels(kind, queue, outcome).inc(n)
