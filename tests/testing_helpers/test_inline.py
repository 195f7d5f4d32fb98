"""Inline mode: insert runs the job at once, recorded in memory or in the database."""

from __future__ import annotations

from typing import Any

import pytest

from river_protocol.errors import ValidationError
from river_sync import (
    Client,
    InsertManyParams,
    InsertOpts,
    JobSnooze,
    JobState,
    UniqueOpts,
    WorkContext,
    Workers,
)
from river_sync.testing import InlineClient, inline_client, require_inserted, require_not_inserted
from tests.testing_helpers import (  # noqa: F401  (fixtures)
    Other,
    Task,
    client_db_url_fixture,
    migrated_pg_fixture,
    timedelta,
)


def _workers(log: list[str]) -> Workers:
    workers = Workers()

    @workers.job(Task)
    def work(ctx: WorkContext, args: Task) -> None:
        log.append(args.name)
        if args.name == "fail":
            raise RuntimeError("failed inline")
        if args.name == "snooze":
            raise JobSnooze(timedelta(hours=1))
        ctx.record_output(args.name.upper())

    return workers


def test_in_memory() -> None:
    log: list[str] = []
    inline = InlineClient(_workers(log))
    first = inline.insert(Task("a"))
    assert log == ["a"] and first.job.id == 1 and first.job.state is JobState.COMPLETED
    assert first.work is not None and first.work.output == "A" and not first.unique_skipped_as_duplicate
    failed = inline.insert(Task("fail"), InsertOpts(max_attempts=1))
    assert failed.job.state is JobState.DISCARDED
    assert failed.job.errors[0].error == "RuntimeError: failed inline"
    many = inline.insert_many([Task("snooze"), InsertManyParams(Task("b"), InsertOpts(queue="q"))])
    assert [r.job.state for r in many] == [JobState.SCHEDULED, JobState.COMPLETED]
    assert [j.id for j in inline.jobs()] == [1, 2, 3, 4] and inline.get_job(4).queue == "q"
    assert inline.client is None
    with pytest.raises(ValidationError, match="no job 99"):
        inline.get_job(99)
    with pytest.raises(ValidationError, match="not registered"):
        inline.insert(Other())
    with pytest.raises(ValidationError, match="tx= needs a database"):
        inline.insert(Task(), tx=object())
    with pytest.raises(ValidationError, match="needs a Workers bundle"):
        InlineClient(lambda a: None)  # type: ignore[arg-type]


def test_with_a_database(client_db_url: str) -> None:
    log: list[str] = []
    with InlineClient(_workers(log), client_db_url) as inline:
        done = inline.insert(Task("x"))
        failed = inline.insert(Task("fail"))
        assert inline.client is not None
        stored = require_inserted(inline.client, Task, args={"name": "x"})
        assert stored.state is JobState.COMPLETED and stored.metadata["output"] == "X" and stored == done.job
        again = require_inserted(inline.client, Task, args={"name": "fail"})
        # Not retried inline: the job waits for a real client, with its error recorded.
        assert again.state is JobState.AVAILABLE and again.attempt == 1 and failed.job == again
        with pytest.raises(ValidationError, match="records jobs in its database"):
            inline.jobs()
    assert log == ["x", "fail"]


def test_unique_duplicates_are_not_run(client_db_url: str) -> None:
    log: list[str] = []
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    with InlineClient(_workers(log), client_db_url) as inline:
        first = inline.insert(Task("u"), unique)
        second = inline.insert(Task("u"), unique)
    assert log == ["u"] and second.unique_skipped_as_duplicate and second.work is None
    assert second.job.id == first.job.id


def test_inline_client_borrows_a_client(client_db_url: str) -> None:
    log: list[str] = []
    with Client(client_db_url, workers=_workers(log), max_attempts=1) as client:
        inline = inline_client(client)
        result = inline.insert(Task("fail"))
        inline.close()  # the borrowed client stays usable
        assert result.job.state is JobState.DISCARDED
        assert require_inserted(client, Task).id == result.job.id
    with pytest.raises(ValidationError, match=r"needs a river_sync\.Client"):
        inline_client(object())  # type: ignore[arg-type]
    import river_trio

    # Another driver's client is refused too: its insert and run are coroutines.
    with pytest.raises(ValidationError, match=r"needs a river_sync\.Client"):
        inline_client(river_trio.Client(client_db_url, workers=_workers(log)))  # type: ignore[arg-type]


def test_transaction_mode(client_db_url: str) -> None:
    import psycopg

    from river_db.sqlite import connect_sqlite
    from river_db.urls import sqlite_path

    log: list[str] = []
    conn: Any
    if client_db_url.startswith("postgres"):
        conn = psycopg.connect(client_db_url)
    else:
        conn = connect_sqlite(sqlite_path(client_db_url))
        conn.execute("BEGIN")
    with InlineClient(_workers(log), client_db_url) as inline:
        try:
            result = inline.insert(Task("t"), tx=conn)
            assert result.job.state is JobState.COMPLETED
            conn.rollback()
        finally:
            conn.close()
        assert inline.client is not None
        require_not_inserted(inline.client, Task)
