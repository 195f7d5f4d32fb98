"""``transaction(client)``: one transaction to pass as ``tx=`` to the client.

::

    with river_sync.transaction(client) as tx:
        tx.execute("INSERT INTO orders ...")          # your own statements
        client.insert(SendReceipt(order_id), tx=tx)   # exists only if the block commits

    async with river_trio.transaction(client) as tx:   # or river_asyncio.transaction
        await anyio.to_thread.run_sync(tx.execute, "INSERT INTO orders ...")
        await client.insert(SendReceipt(order_id), tx=tx)

The block commits when it ends normally and rolls back on an exception
(cancellation included on the async clients). The yielded object is the
driver's own blocking connection (psycopg 3 ``Connection`` or a sqlite3/sqlean
connection usable from any thread), so any code that takes a DB-API connection
can share the transaction; an async client runs its own statements on it in a
worker thread.

Pools: the connection is borrowed from the client's ``AsyncDatabase`` (its
psycopg pool, SQLAlchemy engine or SQLite handle) for the duration of the block
and handed back afterwards; keep blocks short, a pooled connection is busy the
whole time.

SQLite: the transaction starts with ``BEGIN IMMEDIATE``, taking the write
lock up front, because River's requests write and a deferred transaction that
upgrades to a writer later can fail with SQLITE_BUSY instead of waiting. The
database is in WAL mode, so readers (other connections, other processes) keep
reading meanwhile. Writers elsewhere wait up to the busy timeout (5 s by
default, ``from_sqlite_path(busy_timeout_ms=...)``) and then fail with
"database is locked". Inside this process the block holds the single writer
connection: a client call *without* ``tx=`` that needs to write, made inside
the block on the same thread or task, is refused with an error rather than
deadlocking; pass ``tx=`` instead.

Requests made with ``tx=`` run directly in the caller's transaction, without
savepoints: if one raises, the transaction is in an unknown state (on
Postgres it is aborted) and must be rolled back, which leaving the block with
the exception does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from river_anyio.database import AsyncDatabase
from river_protocol.errors import ValidationError


async def _database(database: Any) -> tuple[AsyncDatabase, bool]:
    """(AsyncDatabase, owned) for a Client, AsyncDatabase, URL or SQLite path."""
    from river_anyio.client import Client

    if isinstance(database, Client):
        if True:  # ASYNC
            return await database._ensure_db(), False
        else:
            return database.database, False
    if isinstance(database, AsyncDatabase):
        return database, False
    if isinstance(database, str | Path):
        text = str(database)
        if "://" in text:
            return await AsyncDatabase.from_url(text), True
        return await AsyncDatabase.from_sqlite_path(text), True
    raise ValidationError(
        f"transaction() takes a Client, its database, a URL or SQLite path; got {type(database).__qualname__}"
    )


@asynccontextmanager
async def transaction(database: Any) -> AsyncIterator[Any]:
    """A connection inside BEGIN (BEGIN IMMEDIATE on SQLite); commit on success, rollback on error."""
    db, owned = await _database(database)
    try:
        if True:  # ASYNC
            async with db.transaction() as executor:
                yield executor.conn
        else:
            # The connection's own transaction (psycopg's on Postgres), so a caller that commits or
            # rolls back inside the block itself leaves nothing for us to end.
            with db.executor() as executor:
                conn = executor.conn
                if db.dialect.name == "postgres":
                    with conn.transaction():
                        yield conn
                else:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        yield conn
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                    if conn.in_transaction:
                        conn.execute("COMMIT")
    finally:
        if owned:
            await db.aclose()
