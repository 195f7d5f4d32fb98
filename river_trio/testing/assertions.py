"""Assertions about inserted jobs for trio code: ``await require_inserted(target, ...)``.

The targets, expectations and failure messages are ``river_sync.testing``'s
(see ``river_sync.testing.assertions``); only the reading is async:

- a ``river_trio.Client`` or ``river_trio.AsyncDatabase`` (committed jobs; an
  insert-only client that has not opened its database yet opens it);
- a database URL or SQLite path (opened and closed for the check);
- a transaction: the blocking psycopg connection, SQLAlchemy Connection/Session
  or sqlite connection that ``client.insert(..., tx=tx)`` was given, read in that
  transaction (in a worker thread), so its uncommitted jobs are visible there
  only; an autocommit connection outside a transaction is read directly;
  ``tx=`` does the same while the target (a client) gives the schema.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.gotime import GoTime
from river_protocol.intents import JobListFilter, ListJobs
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_sync.testing.assertions import (
    ExpectedJob,
    InsertedJob,
    _expectation,
    _fail,
    _listing,
    _outside_tx,
)
from river_trio.database import AsyncDatabase
from river_trio.executor import AsyncExecutor

_PAGE = 1000


@asynccontextmanager
async def reading(target: Any, *, tx: Any = None, schema: str | None = None) -> AsyncIterator[AsyncExecutor]:
    """An async executor reading ``river_job`` through ``target`` (see the module docstring)."""
    from river_trio.client import Client

    if isinstance(target, Client):
        if schema is None:
            schema = target.schema
        if tx is None:
            target = await target._ensure_db()
    if schema is None and isinstance(target, AsyncDatabase):
        schema = target.dialect.schema
    if tx is not None:
        target = tx
    if isinstance(target, AsyncDatabase):
        async with target.executor(readonly=True) as ex:
            yield ex
        return
    if isinstance(target, str | Path):
        text = str(target)
        if isinstance(target, str) and "://" in text:
            db = await AsyncDatabase.from_url(text, schema=schema)
        else:
            db = await AsyncDatabase.from_sqlite_path(text, schema=schema)
        async with db, db.executor(readonly=True) as ex:
            yield ex
        return
    plain = _outside_tx(target)
    if plain is not None:
        from river_protocol.dialects.postgres import PostgresDialect
        from river_protocol.dialects.sqlite import SQLiteDialect

        dialect = SQLiteDialect(schema) if plain == "sqlite" else PostgresDialect(schema)
        yield AsyncExecutor(target, dialect, in_caller_tx=True)
        return
    from river_trio.txadapt import executor_for_caller_tx

    yield await executor_for_caller_tx(target, schema=schema)


async def jobs_of_kinds(ex: AsyncExecutor, kinds: Sequence[str]) -> list[JobRow]:
    """Every job of ``kinds``, ordered by id."""
    rows: list[JobRow] = []
    after: tuple[Any, int] | None = None
    while True:
        page: list[JobRow] = await ex.run(ListJobs(
            filter=JobListFilter(kinds=tuple(dict.fromkeys(kinds))), order_by="id", limit=_PAGE, after=after,
        ))
        rows.extend(page)
        if len(page) < _PAGE:
            return rows
        after = (page[-1].id, page[-1].id)


async def _read(target: Any, kinds: Sequence[str], tx: Any, schema: str | None) -> tuple[list[JobRow], str]:
    async with reading(target, tx=tx, schema=schema) as ex:
        return await jobs_of_kinds(ex, kinds), ex.dialect.name


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
    expected = _expectation(kind_or_args, queue, priority, max_attempts, state, tags, scheduled_at, args)
    jobs, dialect = await _read(target, [expected.kind], tx, schema)
    matches = [job for job in jobs if not expected.differences(job, dialect=dialect)]
    if len(matches) == 1:
        return expected.decode(matches[0])
    if not jobs:
        raise _fail(f"expected {expected.describe()}, but no job of kind {expected.kind!r} was found")
    if not matches:
        reasons = "\n".join(
            f"  id={job.id}: " + "; ".join(expected.differences(job, dialect=dialect)) for job in jobs[:20]
        )
        raise _fail(
            f"expected {expected.describe()}, but none of the {len(jobs)} job(s) of that kind matches:\n"
            f"{_listing(jobs)}\nDifferences:\n{reasons}"
        )
    raise _fail(
        f"expected exactly one {expected.describe()}, but {len(matches)} match (narrow the expectation "
        f"or use require_many_inserted):\n{_listing(matches)}"
    )


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
    expected = _expectation(kind_or_args, queue, priority, max_attempts, state, tags, scheduled_at, args)
    jobs, dialect = await _read(target, [expected.kind], tx, schema)
    matches = [job for job in jobs if not expected.differences(job, dialect=dialect)]
    if matches:
        raise _fail(
            f"expected no {expected.describe()}, but {len(matches)} were inserted:\n{_listing(matches)}"
        )


async def require_many_inserted(
    target: Any,
    expected_jobs: Sequence[ExpectedJob | Any],
    *,
    tx: Any = None,
    schema: str | None = None,
) -> list[InsertedJob]:
    """Jobs of the expected kinds were inserted exactly in this order and number, each matching its
    expectation. Items may be ``ExpectedJob`` values or bare kinds / args types / args values."""
    expectations = [e if isinstance(e, ExpectedJob) else ExpectedJob(e) for e in expected_jobs]
    if not expectations:
        raise ValidationError("require_many_inserted needs at least one expected job")
    jobs, dialect = await _read(target, [e.kind for e in expectations], tx, schema)
    want = [e.kind for e in expectations]
    got = [job.kind for job in jobs]
    if want != got:
        raise _fail(
            f"inserted jobs don't match the expectation;\n  expected kinds: {want}\n  actual kinds:   {got}\n"
            f"Jobs found (by id):\n{_listing(jobs, limit=50)}"
        )
    failures = []
    for index, (expected, job) in enumerate(zip(expectations, jobs, strict=True)):
        diffs = expected.differences(job, dialect=dialect)
        if diffs:
            failures.append(f"  [{index}] id={job.id}: " + "; ".join(diffs))
    if failures:
        raise _fail("inserted jobs don't match the expectation:\n" + "\n".join(failures))
    return [expected.decode(job) for expected, job in zip(expectations, jobs, strict=True)]


__all__ = [
    "ExpectedJob",
    "InsertedJob",
    "jobs_of_kinds",
    "reading",
    "require_inserted",
    "require_many_inserted",
    "require_not_inserted",
]
