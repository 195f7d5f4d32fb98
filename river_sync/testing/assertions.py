"""Assertions about inserted jobs (River's ``rivertest.RequireInserted`` and friends).

Every assertion reads ``river_job`` through a *target*:

- a ``river_sync.Client`` or ``river_sync.Database`` (committed jobs);
- a database URL or SQLite path (opened and closed for the check);
- a transaction: a psycopg connection, SQLAlchemy Connection/Session or
  sqlite3/sqlean connection, read in that very transaction, so jobs inserted
  with ``client.insert(..., tx=tx)`` are visible before commit (and only there);
  an autocommit connection outside a transaction is simply read (committed jobs);
  ``tx=`` does the same while the target (a client) gives the schema.

The expected job is a kind, an args type, or an args value. A value also
requires the job's args to equal its encoding (River only uses it for the
kind); ``args=`` takes a dict (the job's args must contain those members) or
an args value (equal encoding). Option filters left at ``None`` are not checked.

The expectations and verdicts are ``river_db.testing.expectations``'s,
shared with ``river_trio.testing``.

Differences from Go: ``require_inserted`` wants exactly one job *matching the
filters* (Go wants exactly one job of the kind, then checks the options), so
several jobs of a kind can be told apart by args. Failures raise
``AssertionError`` listing the jobs found, so pytest shows them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from river_db.connect import dialect_for, outside_tx
from river_db.executor import Executor
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
from river_sync.database import Database

# ---------------------------------------------------------------- reading through a target


def _open_url(target: str | Path, schema: str | None) -> Database:
    text = str(target)
    if isinstance(target, str) and "://" in text:
        return Database.from_url(text, schema=schema)
    return Database.from_sqlite_path(text, schema=schema)


@contextmanager
def reading(target: Any, *, tx: Any = None, schema: str | None = None) -> Iterator[Executor]:
    """An executor reading ``river_job`` through ``target`` (see the module docstring)."""
    from river_sync.client import Client

    if schema is None and isinstance(target, Client | Database):
        schema = target.schema if isinstance(target, Client) else target.dialect.schema
    if tx is not None:
        target = tx
    if isinstance(target, Client):
        target = target.database
    if isinstance(target, Database):
        with target.executor(readonly=True) as ex:
            yield ex
        return
    if isinstance(target, str | Path):
        with _open_url(target, schema) as db, db.executor(readonly=True) as ex:
            yield ex
        return
    plain = outside_tx(target)
    if plain is not None:
        yield Executor(target, dialect_for(plain, schema), in_caller_tx=True)
        return
    from river_db.caller_tx import executor_for_caller_tx

    yield executor_for_caller_tx(target, schema=schema)


def jobs_of_kinds(ex: Executor, kinds: Sequence[str]) -> list[JobRow]:
    """Every job of ``kinds``, ordered by id."""
    rows: list[JobRow] = []
    after: tuple[Any, int] | None = None
    while True:
        page: list[JobRow] = ex.run(list_jobs_page(kinds, after))
        rows.extend(page)
        after = page_after(page)
        if after is None:
            return rows


def _read(target: Any, kinds: Sequence[str], tx: Any, schema: str | None) -> tuple[list[JobRow], str]:
    with reading(target, tx=tx, schema=schema) as ex:
        return jobs_of_kinds(ex, kinds), ex.dialect.name


# ---------------------------------------------------------------- the assertions


def require_inserted(
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
    return judge_inserted(expected, *_read(target, [expected.kind], tx, schema))


def require_not_inserted(
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
    judge_not_inserted(expected, *_read(target, [expected.kind], tx, schema))


def require_many_inserted(
    target: Any,
    expected_jobs: Sequence[ExpectedJob | Any],
    *,
    tx: Any = None,
    schema: str | None = None,
) -> list[InsertedJob]:
    """Jobs of the expected kinds were inserted exactly in this order and number, each matching its
    expectation. Items may be ``ExpectedJob`` values or bare kinds / args types / args values."""
    expectations = expectations_of(expected_jobs)
    return judge_many_inserted(expectations, *_read(target, [e.kind for e in expectations], tx, schema))


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
