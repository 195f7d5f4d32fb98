"""OpenTelemetry spans, metrics and trace propagation around River inserts and runs.

One ``OtelMiddleware`` serves both drivers: ``insert_many``/``work`` are the
``river_sync`` middleware, ``insert_many_async``/``work_async`` the
``river_trio`` ones; all four share the span and metric logic below and only
differ in how they wait for ``call_next``.

Trace context travels in the job's metadata under ``METADATA_KEY``, a key of
its own so that a Go client's metadata (River's ``river:`` keys, otelriver's)
never meets it: the consumer span of a job is a child of the producer span of
its insert, on whichever machine or driver works it. A job without that key
starts a new trace; a run never inherits whatever context its thread last had.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import SpanKind, Status, StatusCode

from river_protocol.intents import InsertParams, InsertResult
from river_protocol.job import JobRow
from river_protocol.middleware import ClientMiddleware, insert_outcomes, outcome_label, with_metadata

METADATA_KEY = "river_py:otel"
INSTRUMENTATION_NAME = "river_otel"
SYSTEM = "river"

# Outcomes that end a run unsuccessfully get an error status. Every other span's status
# stays unset: OpenTelemetry leaves OK to the application, an instrumentation library sets
# only errors (snoozed and interrupted runs come back, and are no errors either).
_ERROR_OUTCOMES = frozenset({"error", "discard", "cancel"})


class OtelMiddleware(ClientMiddleware):
    """Producer spans on insert, consumer spans on work, a duration histogram and a counter for each.

    ``tracer_provider``/``meter_provider``/``propagator`` default to the global ones
    (the propagator is looked up at each insert and run, so one set up later applies).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, meter_provider=meter_provider)
        self._propagator = propagator
        self.insert_duration = meter.create_histogram(
            "river.insert.duration", unit="s", description="Duration of one insert or batch insert"
        )
        self.insert_count = meter.create_counter(
            "river.insert.count", unit="{job}", description="Jobs inserted (or found as unique duplicates)"
        )
        self.work_duration = meter.create_histogram(
            "river.work.duration", unit="s", description="Duration of one job run"
        )
        self.work_count = meter.create_counter("river.work.count", unit="{job}", description="Job runs")

    # ---------------------------------------------------------------- shared

    def _propagation(self) -> TextMapPropagator:
        return self._propagator if self._propagator is not None else propagate.get_global_textmap()

    @contextmanager
    def _inserting(
        self, params: Sequence[InsertParams]
    ) -> Iterator[tuple[list[InsertParams], Callable[[Sequence[InsertResult]], None]]]:
        queues = sorted({p.queue for p in params})
        kinds = sorted({p.kind for p in params})
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "insert",
            "messaging.batch.message_count": len(params),
        }
        if len(queues) == 1:
            attributes["messaging.destination.name"] = queues[0]
        if len(kinds) == 1:
            attributes["river.job.kind"] = kinds[0]
        name = f"insert {queues[0]}" if len(queues) == 1 else "insert"
        started = time.perf_counter()
        span = self._tracer.start_span(name, kind=SpanKind.PRODUCER, attributes=attributes)
        span_context = trace.set_span_in_context(span)
        carrier: dict[str, str] = {}
        self._propagation().inject(carrier, context=span_context)
        carried = [with_metadata(p, {METADATA_KEY: carrier}) for p in params] if carrier else list(params)
        token = otel_context.attach(span_context)
        done: list[Sequence[InsertResult]] = []
        try:
            yield carried, done.append
        except BaseException as exc:
            _record_error(span, exc)
            self._count_inserts(params, None, time.perf_counter() - started)
            raise
        finally:
            otel_context.detach(token)
            if done:
                results = done[0]
                if len(results) == 1:
                    span.set_attribute("messaging.message.id", str(results[0].job.id))
                    span.set_attribute("river.job.id", results[0].job.id)
                span.set_attribute("river.insert.duplicates",
                                   sum(1 for r in results if r.unique_skipped_as_duplicate))
                self._count_inserts(params, results, time.perf_counter() - started)
            span.end()

    def _count_inserts(
        self, params: Sequence[InsertParams], results: Sequence[InsertResult] | None, seconds: float
    ) -> None:
        counts = insert_outcomes(params, results)
        # Each (kind, queue) of a batch waited the whole batch's time.
        status = "error" if results is None else "ok"
        for kind, queue in dict.fromkeys((k, q) for k, q, _ in counts):
            attrs = _metric_attributes(kind, queue, "river.insert.status", status)
            self.insert_duration.record(seconds, attrs)
        for (kind, queue, outcome), n in counts.items():
            self.insert_count.add(n, _metric_attributes(kind, queue, "river.insert.outcome", outcome))

    @contextmanager
    def _working(self, ctx: Any) -> Iterator[Callable[[Any], None]]:
        job: JobRow = ctx.job
        parent = self._parent_of(job)
        attributes: dict[str, Any] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "work",
            "messaging.destination.name": job.queue,
            "messaging.message.id": str(job.id),
            "river.job.id": job.id,
            "river.job.kind": job.kind,
            "river.job.attempt": job.attempt,
            "river.job.priority": job.priority,
        }
        if job.tags:
            attributes["river.job.tags"] = list(job.tags)
        started = time.perf_counter()
        span = self._tracer.start_span(f"work {job.kind}", context=parent, kind=SpanKind.CONSUMER,
                                       attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        done: list[Any] = []
        outcome = "error"
        try:
            yield done.append
            outcome = outcome_label(job, done[0] if done else None, None, cancel_cause=ctx.cancel_cause)
            if outcome in _ERROR_OUTCOMES:  # a returned JobCancel/JobDiscard
                span.set_status(Status(StatusCode.ERROR, f"job {outcome}"))
        except BaseException as exc:
            outcome = outcome_label(job, None, exc, cancel_cause=ctx.cancel_cause)
            if outcome in _ERROR_OUTCOMES:
                _record_error(span, exc)
            raise
        finally:
            otel_context.detach(token)
            span.set_attribute("river.job.outcome", outcome)
            span.end()
            seconds = time.perf_counter() - started
            attrs = _metric_attributes(job.kind, job.queue, "river.job.outcome", outcome)
            self.work_duration.record(seconds, attrs)
            self.work_count.add(1, attrs)

    def _parent_of(self, job: JobRow) -> Context:
        """The producer's context from the job's metadata, over an empty one (never the thread's)."""
        carrier = job.metadata.get(METADATA_KEY) if isinstance(job.metadata, Mapping) else None
        if not isinstance(carrier, Mapping):
            return Context()
        clean = {k: v for k, v in carrier.items() if isinstance(k, str) and isinstance(v, str)}
        return self._propagation().extract(clean, context=Context())


def _metric_attributes(kind: str, queue: str, outcome_key: str, outcome: str) -> dict[str, str]:
    return {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "river.job.kind": kind,
        outcome_key: outcome,
    }


def _record_error(span: trace.Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_attribute("error.type", type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
