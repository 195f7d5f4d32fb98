"""require_inserted / require_many_inserted / require_not_inserted on Postgres and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from river_db.sqlite import connect_sqlite
from river_db.urls import sqlite_path
from river_protocol.errors import ValidationError
from river_sync import Client, Database, InsertManyParams, InsertOpts, JobState
from river_sync.testing import (
    ExpectedJob,
    InsertedJob,
    require_inserted,
    require_many_inserted,
    require_not_inserted,
)
from tests.testing_helpers import (  # noqa: F401  (fixtures)
    Other,
    Task,
    Urgent,
    client_db_url_fixture,
    migrated_pg_fixture,
)


def _open_tx(url: str) -> Any:
    """A raw connection with an open transaction (psycopg or sqlite3-style)."""
    if url.startswith("postgres"):
        return psycopg.connect(url)  # non-autocommit: the first statement begins the transaction
    conn = connect_sqlite(sqlite_path(url))
    conn.execute("BEGIN")
    return conn


def test_found_with_options_and_decoded_args(client_db_url: str) -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    with Client(client_db_url) as client:
        inserted = client.insert(Urgent("go"), InsertOpts(scheduled_at=when))
        client.insert(Task("other kind"))
        job = require_inserted(
            client, Urgent, queue="urgent", priority=2, max_attempts=3, state=JobState.SCHEDULED,
            tags=["hot"], scheduled_at=when, args={"what": "go"},
        )
    assert isinstance(job, InsertedJob) and job.id == inserted.job.id
    assert job.decoded_args == Urgent("go") and job.state is JobState.SCHEDULED
    # The same job through a Database, a URL and a kind name.
    with Database.from_url(client_db_url) as db:
        assert require_inserted(db, "urgent", state="scheduled").id == job.id
    by_kind = require_inserted(client_db_url, "urgent")
    assert by_kind.decoded_args == {"what": "go"}


def test_args_value_and_args_filter_tell_jobs_apart(client_db_url: str) -> None:
    with Client(client_db_url) as client:
        client.insert_many([Task("a"), Task("b"), InsertManyParams(Task("b"), InsertOpts(queue="q2"))])
        assert require_inserted(client, Task("a")).decoded_args == Task("a")
        assert require_inserted(client, Task, args=Task("b"), queue="q2").queue == "q2"
        assert require_inserted(client, Task, args={"name": "a"}).args == {"name": "a"}
        with pytest.raises(AssertionError, match=r"exactly one job 'task'.*but 2 match") as info:
            require_inserted(client, Task("b"))
        assert "use require_many_inserted" in str(info.value)


def test_failure_messages_list_what_was_found(client_db_url: str) -> None:
    with Client(client_db_url) as client:
        with pytest.raises(AssertionError, match="no job of kind 'task' was found"):
            require_inserted(client, Task)
        client.insert(Task("x"), InsertOpts(queue="q1", priority=3))
        with pytest.raises(AssertionError) as info:
            require_inserted(client, Task, queue="q9", priority=1, args={"name": "y"})
    message = str(info.value)
    assert message.startswith("River assertion failure: expected job 'task', queue='q9', priority=1")
    assert "none of the 1 job(s) of that kind matches" in message
    assert "kind='task' state=available queue='q1' priority=3" in message
    assert "queue 'q1' is not 'q9'; priority 3 is not 1" in message
    assert 'args {"name":"x"} do not contain {"name":"y"}' in message


def test_not_inserted(client_db_url: str) -> None:
    with Client(client_db_url) as client:
        require_not_inserted(client, Task)
        client.insert(Task("x"), InsertOpts(queue="q1"))
        require_not_inserted(client, Other)
        require_not_inserted(client, Task, queue="q2")  # any differing property clears it
        require_not_inserted(client, Task, queue="q1", priority=4)
        require_not_inserted(client, Task("y"))
        with pytest.raises(AssertionError, match=r"expected no job 'task', but 1 were inserted:\n  id=1"):
            require_not_inserted(client, Task)
        with pytest.raises(AssertionError, match="expected no job 'task', queue='q1'"):
            require_not_inserted(client, Task, queue="q1", args={"name": "x"})


def test_many_in_order(client_db_url: str) -> None:
    with Client(client_db_url) as client:
        client.insert_many([Task("1"), Other(2), InsertManyParams(Task("3"), InsertOpts(priority=4))])
        client.insert(Urgent())  # a kind nobody asked about is ignored
        jobs = require_many_inserted(client, [
            ExpectedJob(Task, args={"name": "1"}), Other, ExpectedJob(Task("3"), priority=4),
        ])
        assert [j.decoded_args for j in jobs] == [Task("1"), Other(2), Task("3")]
        with pytest.raises(AssertionError) as info:
            require_many_inserted(client, [Other, Task, Task])
        assert "expected kinds: ['other', 'task', 'task']" in str(info.value)
        assert "actual kinds:   ['task', 'other', 'task']" in str(info.value)
        with pytest.raises(AssertionError, match=r"\[2\] id=3: priority 4 is not 1"):
            require_many_inserted(client, [Task, Other, ExpectedJob(Task, priority=1)])
        with pytest.raises(AssertionError, match="expected kinds: \\['task'\\]"):
            require_many_inserted(client, [Task])  # two tasks exist: the count matters
    with pytest.raises(ValidationError, match="at least one"):
        require_many_inserted(client_db_url, [])


def test_uncommitted_jobs_are_visible_only_through_their_transaction(client_db_url: str) -> None:
    with Client(client_db_url) as client:
        conn = _open_tx(client_db_url)
        try:
            client.insert(Task("tx"), tx=conn)
            job = require_inserted(conn, Task, args={"name": "tx"})
            assert require_inserted(client, Task, tx=conn).id == job.id
            require_many_inserted(conn, [Task])
            require_not_inserted(client, Task)  # committed view: nothing yet
            require_not_inserted(client_db_url, Task)
            conn.rollback()
        finally:
            conn.close()
        require_not_inserted(client, Task)


@pytest.mark.parametrize("use_session", [False, True])
def test_sqlalchemy_transactions(client_db_url: str, use_session: bool) -> None:
    import sqlalchemy
    from sqlalchemy.orm import Session

    if client_db_url.startswith("postgres"):
        engine = sqlalchemy.create_engine(client_db_url.replace("postgresql://", "postgresql+psycopg://"))
    else:
        import sqlean  # type: ignore[import-untyped]

        engine = sqlalchemy.create_engine(client_db_url, module=sqlean)
    try:
        with Client(client_db_url) as client:
            holder: Any = Session(engine) if use_session else engine.connect()
            with holder:
                client.insert(Other(7), tx=holder)
                assert require_inserted(holder, Other).decoded_args == Other(7)
                require_not_inserted(client, Other)
                holder.commit()
            assert require_inserted(client, Other).decoded_args == Other(7)
    finally:
        engine.dispose()


def test_sqlite_connection_outside_a_transaction_is_read_directly(tmp_path: Path) -> None:
    from river_db.migrator import Migrator

    path = str(tmp_path / "plain.sqlite3")
    with Migrator(path) as migrator:
        migrator.migrate_up()
    with Client(path) as client:
        client.insert(Task("c"))
    conn = connect_sqlite(path)
    try:
        assert require_inserted(conn, Task).decoded_args == Task("c")
        assert not conn.in_transaction  # the check left no transaction behind
    finally:
        conn.close()
    assert require_inserted(Path(path), "task").id == 1


def test_bad_expectations_are_refused() -> None:
    with pytest.raises(ValidationError, match="cannot be empty"):
        ExpectedJob("")
    with pytest.raises(ValidationError, match="not the string"):
        ExpectedJob(Task, tags="hot")
    with pytest.raises(ValidationError, match="timezone-aware"):
        ExpectedJob(Task, scheduled_at=datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="'nope' is not a valid JobState"):
        ExpectedJob(Task, state="nope")
    assert ExpectedJob(Task, scheduled_at=datetime.now(UTC) + timedelta(1)).kind == "task"


def test_autocommit_connections_are_read_directly(client_db_url: str) -> None:
    with Client(client_db_url) as client:
        client.insert(Other(3))
    conn: Any
    if client_db_url.startswith("postgres"):
        conn = psycopg.connect(client_db_url, autocommit=True)
    else:
        conn = connect_sqlite(sqlite_path(client_db_url))
    try:
        assert require_inserted(conn, Other).decoded_args == Other(3)
        require_not_inserted(conn, Task)
        assert not getattr(conn, "in_transaction", False)
    finally:
        conn.close()
