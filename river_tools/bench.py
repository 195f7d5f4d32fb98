"""River's benchmark, measured: what ``river bench`` runs and what the scripts under ``benchmarks/`` share.

Mirrors Go River's ``river bench``: a no-op worker for the ``benchmark`` kind
(args ``{"num": N}``, so a Go bench and this one could work each other's
jobs), one ``default`` queue, fetch cooldown 2 ms and poll interval 20 ms.
Two modes: burn-down (bulk-load N jobs, then start the client and work them
all) and continuous (keep a backlog topped up and work for a duration).

Jobs count as worked when their completion event arrives, as in Go: the event
comes after the completer has committed the outcome, so the figures include
that write. This module holds the driver-neutral parts (accounting, figures,
database preparation, the output lines) and the threaded runner;
``river_tools.bench_async`` holds the async clients' runner (trio and asyncio).
"""

from __future__ import annotations

import dataclasses
import math
import random
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, TextIO

from river_db.events import SubscriptionTimeoutError
from river_protocol.client_core import ClientConfig, ClientCore, EventKind, QueueConfig
from river_protocol.intents import InsertJobsFast
from river_protocol.states import JobState
from river_protocol.workers import Workers

BENCH_KIND = "benchmark"  # Go's BenchmarkArgs kind
INSERT_BATCH = 5_000  # jobs per bulk insert in burn-down mode (Go's batch size)
CONTINUOUS_BATCH = 1_000  # most jobs per insert_many call in continuous mode
# Continuous mode keeps at least max_workers jobs unfinished (so every worker slot can be
# filled) and about a second of work at the last period's rate: a job's trip from insert to
# committed completion takes a good part of a second at saturation, and a smaller backlog
# starves the workers (throughput = jobs in flight / latency). Go keeps 75,000 queued, which
# at Python's rates would be a minute of queueing in every latency figure.
BACKLOG_SECONDS = 1.0
MAX_WORKERS_DEFAULT = 2_000  # Go's bench: ~1k-2k workers measured best there
FETCH_COOLDOWN = timedelta(milliseconds=2)
FETCH_POLL_INTERVAL = timedelta(milliseconds=20)
REPORT_PERIOD = 1.0  # seconds between progress lines
# Subscriptions drop events when full, and a dropped completion would stall the burn-down's
# bookkeeping: runners size theirs to at least the burn-down's job count.
SUBSCRIBE_SIZE = 1_000_000
FINISH_EVENTS = (EventKind.JOB_COMPLETED, EventKind.JOB_CANCELLED, EventKind.JOB_FAILED)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # as Go's bench: the first ends the run, with its summary

MODE_BURN_DOWN = "burn-down"
MODE_CONTINUOUS = "continuous"
LATENCY_CLIENT = "insert call -> completion event (client clock)"
LATENCY_QUEUED = "created_at -> completion event (time queued behind the bulk load included)"


@dataclasses.dataclass
class BenchmarkArgs:
    """Go's ``BenchmarkArgs``: ``{"num": N}`` of kind ``benchmark``."""

    kind: ClassVar[str] = BENCH_KIND
    num: int = 0


def bench_workers() -> Workers:
    """The no-op worker for threaded clients."""
    workers = Workers()
    workers.job(BenchmarkArgs)(lambda args: None)
    return workers


def bench_queues(max_workers: int) -> dict[str, QueueConfig]:
    return {"default": QueueConfig(max_workers=max_workers, fetch_cooldown=FETCH_COOLDOWN,
                                   fetch_poll_interval=FETCH_POLL_INTERVAL)}


@dataclasses.dataclass(frozen=True, slots=True)
class BenchPlan:
    """What to run. Exactly one of ``total_jobs`` (burn-down) and ``duration`` (continuous) is
    set, or neither (continuous until interrupted, as Go's bench does by default)."""

    url: str
    schema: str | None
    database: str  # "postgres" | "sqlite"
    driver: str  # "sync" | "trio" | "asyncio"
    max_workers: int = MAX_WORKERS_DEFAULT
    total_jobs: int | None = None
    duration: float | None = None  # seconds
    default_gc: bool = False  # True: leave the collector alone (else river_tools.gc_tuning, as river work)
    loop: str = "default"  # the asyncio driver's event loop: "default" or "uvloop"

    @property
    def mode(self) -> str:
        return MODE_BURN_DOWN if self.total_jobs else MODE_CONTINUOUS


# ---------------------------------------------------------------- figures


@dataclasses.dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles in seconds over ``count`` jobs, measured as ``source`` says."""

    p50: float
    p95: float
    p99: float
    count: int
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"p50": round(self.p50 * 1000, 3), "p95": round(self.p95 * 1000, 3),
                "p99": round(self.p99 * 1000, 3), "count": self.count, "source": self.source}


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ascending ``ordered``, linearly interpolated; NaN when empty."""
    if not ordered:
        return math.nan
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def latency_of(values: Iterable[float], source: str) -> Latency | None:
    ordered = sorted(values)
    if not ordered:
        return None
    return Latency(percentile(ordered, 0.50), percentile(ordered, 0.95), percentile(ordered, 0.99),
                   len(ordered), source)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@dataclasses.dataclass(frozen=True, slots=True)
class BenchResult:
    driver: str
    database: str
    mode: str
    jobs: int  # worked (completion events) while measured
    inserted: int
    seconds: float
    latency: Latency | None
    peak_rss_mb: float
    max_workers: int
    dropped_events: int = 0
    cpu_seconds: float = 0.0  # the whole process's CPU time (all threads) while measured

    @property
    def jobs_per_sec(self) -> float:
        return self.jobs / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_us_per_job(self) -> float | None:
        """Client CPU per job worked, in microseconds: what a job costs whatever the machine's load."""
        return self.cpu_seconds / self.jobs * 1e6 if self.jobs else None

    def to_json(self) -> dict[str, Any]:
        return {
            "driver": self.driver, "database": self.database, "mode": self.mode,
            "jobs": self.jobs, "inserted": self.inserted, "seconds": round(self.seconds, 4),
            "jobs_per_sec": round(self.jobs_per_sec, 1),
            "client_cpu_seconds": round(self.cpu_seconds, 4),
            "client_cpu_us_per_job": None if self.cpu_us_per_job is None else round(self.cpu_us_per_job, 2),
            "latency_ms": None if self.latency is None else self.latency.to_json(),
            "peak_rss_mb": round(self.peak_rss_mb, 1), "max_workers": self.max_workers,
            "fetch_cooldown_ms": FETCH_COOLDOWN / timedelta(milliseconds=1),
            "fetch_poll_interval_ms": FETCH_POLL_INTERVAL / timedelta(milliseconds=1),
            "dropped_events": self.dropped_events,
        }


# ---------------------------------------------------------------- accounting


@dataclasses.dataclass(frozen=True, slots=True)
class Period:
    worked: int
    inserted: int
    seconds: float
    total_worked: int

    @property
    def jobs_per_sec(self) -> float:
        return self.worked / self.seconds if self.seconds > 0 else 0.0


class Tally:
    """Counts inserts and finished jobs, and their latencies. Thread-safe (the threaded runner's
    inserter and event collector both write here); times come from ``time.perf_counter``.

    With ``track_latency`` (continuous mode) each job's insert call time is paired with its
    completion event time. Otherwise (burn-down, where jobs come from a bulk load that returns
    no ids) the runner passes each job's age at its completion event: the row's created_at to
    the event's arrival. Not created_at -> finalized_at: finalized_at is when the worker
    returned, before the completer committed the outcome, and that commit is part of the cost.
    """

    def __init__(self, *, track_latency: bool, backlog_min: int = MAX_WORKERS_DEFAULT,
                 cpu_clock: Callable[[], float] = time.process_time) -> None:
        self._lock = threading.Lock()
        self._cpu_clock = cpu_clock
        self._cpu_started: float | None = None
        self._cpu_ended: float | None = None
        self.backlog_min = backlog_min
        self.track_latency = track_latency
        self.inserted = 0
        self.worked = 0
        self.dropped = 0
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.last_worked_at: float | None = None
        self._inserted_at: dict[int, float] = {}
        # A completion can be seen before insert_many has returned the ids it belongs to.
        self._finished_early: dict[int, float] = {}
        self._latencies: list[float] = []
        self._period_start = 0.0
        self._period_worked = 0
        self._period_inserted = 0
        self._rate = 0.0

    def start(self, now: float) -> None:
        with self._lock:
            self._cpu_started = self._cpu_clock()
            self.started_at = self._period_start = now
            self._period_worked, self._period_inserted = self.worked, self.inserted

    def end(self, now: float) -> None:
        """Stop counting: jobs finishing while the client shuts down are not part of the run."""
        with self._lock:
            self.ended_at = now
            self._cpu_ended = self._cpu_clock()

    def add_inserted(self, job_ids: Sequence[int], at: float) -> None:
        with self._lock:
            self.inserted += len(job_ids)
            if not self.track_latency:
                return
            for job_id in job_ids:
                done = self._finished_early.pop(job_id, None)
                if done is None:
                    self._inserted_at[job_id] = at
                else:
                    self._latencies.append(done - at)

    def add_bulk(self, count: int) -> None:
        with self._lock:
            self.inserted += count

    def add_finished(self, job_id: int, at: float, age: float | None = None) -> None:
        """Job ``job_id``'s completion event arrived at ``at``; ``age``: seconds since its created_at."""
        self.add_finished_many(((job_id, at, age),))

    def add_finished_many(self, finished: Sequence[tuple[int, float, float | None]]) -> None:
        """``add_finished`` for each (job_id, at, age), under one hold of the lock."""
        with self._lock:
            if self.started_at is None or self.ended_at is not None:
                return
            for job_id, at, age in finished:
                self.worked += 1
                self.last_worked_at = at
                if age is not None:
                    self._latencies.append(age)
                elif self.track_latency:
                    inserted = self._inserted_at.pop(job_id, None)
                    if inserted is None:
                        self._finished_early[job_id] = at
                    else:
                        self._latencies.append(at - inserted)

    def backlog_shortfall(self) -> int:
        """How many jobs continuous mode should insert now to keep its backlog (0: none)."""
        with self._lock:
            target = max(self.backlog_min, int(self._rate * BACKLOG_SECONDS))
            return max(target - (self.inserted - self.worked), 0)

    def take_period(self, now: float) -> Period:
        with self._lock:
            period = Period(self.worked - self._period_worked, self.inserted - self._period_inserted,
                            now - self._period_start, self.worked)
            if period.seconds >= 0.5:
                self._rate = period.jobs_per_sec
            self._period_start, self._period_worked, self._period_inserted = now, self.worked, self.inserted
            return period

    def latencies(self) -> list[float]:
        with self._lock:
            return list(self._latencies)

    def cpu_seconds(self) -> float:
        """Process CPU time from ``start`` to ``end`` (or to now while still counting)."""
        if self._cpu_started is None:
            return 0.0
        end = self._cpu_ended if self._cpu_ended is not None else self._cpu_clock()
        return max(end - self._cpu_started, 0.0)

    def measured_seconds(self, ended_at: float) -> float:
        """Client start to the last job worked (Go's measure), or to ``ended_at`` if none was."""
        if self.started_at is None:
            return 0.0
        end = self.last_worked_at if self.last_worked_at is not None else ended_at
        return max(end - self.started_at, 0.0)


def on_event(tally: Tally, event: Any) -> None:
    """Count ``event`` if it means a benchmark job is done for good (a failure only once
    discarded, as Go's bench counts it)."""
    on_events(tally, (event,))


def on_events(tally: Tally, events: Sequence[Any]) -> None:
    """``on_event`` for each of ``events`` (what a collector took at once), under one lock hold."""
    wall, at = time.time(), time.perf_counter()
    finished: list[tuple[int, float, float | None]] = []
    for event in events:
        job = event.job
        if job is None or event.kind not in FINISH_EVENTS:
            continue
        if event.kind is EventKind.JOB_FAILED and job.state is not JobState.DISCARDED:
            continue
        age = None
        if not tally.track_latency and job.created_at is not None:
            age = wall - job.created_at.timestamp()
        finished.append((int(job.id), at, age))
    if finished:
        tally.add_finished_many(finished)


def drain(sub: Any, first: Any) -> list[Any]:
    """``first`` and every event already queued behind it on ``sub`` (a collector's batch)."""
    events = [first]
    while True:
        try:
            events.append(sub.get_nowait())
        except (SubscriptionTimeoutError, EOFError):
            return events


def result_of(plan: BenchPlan, tally: Tally, ended_at: float) -> BenchResult:
    source = LATENCY_QUEUED if plan.mode == MODE_BURN_DOWN else LATENCY_CLIENT
    return BenchResult(
        driver=plan.driver, database=plan.database, mode=plan.mode, jobs=tally.worked,
        inserted=tally.inserted, seconds=tally.measured_seconds(ended_at),
        latency=latency_of(tally.latencies(), source),
        peak_rss_mb=peak_rss_mb(), max_workers=plan.max_workers, dropped_events=tally.dropped,
        cpu_seconds=tally.cpu_seconds(),
    )


# ---------------------------------------------------------------- output lines


def period_line(p: Period) -> str:
    return (f"bench: jobs worked [ {p.worked:10d} ], inserted [ {p.inserted:10d} ], "
            f"job/sec [ {p.jobs_per_sec:10.1f} ], total worked [ {p.total_worked:10d} ] [{p.seconds:.2f}s]")


def final_lines(r: BenchResult) -> list[str]:
    lines = [
        f"bench: total jobs worked [ {r.jobs:10d} ], total jobs inserted [ {r.inserted:10d} ], "
        f"overall job/sec [ {r.jobs_per_sec:10.1f} ], running {r.seconds:.2f}s",
    ]
    if r.latency is None:
        lines.append("bench: latency: no job was both inserted and completed while measuring")
    else:
        lat = r.latency
        lines.append(f"bench: latency {lat.source}: p50 {lat.p50 * 1000:.1f} ms, "
                     f"p95 {lat.p95 * 1000:.1f} ms, p99 {lat.p99 * 1000:.1f} ms ({lat.count} jobs)")
    if r.cpu_us_per_job is not None:
        lines.append(f"bench: client CPU {r.cpu_us_per_job:.1f} us/job ({r.cpu_seconds:.2f}s of process CPU "
                     f"for {r.jobs} jobs, all threads)")
    lines.append(f"bench: {r.driver} driver on {r.database}, {r.mode}, max workers {r.max_workers}, "
                 f"peak RSS {r.peak_rss_mb:.0f} MB")
    if r.dropped_events:
        lines.append(f"bench: warning: {r.dropped_events} completion events were dropped; counts are low")
    return lines


# ---------------------------------------------------------------- database


def fast_insert_intents(
    dialect: str, n: int, make_args: Callable[[int], Any] = BenchmarkArgs, *, batch: int = INSERT_BATCH,
    first: int = 1,
) -> Iterator[InsertJobsFast]:
    """Bulk inserts of ``make_args(first) .. make_args(first + n - 1)``, ``batch`` jobs each,
    planned lazily (so timing the loop that runs them includes planning, as River's
    InsertManyFast does)."""
    core = ClientCore(ClientConfig(client_id="bench", dialect=dialect), Workers(), random.Random())
    for start in range(first, first + n, batch):
        items = [make_args(i) for i in range(start, min(first + n, start + batch))]
        yield InsertJobsFast(jobs=core.plan_insert(items, datetime.now(UTC)).insert.jobs)


def fast_insert(db: Any, n: int, make_args: Callable[[int], Any] = BenchmarkArgs, *,
                batch: int = INSERT_BATCH, on_batch: Callable[[int], None] | None = None) -> float:
    """Insert ``n`` jobs through ``InsertJobsFast`` (COPY on Postgres) on a ``river_sync``
    Database; returns jobs/s, planning included."""
    started = time.perf_counter()
    for intent in fast_insert_intents(db.dialect.name, n, make_args, batch=batch):
        db.run(intent)
        if on_batch is not None:
            on_batch(len(intent.jobs))
    elapsed = time.perf_counter() - started
    return n / elapsed if elapsed > 0 else math.inf


def _scalar(db: Any, sql: str, *, readonly: bool = True) -> Any:
    with db.executor(readonly=readonly) as ex:
        row = ex.conn.execute(sql).fetchone()
    return row[0] if row else None


def count_jobs(db: Any) -> int:
    """Rows in river_job, whatever their state."""
    return int(_scalar(db, f"SELECT count(*) FROM {db.dialect.prefix}river_job"))


def count_completed(db: Any) -> int:
    return int(_scalar(db, f"SELECT count(*) FROM {db.dialect.prefix}river_job WHERE state = 'completed'"))


def delete_jobs(db: Any) -> int:
    """Delete every job (the schema and other tables stay); returns how many there were."""
    table = f"{db.dialect.prefix}river_job"
    with db.executor() as ex:
        count = int(ex.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        if db.dialect.name == "postgres":
            # TRUNCATE also returns the table's space, as Go's reset (truncate + vacuum) does.
            ex.conn.execute(f"TRUNCATE {table}")
        else:
            ex.conn.execute(f"DELETE FROM {table}")
    return count


def db_latencies(db: Any) -> list[float]:
    """Seconds from created_at to finalized_at of every completed job."""
    table = f"{db.dialect.prefix}river_job"
    if db.dialect.name == "postgres":
        sql = (f"SELECT extract(epoch FROM finalized_at - created_at)::float8 FROM {table}"
               " WHERE state = 'completed'")
    else:
        sql = (f"SELECT (julianday(finalized_at) - julianday(created_at)) * 86400.0 FROM {table}"
               " WHERE state = 'completed'")
    with db.executor(readonly=True) as ex:
        return [float(r[0]) for r in ex.conn.execute(sql).fetchall()]


# ---------------------------------------------------------------- the threaded runner


@contextmanager
def stop_on_signals(on_first: Callable[[], None]) -> Iterator[None]:
    """While open, the first SIGINT/SIGTERM calls ``on_first`` (the run then ends with its
    summary); a second raises KeyboardInterrupt, abandoning a slow stop. Only the main thread
    can handle signals, so elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = 0

    def handle(signum: int, frame: Any) -> None:
        nonlocal received
        received += 1
        if received > 1:
            raise KeyboardInterrupt
        on_first()

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_sync(plan: BenchPlan, tally: Tally, out: TextIO) -> BenchResult:
    """Work the benchmark with a ``river_sync.Client``; ``tally`` already counts any bulk-loaded
    jobs. Prints a period line to ``out`` every ``REPORT_PERIOD``; SIGINT/SIGTERM end the run
    early (the summary is still computed)."""
    from river_sync.client import Client

    client = Client(plan.url, schema=plan.schema, workers=bench_workers(),
                    queues=bench_queues(plan.max_workers), fetch_cooldown=FETCH_COOLDOWN)
    sub = client.subscribe(FINISH_EVENTS, maxsize=max(SUBSCRIBE_SIZE, plan.total_jobs or 0))
    done = threading.Event()
    stop_inserting = threading.Event()

    def collect() -> None:
        for event in sub:
            on_events(tally, drain(sub, event))
            if plan.total_jobs and tally.worked >= plan.total_jobs:
                done.set()

    def insert_continuously() -> None:
        num = tally.inserted
        while not stop_inserting.is_set():
            count = min(tally.backlog_shortfall(), CONTINUOUS_BATCH)
            if not count:
                stop_inserting.wait(0.002)
                continue
            args = [BenchmarkArgs(num + i + 1) for i in range(count)]
            num += count
            at = time.perf_counter()
            results = client.insert_many(args)
            tally.add_inserted([r.job.id for r in results], at)

    def interrupted() -> None:
        print("bench: signal received; stopping (a second one abandons the stop)", file=out, flush=True)
        done.set()

    collector = threading.Thread(target=collect, name="river-bench-events", daemon=True)
    inserter = threading.Thread(target=insert_continuously, name="river-bench-insert", daemon=True)
    collector.start()
    with stop_on_signals(interrupted):
        try:
            if plan.mode == MODE_CONTINUOUS:
                at = time.perf_counter()  # a first backlog, so workers have jobs from the start
                results = client.insert_many([BenchmarkArgs(i + 1) for i in range(CONTINUOUS_BATCH)])
                tally.add_inserted([r.job.id for r in results], at)
            client.start()
            tally.start(time.perf_counter())
            if plan.mode == MODE_CONTINUOUS:
                inserter.start()
            ended_at = _report_until_done(plan, tally, out, done)
        finally:
            stop_inserting.set()
            if inserter.is_alive():
                inserter.join()
            client.stop()
            tally.dropped = sub.dropped
            sub.close()
            collector.join(10)
    return result_of(plan, tally, ended_at)


def _report_until_done(plan: BenchPlan, tally: Tally, out: TextIO, done: threading.Event) -> float:
    """Print period lines until ``done`` or the duration is up; returns when the run ended."""
    started = time.perf_counter()
    deadline = math.inf if plan.duration is None else started + plan.duration
    next_report = started + REPORT_PERIOD
    while True:
        now = time.perf_counter()
        if now >= deadline or done.wait(max(min(next_report, deadline) - now, 0)):
            break
        now = time.perf_counter()
        if now >= next_report:
            print(period_line(tally.take_period(now)), file=out, flush=True)
            next_report += REPORT_PERIOD
    ended_at = time.perf_counter()
    tally.end(ended_at)
    final = tally.take_period(ended_at)
    if final.seconds > 0.05 or final.worked:
        print(period_line(final), file=out, flush=True)
    return ended_at
