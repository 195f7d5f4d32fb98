"""``transaction(client)``: one transaction to pass as ``tx=`` to the async client.

::

    async with river_trio.transaction(client) as tx:   # or river_asyncio.transaction
        await anyio.to_thread.run_sync(tx.execute, "INSERT INTO orders ...")
        await client.insert(SendReceipt(order_id), tx=tx)   # exists only if the block commits

The block commits when it ends normally and rolls back on an exception,
cancellation included. The yielded object is the driver's own blocking
connection (psycopg 3 ``Connection`` or a sqlite3/sqlean connection usable
from any thread); run your own statements on it in a worker thread. The
connection is borrowed from the client's ``AsyncDatabase`` for the block;
on SQLite that is the single writer (``BEGIN IMMEDIATE``), so calls without
``tx=`` that need to write, made inside the block by the same task, are
refused instead of deadlocking (see ``river_sync.transactions``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from river_async.database import AsyncDatabase
from river_protocol.errors import ValidationError


async def _database(database: Any) -> tuple[AsyncDatabase, bool]:
    """(AsyncDatabase, owned) for a Client, AsyncDatabase, URL or SQLite path."""
    from river_async.client import Client

    if isinstance(database, Client):
        return await database._ensure_db(), False
    if isinstance(database, AsyncDatabase):
        return database, False
    if isinstance(database, str | Path):
        text = str(database)
        if "://" in text:
            return await AsyncDatabase.from_url(text), True
        return await AsyncDatabase.from_sqlite_path(text), True
    raise ValidationError(
        "transaction() takes a Client, an AsyncDatabase, a URL or a SQLite path, "
        f"got {type(database).__qualname__}"
    )


@asynccontextmanager
async def transaction(database: Any) -> AsyncIterator[Any]:
    """A connection inside BEGIN (BEGIN IMMEDIATE on SQLite); commit on success, rollback on error."""
    db, owned = await _database(database)
    try:
        async with db.transaction() as executor:
            yield executor.conn
    finally:
        if owned:
            await db.aclose()
