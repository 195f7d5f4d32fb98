"""Helpers shared by the async I/O layer's tests (test_async_database.py) and the async client's
caller transactions on blocking connections (test_caller_tx_async_threaded.py): job parameters,
nonces, waiting for a condition, and reading pg_stat_activity."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread
import psycopg

from river_protocol.intents import InsertParams

WAIT = 10.0  # seconds a test waits for a condition it polls for


def job(kind: str = "trio_k") -> InsertParams:
    return InsertParams(kind=kind, encoded_args=b'{"n":1}')


def nonce() -> str:
    return uuid.uuid4().hex[:16]


async def eventually(predicate: Callable[[], Awaitable[bool]], what: str) -> None:
    with anyio.move_on_after(WAIT):
        while not await predicate():
            await anyio.sleep(0.01)
        return
    raise AssertionError(f"timed out waiting for {what}")


def admin_rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


async def running_query(url: str, pid: int, fragment: str) -> bool:
    rows = await anyio.to_thread.run_sync(
        admin_rows, url,
        "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active' AND query LIKE %s",
        (pid, f"%{fragment}%"))
    return bool(rows)
