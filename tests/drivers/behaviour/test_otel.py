"""river_otel on both drivers and both databases, read back through the SDK's in-memory exporters."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import river_sync
from river_otel import METADATA_KEY, OtelMiddleware
from river_protocol.errors import ValidationError
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_sync import EventKind, InsertManyParams, InsertOpts, JobCancel, JobSnooze, PeriodicJob, QueueConfig
from tests.drivers.behaviour.support import (
    fast_client,
    leader_client,
    stored_metadata,
    wait_for,
    wait_for_all,
)
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task


class Telemetry:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.otel = OtelMiddleware(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)
        self.tracer = self.tracer_provider.get_tracer("tests")

    def finished(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        spans = self.finished(name)
        assert len(spans) == 1, [s.name for s in self.spans.get_finished_spans()]
        return spans[0]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        if data is None:  # nothing recorded yet
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for m in scope.metrics if m.name == metric
            for point in m.data.data_points
        ]


@pytest.fixture(name="tel")
def telemetry_fixture() -> Iterator[Telemetry]:
    tel = Telemetry()
    yield tel
    tel.tracer_provider.shutdown()
    tel.meter_provider.shutdown()


def instrumented(h: Harness, tel: Telemetry) -> dict[str, Any]:
    if h.driver == "sync":
        return {"middleware": [tel.otel.work], "insert_middleware": [tel.otel.insert_many]}
    return {"middleware": [tel.otel.work_async], "insert_middleware": [tel.otel.insert_many_async]}


def insert_under_span(h: Harness, tel: Telemetry, client: Any, *items: Any) -> list[Any]:
    """Insert ``items`` inside a span, as a web request would, in the driver's own task or thread."""
    raw = h.raw(client)
    if h.driver == "sync":
        with tel.tracer.start_as_current_span("web request"):
            return list(raw.insert_many(items))

    async def in_request() -> list[Any]:
        with tel.tracer.start_as_current_span("web request"):
            return list(await raw.insert_many(items))

    result: list[Any] = h.run(in_request)
    return result


def worked(h: Harness, client: Any, job_id: int, kind: EventKind = EventKind.JOB_COMPLETED) -> None:
    sub = client.subscribe([kind])
    with client:
        wait_for(sub, job_id)


def test_the_job_run_continues_the_trace_of_the_request_that_inserted_it(
    h: Harness, client_db_url: str, tel: Telemetry
) -> None:
    def work(args: Any) -> None:
        with tel.tracer.start_as_current_span("inside the job"):
            pass

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True), **instrumented(h, tel))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        (inserted,) = insert_under_span(h, tel, client, Task("traced"))
        wait_for(sub, inserted.job.id)
    request, insert = tel.one("web request"), tel.one("insert default")
    work_span, inside = tel.one("work task"), tel.one("inside the job")
    assert insert.parent is not None and insert.parent.span_id == request.context.span_id
    assert work_span.parent is not None and work_span.parent.span_id == insert.context.span_id
    assert inside.parent is not None and inside.parent.span_id == work_span.context.span_id
    assert len({s.context.trace_id for s in (request, insert, work_span, inside)}) == 1
    carried = stored_metadata(client_db_url, inserted.job.id)[METADATA_KEY]
    assert carried["traceparent"].split("-")[2] == format(insert.context.span_id, "016x")

    # Success leaves the status unset: OpenTelemetry leaves OK to the application.
    assert insert.kind is SpanKind.PRODUCER and insert.status.status_code is StatusCode.UNSET
    assert dict(insert.attributes or {}) == {
        "messaging.system": "river", "messaging.operation.type": "send", "messaging.operation.name": "insert",
        "messaging.batch.message_count": 1, "messaging.destination.name": "default", "river.job.kind": "task",
        "messaging.message.id": str(inserted.job.id), "river.job.id": inserted.job.id,
        "river.insert.duplicates": 0,
    }
    assert work_span.kind is SpanKind.CONSUMER and work_span.status.status_code is StatusCode.UNSET
    assert dict(work_span.attributes or {}) == {
        "messaging.system": "river", "messaging.operation.type": "process",
        "messaging.operation.name": "work",
        "messaging.destination.name": "default", "messaging.message.id": str(inserted.job.id),
        "river.job.id": inserted.job.id, "river.job.kind": "task", "river.job.attempt": 1,
        "river.job.priority": 1, "river.job.outcome": "completed",
    }


def test_a_batch_insert_is_one_producer_span_for_every_job(
    h: Harness, client_db_url: str, tel: Telemetry
) -> None:
    client = h.client(client_db_url, **instrumented(h, tel))
    results = insert_under_span(
        h, tel, client, Task("a"), InsertManyParams(Task("b"), InsertOpts(queue="other", tags=("tag",)))
    )
    span = tel.one("insert")
    assert span.attributes is not None and span.attributes["messaging.batch.message_count"] == 2
    assert "messaging.destination.name" not in span.attributes  # two queues
    parents = {stored_metadata(client_db_url, r.job.id)[METADATA_KEY]["traceparent"] for r in results}
    assert len(parents) == 1
    counts = {(p.attributes["messaging.destination.name"], p.attributes["river.insert.outcome"]): p.value
              for p in tel.points("river.insert.count")}
    assert counts == {("default", "inserted"): 1, ("other", "inserted"): 1}
    durations = tel.points("river.insert.duration")
    assert sorted(p.attributes["messaging.destination.name"] for p in durations) == ["default", "other"]
    assert all(p.count == 1 and p.attributes["river.insert.status"] == "ok" for p in durations)


def test_a_failing_job_has_an_error_status_with_the_exception_recorded(
    h: Harness, client_db_url: str, tel: Telemetry
) -> None:
    def work(args: Any) -> None:
        raise ValueError(f"cannot do {args.name}")

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True), **instrumented(h, tel))
    sub = client.subscribe([EventKind.JOB_FAILED])
    with client:
        (retried, last) = insert_under_span(
            h, tel, client, Task("this"), InsertManyParams(Task("that"), InsertOpts(max_attempts=1))
        )
        wait_for_all(sub, [retried.job.id, last.job.id])  # in either order
    by_id = {s.attributes["river.job.id"]: s for s in tel.finished("work task") if s.attributes}
    for result, outcome in ((retried, "error"), (last, "discard")):
        span = by_id[result.job.id]
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == f"ValueError: cannot do {result.job.args['name']}"
        assert span.attributes is not None and span.attributes["river.job.outcome"] == outcome
        assert span.attributes["error.type"] == "ValueError"
        (event,) = span.events
        assert event.name == "exception" and event.attributes is not None
        assert event.attributes["exception.type"] == "ValueError"
    work_counts = {p.attributes["river.job.outcome"]: p.value for p in tel.points("river.work.count")}
    assert work_counts == {"error": 1, "discard": 1}
    by_outcome = lambda p: p.attributes["river.job.outcome"]  # noqa: E731
    (discard, error) = sorted(tel.points("river.work.duration"), key=by_outcome)
    assert discard.count == error.count == 1
    assert discard.attributes == {"messaging.system": "river", "messaging.destination.name": "default",
                                         "river.job.kind": "task", "river.job.outcome": "discard"}


@pytest.mark.parametrize(
    ("outcome", "event", "status"),
    [
        ("snooze", EventKind.JOB_SNOOZED, StatusCode.UNSET),
        ("cancel", EventKind.JOB_CANCELLED, StatusCode.ERROR),
    ],
)
def test_snooze_and_cancel_are_outcomes_of_their_own(
    h: Harness, client_db_url: str, tel: Telemetry, outcome: str, event: EventKind, status: StatusCode
) -> None:
    def work(args: Any) -> None:
        if outcome == "snooze":
            raise JobSnooze(timedelta(hours=1))
        raise JobCancel("not wanted")

    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True), **instrumented(h, tel))
    sub = client.subscribe([event])
    with client:
        job_id = client.insert(Task()).job.id
        wait_for(sub, job_id)
    span = tel.one("work task")
    assert span.attributes is not None and span.attributes["river.job.outcome"] == outcome
    assert span.status.status_code is status


def test_no_context_leaks_from_one_job_to_the_next_on_a_reused_thread(
    h: Harness, client_db_url: str, tel: Telemetry
) -> None:
    threads: list[int] = []
    current: list[Any] = []

    def work(args: Any) -> None:
        threads.append(threading.get_ident())
        current.append(trace.get_current_span().get_span_context())

    one_at_a_time = {"default": QueueConfig(
        max_workers=1, fetch_cooldown=timedelta(milliseconds=5),
        fetch_poll_interval=timedelta(milliseconds=50),
    )}
    client = fast_client(h, client_db_url, h.workers(work, Task, threaded=True), queues=one_at_a_time,
                         **instrumented(h, tel))
    plain = h.client(client_db_url)  # no insert middleware: its jobs carry no trace context
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        (traced,) = insert_under_span(h, tel, client, Task("traced"))
        wait_for(sub, traced.job.id)
        untraced = plain.insert(Task("untraced"))
        wait_for(sub, untraced.job.id)
    first, second = sorted(tel.finished("work task"), key=lambda s: s.start_time or 0)
    assert first.parent is not None and first.parent.span_id == tel.one("insert default").context.span_id
    assert second.parent is None and second.context.trace_id != first.context.trace_id
    assert [c.span_id for c in current] == [first.context.span_id, second.context.span_id]
    if h.driver == "sync":
        assert threads[0] == threads[1]  # the client's job threads are long-lived
    assert not trace.get_current_span().get_span_context().is_valid


def test_the_sync_middleware_refuses_to_wrap_trio_calls(tel: Telemetry) -> None:
    async def trio_next(params: Any) -> list[Any]:
        return []

    with pytest.raises(ValidationError, match=r"give river_trio OtelMiddleware\.insert_many_async"):
        tel.otel.insert_many([], trio_next)  # type: ignore[arg-type]
    assert tel.one("insert").status.status_code is StatusCode.ERROR

    async def trio_work(ctx: Any, args: Any) -> None:
        return None

    class Ctx:
        job = JobRow(id=1, kind="task", encoded_args=b"{}", state=JobState.RUNNING, attempt=1)
        cancel_cause = None

    with pytest.raises(ValidationError, match=r"give river_trio OtelMiddleware\.work_async"):
        tel.otel.work(Ctx(), None, trio_work)


def test_a_job_inserted_by_one_service_continues_its_trace_in_another(
    h: Harness, client_db_url: str, tel: Telemetry
) -> None:
    web = Telemetry()  # another process: its own providers and exporter, only the database shared
    inserter = river_sync.Client(client_db_url, insert_middleware=[web.otel.insert_many])
    try:
        with web.tracer.start_as_current_span("web request"):
            job_id = inserter.insert(Task("elsewhere")).job.id
    finally:
        inserter.stop()
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task), **instrumented(h, tel))
    worked(h, client, job_id)
    insert, work = web.one("insert default"), tel.one("work task")
    assert work.parent is not None and work.parent.is_remote
    assert (work.parent.trace_id, work.parent.span_id) == (insert.context.trace_id, insert.context.span_id)
    assert tel.finished("insert default") == [] and web.finished("work task") == []


def test_a_run_cut_short_by_a_hard_stop_is_interrupted_not_an_error(
    h: Harness, client_db_url: str, tel: Telemetry
) -> None:
    entered = threading.Event()
    worker = h.workers(h.cancellable_worker(entered), Task)  # trio: Cancelled unwinds the middleware
    client = fast_client(h, client_db_url, worker, **instrumented(h, tel))
    client.start()
    client.insert(Task("long"))
    assert entered.wait(15)
    client.stop_and_cancel()
    # A claim in flight when the stop came may take the job again once its interruption put it
    # back (a producer starts every row it claimed, stopping or not, as Go's does); that run is
    # cut short by the same hard stop. Each run's span says so.
    spans = tel.finished("work task")
    assert 1 <= len(spans) <= 2, [s.name for s in tel.spans.get_finished_spans()]
    for span in spans:
        assert span.attributes is not None and span.attributes["river.job.outcome"] == "interrupted"
        assert span.attributes["river.job.attempt"] == 1  # an interrupted run gives its attempt back
        assert span.status.status_code is StatusCode.UNSET and span.events == ()


def test_a_periodic_insert_has_a_producer_span_that_its_run_continues(
    h: Harness, client_db_url: str, tel: Telemetry
) -> None:
    periodic = PeriodicJob(timedelta(hours=1), lambda: Task("periodic"), id="hourly", run_on_start=True)
    client = leader_client(h, client_db_url, h.workers(lambda args: None, Task), periodic_jobs=[periodic],
                           **instrumented(h, tel))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        event = sub.get(timeout=15)
    insert, work = tel.one("insert default"), tel.one("work task")
    assert insert.kind is SpanKind.PRODUCER and insert.status.status_code is StatusCode.UNSET
    assert insert.attributes is not None and insert.attributes["river.job.id"] == event.job.id
    assert insert.attributes["river.job.kind"] == "task"
    assert work.parent is not None and work.parent.span_id == insert.context.span_id
    stored = stored_metadata(client_db_url, event.job.id)
    assert stored["river:periodic_job_id"] == "hourly" and METADATA_KEY in stored
    counts = {p.attributes["river.insert.outcome"]: p.value for p in tel.points("river.insert.count")}
    assert counts == {"inserted": 1}
