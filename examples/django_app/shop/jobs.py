"""The shop's job: its args, its worker, and the insert-only client the views use."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

from django.conf import settings
from django.db import close_old_connections
from django.db.models import F

import river_sync
from shop.models import Order


@dataclasses.dataclass
class SendReceipt:
    kind: ClassVar[str] = "send_receipt"
    order_id: int


workers = river_sync.Workers()


@workers.job(SendReceipt)
def send_receipt(args: SendReceipt) -> None:
    # A real shop would email the customer here; counting shows the job ran exactly once.
    sent = Order.objects.filter(id=args.order_id).update(receipts_sent=F("receipts_sent") + 1)
    if not sent:
        raise ValueError(f"order {args.order_id} does not exist")


def django_connections(ctx: Any, args: Any, call_next: Any) -> Any:
    """Work middleware: what Django's request cycle does for a view, around each job.

    Job threads live long; closing connections Django considers stale (CONN_MAX_AGE,
    errors) keeps a worker from holding a broken one.
    """
    close_old_connections()
    try:
        return call_next(ctx, args)
    finally:
        close_old_connections()


@functools.cache
def inserter() -> river_sync.Client:
    """An insert-only client (no queues, nothing started); views pass tx=django.db.connection."""
    return river_sync.Client(settings.DATABASE_URL, workers=workers)
