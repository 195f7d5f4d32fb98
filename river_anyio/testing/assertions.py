"""Assertions about inserted jobs (River's ``rivertest.RequireInserted`` and friends).

Every assertion reads ``river_job`` through a *target*:

- a ``Client`` or its ``AsyncDatabase`` (committed jobs; an async insert-only
  client that has not opened its database yet opens it);
- a database URL or SQLite path (opened and closed for the check);
- a transaction: whatever ``client.insert(..., tx=tx)`` was given (a psycopg
  connection, SQLAlchemy Connection/Session or sqlite3/sqlean connection, and
  on asyncio psycopg's ``AsyncConnection``, SQLAlchemy's ``AsyncConnection``/
  ``AsyncSession`` or an asyncpg ``Connection``), read in that very transaction
  through the adapter the client inserts with, so jobs inserted with
  ``client.insert(..., tx=tx)`` are visible before commit (and only there); an
  autocommit connection outside a transaction is simply read (committed jobs);
  ``tx=`` does the same while the target (a client) gives the schema.

The expected job is a kind, an args type, or an args value. A value also
requires the job's args to equal its encoding (River only uses it for the
kind); ``args=`` takes a dict (the job's args must contain those members) or
an args value (equal encoding). Option filters left at ``None`` are not checked.

The expectations and verdicts are ``river_db.testing.expectations``'s, the
same for every client.

Differences from Go: ``require_inserted`` wants exactly one job *matching the
filters* (Go wants exactly one job of the kind, then checks the options), so
several jobs of a kind can be told apart by args. Failures raise
``AssertionError`` listing the jobs found, so pytest shows them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from river_anyio.database import AsyncDatabase
from river_anyio.executor import AsyncExecutor
from river_db.connect import dialect_for, outside_tx
from river_db.testing.expectations import (
    ExpectedJob,
    InsertedJob,
    describe_job,
    expectations_of,
    judge_inserted,
    judge_many_inserted,
    judge_not_inserted,
    list_jobs_page,
    page_after,
)
from river_protocol.golang.gotime import GoTime
from river_protocol.job import JobRow
from river_protocol.states import JobState

# ---------------------------------------------------------------- reading through a target


async def _open_url(target: str | Path, schema: str | None) -> AsyncDatabase:
    text = str(target)
    if isinstance(target, str) and "://" in text:
        return await AsyncDatabase.from_url(text, schema=schema)
    return await AsyncDatabase.from_sqlite_path(text, schema=schema)


@asynccontextmanager
async def reading(target: Any, *, tx: Any = None, schema: str | None = None) -> AsyncIterator[AsyncExecutor]:
    """An executor reading ``river_job`` through ``target`` (see the module docstring)."""
    from river_anyio.client import Client

    if isinstance(target, Client):
        if schema is None:
            schema = target.schema
        if tx is None:
            if True:  # ASYNC
                target = await target._ensure_db()
            else:
                target = target.database
    if schema is None and isinstance(target, AsyncDatabase):
        schema = target.dialect.schema
    if tx is not None:
        target = tx
    if isinstance(target, AsyncDatabase):
        async with target.executor(readonly=True) as ex:
            yield ex
        return
    if isinstance(target, str | Path):
        async with await _open_url(target, schema) as db, db.executor(readonly=True) as ex:
            yield ex
        return
    from river_anyio.caller_tx import executor_for_caller_tx

    # A blocking autocommit connection outside a transaction is read directly; every open
    # transaction goes through the adapter the client inserts with.
    if True:  # ASYNC
        from river_anyio.caller_tx import asyncio_only_kind

        plain = None if asyncio_only_kind(target) else outside_tx(target)
    else:
        plain = outside_tx(target)
    if plain is not None:
        yield AsyncExecutor(target, dialect_for(plain, schema), in_caller_tx=True)
        return
    yield await executor_for_caller_tx(target, schema=schema)


async def jobs_of_kinds(ex: AsyncExecutor, kinds: Sequence[str]) -> list[JobRow]:
    """Every job of ``kinds``, ordered by id."""
    rows: list[JobRow] = []
    after: tuple[Any, int] | None = None
    while True:
        page: list[JobRow] = await ex.run(list_jobs_page(kinds, after))
        rows.extend(page)
        after = page_after(page)
        if after is None:
            return rows


async def _read(target: Any, kinds: Sequence[str], tx: Any, schema: str | None) -> tuple[list[JobRow], str]:
    async with reading(target, tx=tx, schema=schema) as ex:
        return await jobs_of_kinds(ex, kinds), ex.dialect.name


# ---------------------------------------------------------------- the assertions


async def require_inserted(
    target: Any,
    kind_or_args: Any,
    *,
    tx: Any = None,
    schema: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    state: JobState | str | None = None,
    tags: Sequence[str] | None = None,
    scheduled_at: datetime | GoTime | None = None,
    args: Any = None,
) -> InsertedJob:
    """The one inserted job matching the expectation, else ``AssertionError`` listing what was found."""
    expected = ExpectedJob(kind_or_args, queue=queue, priority=priority, max_attempts=max_attempts,
                           state=state, tags=tags, scheduled_at=scheduled_at, args=args)
    return judge_inserted(expected, *await _read(target, [expected.kind], tx, schema))


async def require_not_inserted(
    target: Any,
    kind_or_args: Any,
    *,
    tx: Any = None,
    schema: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    state: JobState | str | None = None,
    tags: Sequence[str] | None = None,
    scheduled_at: datetime | GoTime | None = None,
    args: Any = None,
) -> None:
    """Fail when some job matches every given property (without properties: any job of the kind)."""
    expected = ExpectedJob(kind_or_args, queue=queue, priority=priority, max_attempts=max_attempts,
                           state=state, tags=tags, scheduled_at=scheduled_at, args=args)
    judge_not_inserted(expected, *await _read(target, [expected.kind], tx, schema))


async def require_many_inserted(
    target: Any,
    expected_jobs: Sequence[ExpectedJob | Any],
    *,
    tx: Any = None,
    schema: str | None = None,
) -> list[InsertedJob]:
    """Jobs of the expected kinds were inserted exactly in this order and number, each matching its
    expectation. Items may be ``ExpectedJob`` values or bare kinds / args types / args values."""
    expectations = expectations_of(expected_jobs)
    return judge_many_inserted(expectations, *await _read(target, [e.kind for e in expectations], tx, schema))


__all__ = [
    "ExpectedJob",
    "InsertedJob",
    "describe_job",
    "jobs_of_kinds",
    "reading",
    "require_inserted",
    "require_many_inserted",
    "require_not_inserted",
]
