"""The shop's job: send an order's receipt once the order has committed.

The web process and the worker share this bundle: the web client checks that
what it inserts has a worker, the worker's client runs it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from river_asyncio import JobCancel, Workers
from storefront.db import Database, Order

log = logging.getLogger("storefront.jobs")


@dataclass
class SendReceipt:
    kind: ClassVar[str] = "send_receipt"
    order_id: int


def make_workers(database: Database) -> Workers:
    workers = Workers()

    @workers.job(SendReceipt)
    async def send_receipt(args: SendReceipt) -> None:
        async with database.sessions.begin() as session:  # commits when the block ends
            order = await session.get(Order, args.order_id)
            if order is None:  # the job commits with its order, so only a later delete gets here
                raise JobCancel(f"order {args.order_id} no longer exists")
            log.info("receipt for order %s (%s x %s) sent to %s", order.id, order.quantity, order.item,
                     order.email)
            order.receipt_sent_at = datetime.now(UTC)

    return workers
