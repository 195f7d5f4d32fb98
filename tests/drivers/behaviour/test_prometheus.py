"""river_prometheus on every driver and both databases: the process's collectors move as jobs run
and are inserted, the database's are read at scrape time, and a client reports its producers' health."""

from __future__ import annotations

import socket
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import anyio
import httpx
import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import river_sync
from river_db.client_support import health_report
from river_prometheus import RiverMetrics, make_asgi_app, make_wsgi_app
from river_protocol.errors import ValidationError
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_sync import EventKind, InsertManyParams, InsertOpts, JobSnooze, UniqueOpts
from tests.drivers.behaviour.support import fast_client, wait_for, wait_for_all
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: CollectorRegistry) -> Samples:
    """What Prometheus would read: the text exposition, parsed back."""
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


def instrumented(h: Harness, metrics: RiverMetrics) -> dict[str, Any]:
    if h.driver == "sync":
        return {"middleware": [metrics.work], "insert_middleware": [metrics.insert_many]}
    return {"middleware": [metrics.work_async], "insert_middleware": [metrics.insert_many_async]}


def test_runs_are_counted_by_kind_queue_and_outcome_with_their_durations(
    h: Harness, client_db_url: str
) -> None:
    metrics = RiverMetrics()
    running_inside: list[float] = []

    def work(args: Any) -> None:
        running_inside.append(metrics.jobs_running.labels("default")._value.get())
        if args.name == "fail":
            raise ValueError("no")
        if args.name == "snooze":
            raise JobSnooze(timedelta(hours=1))

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True), **instrumented(h, metrics))
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED, EventKind.JOB_SNOOZED])
    assert scrape(metrics.registry).get(key("river_jobs_worked_total", kind="task", queue="default",
                                            outcome="completed"), 0) == 0
    with client:
        results = client.insert_many([
            Task("ok"), Task("ok"), Task("fail"), InsertManyParams(Task("fail"), InsertOpts(max_attempts=1)),
            Task("snooze"),
        ])
        wait_for_all(sub, [r.job.id for r in results])
    samples = scrape(metrics.registry)
    worked = {
        outcome: samples.get(key("river_jobs_worked_total", kind="task", queue="default", outcome=outcome))
        for outcome in ("completed", "error", "discard", "snooze")
    }
    assert worked == {"completed": 2, "error": 1, "discard": 1, "snooze": 1}
    assert samples[key("river_job_run_duration_seconds_count", kind="task")] == 5
    assert samples[key("river_job_run_duration_seconds_sum", kind="task")] > 0
    assert samples[key("river_jobs_running", queue="default")] == 0
    assert running_inside and all(n >= 1 for n in running_inside)  # counted while it ran
    assert samples[key("river_jobs_inserted_total", kind="task", queue="default", outcome="inserted")] == 5


def test_inserts_are_counted_with_unique_duplicates_apart(h: Harness, client_db_url: str) -> None:
    metrics = RiverMetrics()
    client = h.client(client_db_url, **instrumented(h, metrics))
    once = InsertOpts(unique_opts=UniqueOpts(by_args=True), queue="other")
    for _ in range(3):
        client.insert(Task("same"), once)
    client.insert_many([Task("a"), Task("b")])
    samples = scrape(metrics.registry)
    assert samples[key("river_jobs_inserted_total", kind="task", queue="other", outcome="inserted")] == 1
    assert samples[key("river_jobs_inserted_total", kind="task", queue="other", outcome="duplicate")] == 2
    assert samples[key("river_jobs_inserted_total", kind="task", queue="default", outcome="inserted")] == 2


def test_a_client_built_elsewhere_is_instrumented_before_it_starts(h: Harness, client_db_url: str) -> None:
    metrics = RiverMetrics()
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task, threaded=True))
    raw = h.raw(client)
    assert raw.middleware == () and raw.insert_middleware == ()
    raw.configure(**metrics.middleware_for(raw, asynchronous=h.driver != "sync"))
    assert len(raw.middleware) == 1 and len(raw.insert_middleware) == 1
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        job_id = client.insert(Task("x")).job.id
        wait_for(sub, job_id)
        with pytest.raises(Exception, match="only be configured before it starts"):
            raw.configure(middleware=[])
    samples = scrape(metrics.registry)
    assert samples[key("river_jobs_worked_total", kind="task", queue="default", outcome="completed")] == 1
    assert samples[key("river_jobs_inserted_total", kind="task", queue="default", outcome="inserted")] == 1


def test_stats_report_each_producer_alive_and_when_it_last_fetched(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task, threaded=True))
    raw = h.raw(client)
    assert raw.stats().producers == ()  # nothing started yet
    assert health_report(str(raw.state.value), raw.stats(), datetime.now(UTC))[0] is False
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        job_id = client.insert(Task("x")).job.id
        wait_for(sub, job_id)  # a claim has answered by now
        (producer,) = raw.stats().producers
        assert producer.queue == "default" and producer.state == "running"
        assert producer.alive and not producer.paused and producer.claim_failures == 0
        assert producer.last_fetched_at is not None
        assert abs((datetime.now(UTC) - producer.last_fetched_at).total_seconds()) < 60
        healthy, report = health_report(str(raw.state.value), raw.stats(), datetime.now(UTC))
        assert healthy and report["status"] == "ok"
        assert report["producers"][0]["queue"] == "default" and report["producers"][0]["alive"] is True
    (stopped,) = raw.stats().producers
    assert not stopped.alive and stopped.state == "stopped"
    healthy, report = health_report(str(raw.state.value), raw.stats(), datetime.now(UTC))
    assert not healthy and report["status"] == "failing" and report["client_state"] == "stopped"


def test_the_sync_middleware_refuses_an_async_call_next() -> None:
    metrics = RiverMetrics()

    async def async_next(*args: Any) -> list[Any]:
        return []

    with pytest.raises(ValidationError, match=r"give river_trio RiverMetrics\.insert_many_async"):
        metrics.insert_many([], async_next)  # type: ignore[arg-type]

    class Ctx:
        job = JobRow(id=1, kind="task", encoded_args=b"{}", state=JobState.RUNNING, attempt=1, queue="q")
        cancel_cause = None

    with pytest.raises(ValidationError, match=r"give river_trio RiverMetrics\.work_async"):
        metrics.work(Ctx(), None, async_next)
    assert scrape(metrics.registry)[key("river_jobs_running", queue="q")] == 0


# ---------------------------------------------------------------- the database, read at scrape time


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_database_collector_reads_jobs_per_queue_and_state_behind_a_cache(client_db_url: str) -> None:
    inserter = river_sync.Client(client_db_url)
    now = datetime.now(UTC)
    try:
        inserter.insert_many([Task("a"), Task("b")])
        waiting = inserter.insert(Task("old"), InsertOpts(queue="other"))
        inserter.insert(Task("later"), InsertOpts(scheduled_at=now + timedelta(hours=1)))
        scheduled_at = waiting.job.scheduled_at
        assert scheduled_at is not None
        clock = FakeMonotonic()
        metrics = RiverMetrics()
        collector = metrics.watch_database(client_db_url, cache_seconds=5.0)
        collector._monotonic = clock  # the cache's clock, moved by hand below
        collector._now = lambda: scheduled_at + timedelta(seconds=90)
        samples = scrape(metrics.registry)
        assert samples[key("river_database_up")] == 1
        assert samples[key("river_jobs", queue="default", state="available")] == 2
        assert samples[key("river_jobs", queue="default", state="scheduled")] == 1
        assert samples[key("river_jobs", queue="other", state="available")] == 1
        assert samples[key("river_jobs", queue="other", state="completed")] == 0  # every state, zeros too
        assert samples[key("river_queue_oldest_available_job_age_seconds", queue="other")] == 90
        # default's oldest available job was inserted just before other's: a little older
        assert 90 <= samples[key("river_queue_oldest_available_job_age_seconds", queue="default")] < 100
        assert collector.reads == 1

        inserter.insert(Task("c"))
        clock.now += 4.9  # still cached: a second scraper costs the database nothing
        assert scrape(metrics.registry)[key("river_jobs", queue="default", state="available")] == 2
        assert collector.reads == 1
        clock.now += 0.2
        assert scrape(metrics.registry)[key("river_jobs", queue="default", state="available")] == 3
        assert collector.reads == 2
    finally:
        inserter.stop()


def test_a_database_that_cannot_be_read_reports_down_without_failing_the_scrape(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite3"
    metrics = RiverMetrics()
    metrics.watch_database(f"sqlite://{missing}")
    samples = scrape(metrics.registry)
    assert samples[key("river_database_up")] == 0
    assert not any(name == "river_jobs" for name, _ in samples)
    assert not missing.exists()  # never created by a scrape
    unmigrated = tmp_path / "empty.sqlite3"
    sqlite3.connect(unmigrated).close()
    other = RiverMetrics()
    other.watch_database(f"sqlite://{unmigrated}")
    assert scrape(other.registry)[key("river_database_up")] == 0
    with socket.socket() as silent:  # a Postgres that never answers: the read gives up, the scrape doesn't
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        stalled = RiverMetrics()
        port = silent.getsockname()[1]
        stalled.watch_database(f"postgresql://postgres@127.0.0.1:{port}/x").connect_timeout = 1
        assert scrape(stalled.registry)[key("river_database_up")] == 0
    with pytest.raises(ValidationError, match="in-memory"):
        RiverMetrics().watch_database("sqlite://:memory:")
    with pytest.raises(ValidationError):
        RiverMetrics().watch_database("mysql://nope")


def test_the_asgi_and_wsgi_apps_serve_the_registry(client_db_url: str) -> None:
    metrics = RiverMetrics()
    metrics.watch_database(client_db_url)
    metrics.jobs_worked.labels("task", "default", "completed").inc()

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=make_asgi_app(metrics.registry))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.get("/metrics")

    response = anyio.run(get)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    assert 'river_jobs_worked_total{kind="task",outcome="completed",queue="default"} 1.0' in response.text
    assert "river_database_up 1.0" in response.text

    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(make_wsgi_app(metrics.registry)(environ, lambda s, headers: status.append(s)))
    assert status == ["200 OK"] and b"river_jobs_worked_total" in body


def test_registries_are_never_shared_implicitly() -> None:
    first, second = RiverMetrics(), RiverMetrics()  # no collision: each has its own registry
    assert first.registry is not second.registry and first.registry is not REGISTRY
    shared = CollectorRegistry()
    RiverMetrics(shared)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        RiverMetrics(shared)
