"""Job counts and queue ages read from the database when Prometheus scrapes, behind a short cache.

Every scrape within ``cache_seconds`` of the last read gets that read's values, so
several Prometheus servers (or a fast scrape interval) cost the database one count
per interval. The read opens its own connection and closes it: it never borrows a
client's pool, so it serves a process whose client is async as well as one whose
client is threaded, and a read that fails reports ``river_database_up 0`` rather
than failing the whole scrape.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from river_db.connect import open_connection
from river_db.executor import Executor
from river_db.urls import parse_database_url
from river_protocol.admin import count_by_queue_and_state
from river_protocol.dashboard import OldestAvailable, waited
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError
from river_protocol.intents import CountJobs
from river_protocol.states import JobState

log = logging.getLogger("river.prometheus")

JOBS = "river_jobs"
OLDEST = "river_queue_oldest_available_job_age_seconds"
UP = "river_database_up"


@dataclass(frozen=True, slots=True)
class DatabaseReading:
    """One read: jobs per (queue, state), and the age of each queue's oldest available job."""

    jobs: dict[tuple[str, JobState], int]
    oldest_available_seconds: dict[str, float]


def read_database(executor: Executor, now: datetime) -> DatabaseReading:
    """Count the jobs per queue and state (``CountJobs``, as ``river queues list``), then read
    the oldest available job of each queue that has one (``OldestAvailable``, as the dashboard)."""
    jobs = count_by_queue_and_state(executor.run(CountJobs()))
    queues = tuple(sorted(queue for (queue, state), n in jobs.items() if state is JobState.AVAILABLE and n))
    scheduled: dict[str, datetime] = executor.run(OldestAvailable(queues))
    return DatabaseReading(jobs, {q: waited(at, now).total_seconds() for q, at in scheduled.items()})


class DatabaseCollector(Collector):
    """``river_jobs{queue,state}``, ``river_queue_oldest_available_job_age_seconds{queue}`` and
    ``river_database_up``, read from ``database_url`` at most once per ``cache_seconds``."""

    def __init__(
        self,
        database_url: str,
        *,
        schema: str | None = None,
        cache_seconds: float = 5.0,
        connect_timeout: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._url = parse_database_url(database_url)  # a bad URL is refused here, not at a scrape
        if self._url.in_memory:
            raise ValidationError("an in-memory SQLite database exists only inside its connection; "
                                  "give the collector the file's URL")
        self._url_text = database_url
        self._schema = schema
        self.cache_seconds = cache_seconds
        # A Postgres that does not answer fails the read (river_database_up 0), not the scrape.
        self.connect_timeout = connect_timeout
        self._monotonic = monotonic
        self._now = now or _utcnow
        self._lock = threading.Lock()  # concurrent scrapes wait for one read rather than each read
        self._cached: tuple[float, DatabaseReading | None] | None = None
        self.reads = 0  # reads that reached the database (the cache's effect, for tests and logs)

    def describe(self) -> Iterable[Metric]:
        return self._families(DatabaseReading({}, {}), up=True)

    def collect(self) -> Iterable[Metric]:
        reading = self.reading()
        return self._families(reading or DatabaseReading({}, {}), up=reading is not None)

    def reading(self) -> DatabaseReading | None:
        """The cached reading, or a new one when it is older than ``cache_seconds`` (None: failed)."""
        with self._lock:
            now = self._monotonic()
            if self._cached is not None and now - self._cached[0] < self.cache_seconds:
                return self._cached[1]
            reading = self._read()
            self._cached = (self._monotonic(), reading)  # a failure is cached too: no retry storm
            return reading

    def _read(self) -> DatabaseReading | None:
        self.reads += 1
        try:
            if self._url.dialect == "sqlite" and not os.path.exists(self._url.path):
                raise FileNotFoundError(f"no SQLite database at {os.path.abspath(self._url.path)}")
            conn, dialect_name = open_connection(self._url_text, connect_timeout=self.connect_timeout)
            try:
                dialect_class = PostgresDialect if dialect_name == "postgres" else SQLiteDialect
                return read_database(Executor(conn, dialect_class(schema=self._schema)), self._now())
            finally:
                conn.close()
        except Exception as exc:
            log.warning("river: reading job counts for Prometheus failed: %s", " ".join(str(exc).split()))
            return None

    @staticmethod
    def _families(reading: DatabaseReading, *, up: bool) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(JOBS, "Jobs in the database, by queue and state", labels=["queue", "state"])
        for (queue, state), n in reading.jobs.items():
            jobs.add_metric([queue, state.value], n)
        yield jobs
        oldest = GaugeMetricFamily(OLDEST, "Seconds the oldest available job of each queue has waited "
                                   "since it was scheduled (no series: none available)", labels=["queue"])
        for queue, seconds in sorted(reading.oldest_available_seconds.items()):
            oldest.add_metric([queue], seconds)
        yield oldest
        yield GaugeMetricFamily(UP, "Whether the last read of the database's job counts succeeded",
                                value=1 if up else 0)


def _utcnow() -> datetime:
    return datetime.now(UTC)


__all__ = ["DatabaseCollector", "DatabaseReading", "read_database"]
