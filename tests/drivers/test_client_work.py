"""The threaded client end to end on real Postgres and SQLite: insert, work, outcomes, stop, events."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from test_client_support import (  # type: ignore[import-not-found]
    WAIT,
    Gate,
    Other,
    Task,
    client_db_url_fixture,  # noqa: F401  (the fixture)
    fast_client,
    job,
    migrated_pg_fixture,  # noqa: F401  (used by the fixture)
    raw_first_error,
    wait_for,
)

from river_protocol.gotime import parse_time
from river_protocol.intents import CancelJob, Notify
from river_protocol.machines.notifications import TOPIC_CONTROL, build_cancel
from river_protocol.outcomes import cancel_attempted_at_json
from river_sync import (
    Client,
    EventKind,
    InsertManyParams,
    InsertOpts,
    JobCancel,
    JobDiscard,
    JobSnooze,
    JobState,
    UniqueOpts,
    WorkContext,
    Workers,
)


def _workers(fn: Any, args_type: type = Task, **kwargs: Any) -> Workers:
    workers = Workers()
    workers.job(args_type, **kwargs)(fn)
    return workers


# ---------------------------------------------------------------- insert


def test_insert_work_completed(client_db_url: str) -> None:
    seen: list[Task] = []
    client = fast_client(client_db_url, _workers(lambda args: seen.append(args)))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        inserted = client.insert(Task("hello"))
        assert inserted.job.state is JobState.AVAILABLE and not inserted.unique_skipped_as_duplicate
        event = wait_for(sub, inserted.job.id)
        row = job(client, inserted.job.id)
    assert event.kind is EventKind.JOB_COMPLETED and event.job.state is JobState.COMPLETED
    assert seen == [Task("hello")]
    assert row.state is JobState.COMPLETED and row.attempt == 1 and row.finalized_at is not None
    assert row.attempted_by == (client.client_id,)


def test_insert_only_client_needs_no_start(client_db_url: str) -> None:
    with Client(client_db_url) as client:
        result = client.insert(Task("x"), InsertOpts(queue="elsewhere", priority=3, tags=("a_b",)))
        row = job(client, result.job.id)
    assert (row.queue, row.priority, row.tags, row.args) == ("elsewhere", 3, ("a_b",), {"name": "x"})


def test_insert_many_order_and_unique_skips(client_db_url: str) -> None:
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    with Client(client_db_url) as client:
        first = client.insert(Task("u"), unique)
        results = client.insert_many([
            Other(1), InsertManyParams(Task("u"), unique), InsertManyParams(Task("v"), unique), Task("plain"),
        ])
    assert [r.job.kind for r in results] == ["other", "task", "task", "task"]
    assert [r.unique_skipped_as_duplicate for r in results] == [False, True, False, False]
    assert results[1].job.id == first.job.id
    assert results[0].job.id < results[2].job.id < results[3].job.id


def test_insert_rejects_unknown_kind_when_workers_given(client_db_url: str) -> None:
    client = Client(client_db_url, workers=_workers(lambda args: None))
    try:
        with pytest.raises(ValueError, match="not registered"):
            client.insert(Other(1))
        with pytest.raises(ValueError, match="no jobs"):
            client.insert_many([])
    finally:
        client.stop()


# ---------------------------------------------------------------- transactional insert


def test_psycopg_tx_rollback_and_worker_never_sees_uncommitted(client_db_url: str) -> None:
    if not client_db_url.startswith("postgres"):
        pytest.skip("psycopg transactions are Postgres only")
    import psycopg

    seen: list[str] = []
    client = fast_client(client_db_url, _workers(lambda args: seen.append(args.name)))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client, psycopg.connect(client_db_url) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS biz (v text)")
        conn.commit()
        conn.execute("INSERT INTO biz VALUES ('rolled back')")
        doomed = client.insert(Task("doomed"), tx=conn)
        conn.rollback()
        conn.execute("INSERT INTO biz VALUES ('kept')")
        pending = client.insert(Task("in tx"), InsertOpts(priority=1), tx=conn)
        # A later committed job with lower priority: fetched after the tx job would be, were it visible.
        probe = client.insert(Task("probe"), InsertOpts(priority=4))
        wait_for(sub, probe.job.id)
        assert "in tx" not in seen
        conn.commit()
        wait_for(sub, pending.job.id)
        assert conn.execute("SELECT v FROM biz").fetchall() == [("kept",)]
        from river_protocol.errors import JobNotFoundError

        with pytest.raises(JobNotFoundError):
            job(client, doomed.job.id)
        conn.execute("DROP TABLE biz")
        conn.commit()
    assert seen == ["probe", "in tx"]


@pytest.mark.parametrize("use_session", [False, True])
def test_sqlalchemy_tx_commit_and_rollback(client_db_url: str, use_session: bool) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    if client_db_url.startswith("postgres"):
        engine = sa.create_engine(client_db_url.replace("postgresql://", "postgresql+psycopg://"))
    else:
        import sqlean  # type: ignore[import-untyped]

        engine = sa.create_engine(client_db_url, module=sqlean)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS biz (v text)"))
        conn.execute(sa.text("DELETE FROM biz"))
    client = Client(client_db_url)
    try:
        ids = {}
        for outcome in ("rollback", "commit"):
            if use_session:
                with Session(engine) as session:
                    session.execute(sa.text("INSERT INTO biz VALUES (:v)"), {"v": outcome})
                    ids[outcome] = client.insert(Task(outcome), tx=session).job.id
                    session.commit() if outcome == "commit" else session.rollback()
            else:
                with engine.connect() as conn:
                    conn.execute(sa.text("INSERT INTO biz VALUES (:v)"), {"v": outcome})
                    ids[outcome] = client.insert(Task(outcome), tx=conn).job.id
                    conn.commit() if outcome == "commit" else conn.rollback()
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT v FROM biz")).fetchall() == [("commit",)]
            kinds = conn.execute(sa.text("SELECT id FROM river_job")).fetchall()
        assert [k[0] for k in kinds] == [ids["commit"]]
    finally:
        client.stop()
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE biz"))
        engine.dispose()


# ---------------------------------------------------------------- outcomes


def _run_one(url: str, fn: Any, opts: InsertOpts | None = None, **kwargs: Any) -> tuple[Any, Any, Client]:
    """Work one job until its first persisted outcome; returns (event, row, client)."""
    client = fast_client(url, _workers(fn, **kwargs.pop("worker_kwargs", {})), **kwargs)
    sub = client.subscribe()
    with client:
        inserted = client.insert(Task("t"), opts)
        event = wait_for(sub, inserted.job.id)
        row = job(client, inserted.job.id)
    return event, row, client


def test_error_is_retried_with_a_readable_error_element(client_db_url: str) -> None:
    def fail(args: Task) -> None:
        raise ValueError("boom")

    before = datetime.now(UTC)
    event, row, _ = _run_one(client_db_url, fail)
    assert event.kind is EventKind.JOB_FAILED
    # The first retry is ~1 s away: under the scheduler interval, so available at once with a future time.
    assert row.state is JobState.AVAILABLE and row.attempt == 1
    assert row.scheduled_at is not None and row.scheduled_at > before
    (error,) = row.errors
    assert error.attempt == 1 and error.error == "ValueError: boom" and "Traceback" in error.trace
    raw = raw_first_error_of(client_db_url, row.id)
    assert isinstance(raw["attempt"], int) and raw["attempt"] == 1
    assert raw["at"][-1] == "Z" or raw["at"][-6] in "+-"
    assert parse_time(raw["at"]) >= before


def raw_first_error_of(url: str, job_id: int) -> dict[str, Any]:
    with Client(url) as reader:
        return raw_first_error(reader, job_id)  # type: ignore[no-any-return]


def test_snooze_keeps_the_attempt(client_db_url: str) -> None:
    def snooze(args: Task) -> None:
        raise JobSnooze(timedelta(minutes=5))

    event, row, _ = _run_one(client_db_url, snooze)
    assert event.kind is EventKind.JOB_SNOOZED
    assert (row.state, row.attempt, row.metadata.get("snoozes"), row.errors) == (JobState.SCHEDULED, 0, 1, ())


def test_cancel_and_discard(client_db_url: str) -> None:
    def cancel(args: Task) -> None:
        raise JobCancel("not wanted")

    event, row, _ = _run_one(client_db_url, cancel)
    assert event.kind is EventKind.JOB_CANCELLED and row.state is JobState.CANCELLED
    assert row.errors[0].error == "JobCancelError: not wanted" and row.finalized_at is not None

    def discard(ctx: WorkContext, args: Task) -> None:
        raise JobDiscard("bad input")

    event, row, _ = _run_one(client_db_url, discard)
    assert event.kind is EventKind.JOB_FAILED and row.state is JobState.DISCARDED
    assert row.errors[0].error == "bad input"


def test_attempts_exhausted_discards(client_db_url: str) -> None:
    def fail(args: Task) -> None:
        raise RuntimeError("again")

    event, row, _ = _run_one(client_db_url, fail, InsertOpts(max_attempts=1))
    assert event.kind is EventKind.JOB_FAILED
    assert row.state is JobState.DISCARDED and row.finalized_at is not None and len(row.errors) == 1


def test_output_recorded_and_middleware_runs(client_db_url: str) -> None:
    calls: list[str] = []

    def mw(ctx: WorkContext, args: Any, call_next: Any) -> Any:
        calls.append("before")
        return call_next(ctx, args)

    def work(ctx: WorkContext, args: Task) -> None:
        ctx.record_output({"ok": args.name})

    _, row, _ = _run_one(client_db_url, work, middleware=[mw])
    assert row.state is JobState.COMPLETED and row.metadata["output"] == {"ok": "t"} and calls == ["before"]


def test_job_timeout_sets_the_token(client_db_url: str) -> None:
    def slow(ctx: WorkContext, args: Task) -> None:
        ctx.token.wait(WAIT)
        ctx.raise_if_cancelled()

    event, row, client = _run_one(
        client_db_url, slow, worker_kwargs={"timeout": timedelta(milliseconds=50)}
    )
    assert event.kind is EventKind.JOB_FAILED
    assert row.errors[0].error == "context deadline exceeded"
    assert client.stats().timed_out == 1


def test_remote_cancel_of_a_running_job(client_db_url: str) -> None:
    gate = Gate()

    def wait_for_cancel(ctx: WorkContext, args: Task) -> None:
        gate.entered.set()
        ctx.token.wait(WAIT)
        ctx.raise_if_cancelled()

    client = fast_client(client_db_url, _workers(wait_for_cancel))
    sub = client.subscribe()
    with client:
        inserted = client.insert(Task("victim"))
        assert gate.entered.wait(WAIT)
        row = client.database.run(
            CancelJob(inserted.job.id, cancel_attempted_at_json(datetime.now(UTC)))
        )
        assert row.state is JobState.RUNNING
        if client.database.dialect.name == "sqlite":
            # SQLite's cancel sends nothing (§12.4); deliver the control message through the outbox.
            client.database.run(Notify(TOPIC_CONTROL, (build_cancel(inserted.job.id, "default"),)))
        event = wait_for(sub, inserted.job.id)
        row = job(client, inserted.job.id)
    assert event.kind is EventKind.JOB_CANCELLED and row.state is JobState.CANCELLED
    assert row.errors[0].error == "JobCancelError: job cancelled remotely"


# ---------------------------------------------------------------- stop


def test_soft_stop_waits_for_running_jobs(client_db_url: str) -> None:
    gate = Gate()

    def blocked(args: Task) -> None:
        gate.entered.set()
        assert gate.release.wait(WAIT)

    client = fast_client(client_db_url, _workers(blocked))
    client.start()
    inserted = client.insert(Task("x"))
    assert gate.entered.wait(WAIT)
    stopper = threading.Thread(target=client.stop)
    stopper.start()
    assert not client.wait(0.2)  # still waiting for the job
    gate.release.set()
    stopper.join(WAIT)
    assert client.wait(0)
    with Client(client_db_url) as reader:
        assert job(reader, inserted.job.id).state is JobState.COMPLETED


@pytest.mark.parametrize("how", ["stop_and_cancel", "soft_stop_timeout"])
def test_hard_stop_interrupts(client_db_url: str, how: str) -> None:
    gate = Gate()

    def long(ctx: WorkContext, args: Task) -> None:
        gate.entered.set()
        ctx.token.wait(WAIT)
        ctx.raise_if_cancelled()

    client = fast_client(client_db_url, _workers(long))
    sub = client.subscribe([EventKind.JOB_INTERRUPTED])
    client.start()
    inserted = client.insert(Task("x"))
    assert gate.entered.wait(WAIT)
    if how == "stop_and_cancel":
        client.stop_and_cancel()
    else:
        client.stop(timeout=timedelta(milliseconds=50))
    assert sub.get(timeout=0).job.id == inserted.job.id
    with Client(client_db_url) as reader:
        row = job(reader, inserted.job.id)
    assert (row.state, row.attempt, row.errors) == (JobState.AVAILABLE, 0, ())


# ---------------------------------------------------------------- events


def test_subscription_filters_bounds_and_closes_on_stop(client_db_url: str) -> None:
    client = fast_client(client_db_url, _workers(lambda args: None))
    full = client.subscribe()
    failed_only = client.subscribe(["job_failed"])
    tiny = client.subscribe(maxsize=1)
    with client:
        a, b = client.insert(Task("a")), client.insert(Task("b"))
        done = {wait_for(full, a.job.id).job.id, wait_for(full, b.job.id).job.id}
    assert done == {a.job.id, b.job.id}
    kept = list(tiny)  # iteration ends: stop closed the subscription
    assert len(kept) == 1 and tiny.dropped == 1
    assert list(failed_only) == [] and failed_only.dropped == 0
