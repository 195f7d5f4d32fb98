"""The shop's web service: ``uvicorn --factory storefront.app:create_app``.

``POST /orders`` saves the order and inserts its ``send_receipt`` job in the
same ``AsyncSession`` transaction (``tx=session``), then charges the card. A
declined card raises inside the transaction: it rolls back, and neither the
order nor its job exists. Nothing can send a receipt for an order that never
committed, and no committed order lacks its receipt job.

The lifespan starts the River client with the app and stops it with the app.
This client only inserts (no ``queues=``): jobs run in ``river work``
processes (``storefront_worker``), so a slow job never holds up a request, web
and worker processes scale and deploy on their own, and ``uvicorn --workers 4``
does not start four job workers. Giving this client ``queues=`` works too (one
process serving both), the client's tasks then run on the app's event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Literal, TypedDict

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession

import river_asyncio
from storefront import settings
from storefront.db import Database, Order
from storefront.jobs import SendReceipt, make_workers
from storefront.payments import PaymentDeclined, charge

PRICE_CENTS = {"book": 1500, "mug": 900, "pen": 250}


class OrderIn(BaseModel):
    item: Literal["book", "mug", "pen"]
    quantity: int = Field(gt=0, le=100)
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+$", max_length=254)
    card: str = Field(min_length=1, description="the payment provider's card token")


class OrderOut(BaseModel):
    id: int
    item: str
    quantity: int
    email: str
    receipt_sent_at: datetime | None


class OrderPlaced(OrderOut):
    receipt_job_id: int


class State(TypedDict):
    database: Database
    river: river_asyncio.Client


# --8<-- [start:create_app]  (docs/guides/asyncio.md includes this function)
def create_app(database_url: str | None = None) -> FastAPI:
    url = database_url or settings.database_url()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[State]:
        database = Database.open(url)
        try:
            async with river_asyncio.Client(url, workers=make_workers(database)) as river:
                yield {"database": database, "river": river}  # request.state.database / .river
        finally:
            await database.close()

    app = FastAPI(title="storefront", lifespan=lifespan)
    app.include_router(router)
    app.add_exception_handler(PaymentDeclined, payment_declined)
    return app
# --8<-- [end:create_app]


# ---------------------------------------------------------------- dependencies


async def session(request: Request) -> AsyncIterator[AsyncSession]:
    async with request.state.database.sessions() as s:
        yield s


def river(request: Request) -> river_asyncio.Client:
    client: river_asyncio.Client = request.state.river
    return client


Session = Annotated[AsyncSession, Depends(session)]
River = Annotated[river_asyncio.Client, Depends(river)]


# ---------------------------------------------------------------- routes

router = APIRouter()


# --8<-- [start:place_order]  (docs/guides/asyncio.md includes this route)
@router.post("/orders", status_code=201)
async def place_order(order_in: OrderIn, session: Session, river: River) -> OrderPlaced:
    async with session.begin():  # commits at the end of the block; any exception rolls it back
        order = Order(item=order_in.item, quantity=order_in.quantity, email=order_in.email)
        session.add(order)
        await session.flush()  # the order's id, for its job
        job = (await river.insert(SendReceipt(order_id=order.id), tx=session)).job
        await charge(order_in.card, order_id=order.id, amount_cents=PRICE_CENTS[order.item] * order.quantity)
    return OrderPlaced(id=order.id, item=order.item, quantity=order.quantity, email=order.email,
                       receipt_sent_at=None, receipt_job_id=job.id)
# --8<-- [end:place_order]


@router.get("/orders/{order_id}")
async def get_order(order_id: int, session: Session) -> OrderOut:
    order = await session.get(Order, order_id)
    if order is None:
        raise HTTPException(status_code=404, detail=f"no order {order_id}")
    return OrderOut(id=order.id, item=order.item, quantity=order.quantity, email=order.email,
                    receipt_sent_at=order.receipt_sent_at)


async def payment_declined(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(status_code=402, content={"detail": str(exc)})
