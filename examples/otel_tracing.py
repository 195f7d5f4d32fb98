"""OpenTelemetry around River: a trace started in a "web request" continues in the job it enqueued.

Needs the ``otel`` extra and an SDK (``pip install -e '.[otel]' opentelemetry-sdk``). The
middleware itself uses only opentelemetry-api; this program brings the SDK, keeps finished spans
in memory and prints them as a tree, then prints the insert and work metrics::

    python examples/otel_tracing.py [URL]
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import ClassVar

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from river_db.migrator import Migrator
from river_otel import METADATA_KEY, OtelMiddleware
from river_sync import Client, EventKind, JobCancel, QueueConfig, Workers

spans = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
metric_reader = InMemoryMetricReader()
meter_provider = MeterProvider(metric_readers=[metric_reader])
tracer = tracer_provider.get_tracer("shop")
otel = OtelMiddleware(tracer_provider=tracer_provider, meter_provider=meter_provider)


@dataclass
class ChargeCard:
    kind: ClassVar[str] = "charge_card"
    order_id: int


workers = Workers()


@workers.job(ChargeCard)
def charge_card(args: ChargeCard) -> None:
    with tracer.start_as_current_span("call the payment provider"):
        if args.order_id == 2:
            raise JobCancel("card expired")


def database_url(argv: list[str]) -> str:
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("RIVER_DATABASE_URL"):
        return os.environ["RIVER_DATABASE_URL"]
    return "sqlite://" + os.path.join(tempfile.mkdtemp(prefix="river-example-"), "river.sqlite3")


def print_tree(finished: list[ReadableSpan]) -> None:
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(finished, key=lambda s: s.start_time or 0):
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        attrs = span.attributes or {}
        outcome = f" outcome={attrs['river.job.outcome']}" if "river.job.outcome" in attrs else ""
        status = span.status.status_code.name
        print(f"{'  ' * depth}{span.name} [{span.kind.name.lower()}, {status}]{outcome}")
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        print(f"trace {root.context.trace_id:032x}:")
        show(root, 1)


def main(argv: list[str] | None = None) -> int:
    url = database_url(sys.argv if argv is None else argv)
    with Migrator(url) as migrator:
        migrator.migrate_up()

    client = Client(url, workers=workers, queues={"default": QueueConfig(max_workers=2)},
                    middleware=[otel.work], insert_middleware=[otel.insert_many])
    with client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_CANCELLED]) as done, client:
        for order_id in (1, 2):
            with tracer.start_as_current_span(f"POST /orders/{order_id}"):
                job = client.insert(ChargeCard(order_id)).job
            carried = job.metadata[METADATA_KEY]
            print(f"job {job.id} carries {METADATA_KEY}: traceparent {carried['traceparent']}")
        for _ in range(2):
            done.get(timeout=10)

    print_tree(list(spans.get_finished_spans()))
    data = metric_reader.get_metrics_data()
    assert data is not None
    for metric in data.resource_metrics[0].scope_metrics[0].metrics:
        if metric.name.endswith(".count"):
            for point in sorted(metric.data.data_points, key=lambda p: sorted(p.attributes.items())):
                attrs = point.attributes
                outcome = attrs.get("river.job.outcome") or attrs.get("river.insert.outcome")
                print(f"{metric.name} kind={attrs['river.job.kind']} outcome={outcome}: {point.value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
