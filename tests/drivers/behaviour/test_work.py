"""Both clients end to end on real Postgres and SQLite: insert, work, outcomes, cancellation, stop, events."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar

import pytest

from river_db.client_support import ClientStats
from river_protocol.args import arg_field
from river_protocol.client_core import ClientCore
from river_protocol.errors import JobNotFoundError, UniqueKeyRepeatedError
from river_protocol.golang.gotime import parse_time
from river_protocol.intents import CancelJob, FullJobRow, InsertFullJobs, Notify
from river_protocol.machines.notifications import TOPIC_CONTROL, build_cancel
from river_protocol.outcomes import cancel_attempted_at_json
from river_protocol.work import CancelCause
from river_sync import (
    Client,
    Database,
    EventKind,
    InsertManyParams,
    InsertOpts,
    JobCancel,
    JobDiscard,
    JobSnooze,
    JobState,
    QueueConfig,
    UniqueOpts,
)
from tests.drivers.behaviour.support import fast_client, row, wait_for
from tests.drivers.harness import WAIT, Harness
from tests.drivers.test_client_support import (
    Gate,
    Other,
    Task,
    raw_first_error,
    wait_for_all,
)

# ---------------------------------------------------------------- insert


def test_insert_work_completed(h: Harness, client_db_url: str) -> None:
    seen: list[tuple[Task, bool]] = []
    workers = h.workers(lambda ctx, args: seen.append((args, ctx.cancelled)), Task)
    client = fast_client(h, client_db_url, workers)
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        inserted = client.insert(Task("hello"))
        assert inserted.job.state is JobState.AVAILABLE and not inserted.unique_skipped_as_duplicate
        event = wait_for(sub, inserted.job.id)
        stored = client.jobs.get(inserted.job.id)
    assert event.kind is EventKind.JOB_COMPLETED and event.job.state is JobState.COMPLETED
    assert seen == [(Task("hello"), False)]
    assert stored.state is JobState.COMPLETED and stored.attempt == 1 and stored.finalized_at is not None
    assert stored.attempted_by == (client.client_id,)


def test_insert_only_client_needs_no_start(h: Harness, client_db_url: str) -> None:
    with h.client(client_db_url) as client:
        result = client.insert(Task("x"), InsertOpts(queue="elsewhere", priority=3, tags=("a_b",)))
        stored = client.jobs.get(result.job.id)
    assert (stored.queue, stored.priority, stored.tags) == ("elsewhere", 3, ("a_b",))
    assert stored.args == {"name": "x"}
    # Never started: insert and admin calls open the database themselves; stop() closes it.
    bare = h.client(client_db_url)
    bare_id = bare.insert(Task("y")).job.id
    assert bare.jobs.get(bare_id).args == {"name": "y"}
    bare.stop()
    assert row(client_db_url, bare_id).state is JobState.AVAILABLE


def test_insert_many_order_and_unique_skips(h: Harness, client_db_url: str) -> None:
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    with h.client(client_db_url) as client:
        first = client.insert(Task("u"), unique)
        results = client.insert_many([
            Other(1), InsertManyParams(Task("u"), unique), InsertManyParams(Task("v"), unique), Task("plain"),
        ])
    assert [r.job.kind for r in results] == ["other", "task", "task", "task"]
    assert [r.unique_skipped_as_duplicate for r in results] == [False, True, False, False]
    assert results[1].job.id == first.job.id
    assert results[0].job.id < results[2].job.id < results[3].job.id


def test_insert_many_repeating_a_unique_key_is_refused_whole(h: Harness, client_db_url: str) -> None:
    """River refuses a batch in which two jobs share a unique key (harness leaf Batch/Atomicity):
    a typed error, and nothing of the batch is inserted, in the client's transaction or the caller's."""
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    batch = [Task("before"), InsertManyParams(Task("u"), unique), Other(1),
             InsertManyParams(Task("u"), unique)]
    with h.client(client_db_url) as client:
        with pytest.raises(UniqueKeyRepeatedError) as caught:
            client.insert_many(batch)
        assert caught.value.positions == (1, 3)
        with h.transaction(client) as tx:
            with pytest.raises(UniqueKeyRepeatedError):
                client.insert_many(batch, tx=tx)
            kept = client.insert(Task("kept"), tx=tx)  # the caller's transaction is still usable
        assert [job.id for job in client.jobs.list().jobs] == [kept.job.id]


@dataclasses.dataclass
class Dotted:
    kind: ClassVar[str] = "dotted"
    value: int = arg_field(json="a.b", default=1)


def test_unique_key_rules_setting_picks_the_key_builder(h: Harness, client_db_url: str) -> None:
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    with h.client(client_db_url) as old, h.client(client_db_url, unique_key_rules="latest") as new:
        first = old.insert(Dotted(), unique)
        second = new.insert(Dotted(), unique)  # a different key: not a duplicate of the first
        again = new.insert(Dotted(), unique)
        stored = [old.jobs.get(first.job.id), old.jobs.get(second.job.id)]
    assert not second.unique_skipped_as_duplicate and again.unique_skipped_as_duplicate
    assert stored[0].unique_key == hashlib.sha256(b'&kind=dotted&args={"a":{"b":}}').digest()
    assert stored[1].unique_key == hashlib.sha256(b'&kind=dotted&args={"a.b":1}').digest()
    with pytest.raises(ValueError, match="unknown unique key rules"):
        h.client(client_db_url, unique_key_rules="v0.44")


def test_latest_unique_key_rules_bucket_by_period_from_scheduled_at(h: Harness, client_db_url: str) -> None:
    """Newer River (goldens period_from_schedule): a ByPeriod bucket comes from the job's
    scheduled_at, in UTC; River v0.43 takes it from the insert's clock whatever the schedule."""
    hourly = UniqueOpts(by_period=timedelta(hours=1))
    later = (datetime.now(UTC) + timedelta(days=2)).replace(minute=10, second=0, microsecond=0)
    in_ist = later.astimezone(timezone(timedelta(hours=5, minutes=30))) + timedelta(minutes=20)

    def key(bucket: datetime) -> bytes:
        stamp = bucket.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return hashlib.sha256(f"&kind=task&period={stamp}".encode()).digest()

    with h.client(client_db_url) as old, h.client(client_db_url, unique_key_rules="latest") as new:
        first = new.insert(Task("a"), InsertOpts(unique_opts=hourly, scheduled_at=later))
        # Same hour of the schedule, written in another zone: the same key, a duplicate.
        again = new.insert(Task("b"), InsertOpts(unique_opts=hourly, scheduled_at=in_ist))
        v043 = old.insert(Task("c"), InsertOpts(unique_opts=hourly, scheduled_at=later))
        stored = old.jobs.get(first.job.id)
    assert again.unique_skipped_as_duplicate and again.job.id == first.job.id
    assert stored.unique_key == key(later.replace(minute=0))
    assert not v043.unique_skipped_as_duplicate  # v0.43 bucketed its own clock, days earlier


def test_insert_rejects_unknown_kind_when_workers_given(h: Harness, client_db_url: str) -> None:
    client = h.client(client_db_url, workers=h.workers(lambda args: None, Task))
    with pytest.raises(ValueError, match="not registered"):
        client.insert(Other(1))
    with pytest.raises(ValueError, match="no jobs"):
        client.insert_many([])


def test_unique_insert_from_many_threads_makes_one_job(h: Harness, client_db_url: str) -> None:
    unique = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    results: list[Any] = []
    errors: list[BaseException] = []
    with h.client(client_db_url) as client:
        def insert() -> None:
            try:
                results.append(client.insert(Task("once"), unique))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=insert) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        page = client.jobs.list(kinds=["task"])
    assert errors == [] and len(results) == 8
    assert len({r.job.id for r in results}) == 1 and [j.id for j in page.jobs] == [results[0].job.id]
    assert sum(not r.unique_skipped_as_duplicate for r in results) == 1


# ---------------------------------------------------------------- transactional insert


@pytest.mark.parametrize("client_db_url", ["postgres"], indirect=True)  # psycopg is Postgres only
def test_psycopg_tx_rollback_and_worker_never_sees_uncommitted(h: Harness, client_db_url: str) -> None:
    import psycopg

    seen: list[str] = []
    client = fast_client(h, client_db_url, h.workers(lambda args: seen.append(args.name), Task))
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
        with pytest.raises(JobNotFoundError):
            client.jobs.get(doomed.job.id)
        conn.execute("DROP TABLE biz")
        conn.commit()
    assert seen == ["probe", "in tx"]


@pytest.mark.parametrize("use_session", [False, True])
def test_sqlalchemy_tx_commit_and_rollback(h: Harness, client_db_url: str, use_session: bool) -> None:
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    if client_db_url.startswith("postgres"):
        engine = sa.create_engine(client_db_url.replace("postgresql://", "postgresql+psycopg://"))
    else:
        import sqlean  # type: ignore[import-untyped]

        # The trio client runs the caller's statements in a worker thread.
        engine = sa.create_engine(client_db_url, module=sqlean, connect_args={"check_same_thread": False})
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS biz (v text)"))
        conn.execute(sa.text("DELETE FROM biz"))
    client = h.client(client_db_url)
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
        assert [j.id for j in client.jobs.list().jobs] == [ids["commit"]]
    finally:
        client.stop()
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE biz"))
        engine.dispose()


def test_transaction_helper_commits_or_rolls_back(h: Harness, client_db_url: str) -> None:
    with h.client(client_db_url) as client:
        with pytest.raises(ZeroDivisionError), h.transaction(client) as tx:
            client.insert(Task("gone"), tx=tx)
            raise ZeroDivisionError
        with h.transaction(client) as tx:
            kept = client.insert(Task("kept"), tx=tx)
        assert [j.id for j in client.jobs.list().jobs] == [kept.job.id]


# ---------------------------------------------------------------- outcomes


def _run_one(h: Harness, url: str, fn: Any, opts: InsertOpts | None = None, *, threaded: bool = False,
             worker_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> tuple[Any, Any, Any]:
    """Work one job until its first persisted outcome; returns (event, row, client)."""
    client = fast_client(h, url, h.workers(fn, Task, threaded=threaded, **(worker_kwargs or {})), **kwargs)
    sub = client.subscribe()
    with client:
        inserted = client.insert(Task("t"), opts)
        event = wait_for(sub, inserted.job.id)
        stored = client.jobs.get(inserted.job.id)
    return event, stored, client


def test_error_is_retried_with_a_readable_error_element(h: Harness, client_db_url: str) -> None:
    def fail(ctx: Any, args: Task) -> None:
        ctx.record_output({"name": args.name})
        raise ValueError("boom")

    before = datetime.now(UTC)
    event, stored, _ = _run_one(h, client_db_url, fail)
    assert event.kind is EventKind.JOB_FAILED
    # The first retry is ~1 s away: under the scheduler interval, so available at once with a future time.
    assert stored.state is JobState.AVAILABLE and stored.attempt == 1
    assert stored.scheduled_at is not None and stored.scheduled_at > before
    (error,) = stored.errors
    assert error.attempt == 1 and error.error == "ValueError: boom" and "Traceback" in error.trace
    assert stored.metadata["output"] == {"name": "t"}  # recorded output is kept on a failed attempt
    with Client(client_db_url) as reader:
        raw = raw_first_error(reader, stored.id)
    assert isinstance(raw["attempt"], int) and raw["attempt"] == 1
    assert raw["at"][-1] == "Z" or raw["at"][-6] in "+-"
    assert parse_time(raw["at"]) >= before


def test_snooze_keeps_the_attempt(h: Harness, client_db_url: str) -> None:
    def snooze(args: Task) -> None:
        raise JobSnooze(timedelta(minutes=5))

    event, stored, _ = _run_one(h, client_db_url, snooze)
    assert event.kind is EventKind.JOB_SNOOZED
    assert (stored.state, stored.attempt, stored.metadata.get("snoozes"), stored.errors) == (
        JobState.SCHEDULED, 0, 1, ())


@pytest.mark.parametrize("how", ["raise", "return"])
def test_cancel_and_discard(h: Harness, client_db_url: str, how: str) -> None:
    def outcome(value: BaseException) -> Any:
        def work(ctx: Any, args: Task) -> Any:
            if how == "raise":
                raise value
            return value

        return work

    event, stored, _ = _run_one(h, client_db_url, outcome(JobCancel("not wanted")))
    assert event.kind is EventKind.JOB_CANCELLED and stored.state is JobState.CANCELLED
    assert stored.errors[0].error == "JobCancelError: not wanted" and stored.finalized_at is not None

    event, stored, _ = _run_one(h, client_db_url, outcome(JobDiscard("bad input")))
    assert event.kind is EventKind.JOB_FAILED and stored.state is JobState.DISCARDED
    assert stored.errors[0].error == "bad input"


def test_attempts_exhausted_discards(h: Harness, client_db_url: str) -> None:
    def fail(args: Task) -> None:
        raise RuntimeError("again")

    event, stored, _ = _run_one(h, client_db_url, fail, InsertOpts(max_attempts=1))
    assert event.kind is EventKind.JOB_FAILED
    assert stored.state is JobState.DISCARDED and stored.finalized_at is not None and len(stored.errors) == 1


def test_output_recorded_and_middleware_runs(h: Harness, client_db_url: str) -> None:
    calls: list[str] = []
    mw = h.middleware(lambda: calls.append("before"), lambda: calls.append("after"))

    def work(ctx: Any, args: Task) -> None:
        ctx.record_output({"ok": args.name})

    _, stored, _ = _run_one(h, client_db_url, work, middleware=[mw])
    assert stored.state is JobState.COMPLETED and stored.metadata["output"] == {"ok": "t"}
    assert calls == ["before", "after"]


def test_error_handler_may_cancel_after_middleware(h: Harness, client_db_url: str) -> None:
    calls: list[str] = []
    mw = h.middleware(lambda: calls.append("before"), lambda: calls.append("after"))

    def handler(job: Any, exc: BaseException) -> bool:
        calls.append(f"handler {type(exc).__name__}")
        return True

    def work(args: Task) -> None:
        raise RuntimeError("fail")

    event, stored, _ = _run_one(h, client_db_url, work, middleware=[mw], error_handler=h.callback(handler))
    assert event.kind is EventKind.JOB_CANCELLED and stored.state is JobState.CANCELLED
    assert calls == ["before", "after", "handler RuntimeError"]


# ---------------------------------------------------------------- cancellation


def test_job_timeout_interrupts_the_worker(h: Harness, client_db_url: str) -> None:
    causes: list[Any] = []
    event, stored, client = _run_one(
        h, client_db_url, h.cancellable_worker(threading.Event(), causes),
        worker_kwargs={"timeout": timedelta(milliseconds=50)},
    )
    assert event.kind is EventKind.JOB_FAILED and stored.attempt == 1
    assert stored.errors[0].error == "context deadline exceeded"
    assert causes == [CancelCause.TIMEOUT]
    assert client.stats().timed_out == 1


def test_the_client_job_timeout_interrupts_every_job_of_one_claim(h: Harness, client_db_url: str) -> None:
    # Inserted before the start, the three are claimed together: they share the client's timeout
    # and so one deadline (the sync driver looks its slot up once per chunk of a claim).
    causes: list[Any] = []
    client = fast_client(h, client_db_url, h.workers(h.cancellable_worker(threading.Event(), causes), Task),
                         job_timeout=timedelta(milliseconds=50))
    sub = client.subscribe()
    inserted = client.insert_many([Task("a"), Task("b"), Task("c")])
    with client:
        wait_for_all(sub, [r.job.id for r in inserted], (EventKind.JOB_FAILED,))  # in any order
        stored = [client.jobs.get(r.job.id) for r in inserted]
    assert [s.errors[0].error for s in stored] == ["context deadline exceeded"] * 3
    # A failed attempt is retried at once (a future scheduled_at under the scheduler interval),
    # so retries may have run and timed out too before the stop.
    assert len(causes) >= 3 and set(causes) == {CancelCause.TIMEOUT}
    assert client.stats().timed_out == len(causes)


def test_a_thread_worker_ignoring_its_timeout_is_counted_stuck_and_keeps_its_slot(
    h: Harness, client_db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    # Go's 10 s threshold made short: the rule lives in ClientCore, which both drivers consult.
    monkeypatch.setattr(ClientCore, "stuck_after", lambda self, timeout: timeout + timedelta(seconds=0.1))
    release = threading.Event()
    started: list[str] = []

    def stubborn(args: Task) -> None:  # runs in a thread on both drivers and never looks at its token
        started.append(args.name)
        if args.name == "first":
            assert release.wait(WAIT)

    workers = h.workers(stubborn, Task, threaded=True, timeout=timedelta(milliseconds=50))
    one_slot = QueueConfig(max_workers=1, fetch_cooldown=timedelta(milliseconds=5),
                           fetch_poll_interval=timedelta(milliseconds=20))
    client = fast_client(h, client_db_url, workers, queues={"default": one_slot})
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with caplog.at_level(logging.WARNING), client:
        first = client.insert(Task("first"))
        deadline = time.monotonic() + WAIT
        while client.stats().stuck_now == 0:
            assert time.monotonic() < deadline, client.stats()
            time.sleep(0.01)
        second = client.insert(Task("second"))
        # The insert pokes the producer at once: had the stuck run given its slot back, the
        # second job would start within a few fetch cooldowns. Nothing to wait on but time.
        time.sleep(0.2)
        assert started == ["first"]
        # The job counts only: the producers' health (stats().producers) is tested with them.
        assert dataclasses.replace(client.stats(), producers=()) == ClientStats(
            running=1, timed_out=1, stuck=1, stuck_now=1)
        release.set()
        # Returning normally completes it, late or not (as a Go worker returning nil does).
        assert wait_for(sub, first.job.id).kind is EventKind.JOB_COMPLETED
        assert wait_for(sub, second.job.id).kind is EventKind.JOB_COMPLETED
        assert client.stats().stuck_now == 0 and client.stats().stuck == 1
    warnings = [r.getMessage() for r in caplog.records if f"job {first.job.id} " in r.getMessage()]
    assert len(warnings) == 2
    assert "exceeded its timeout" in warnings[0] and "is stuck" in warnings[1]


def test_remote_cancel_of_a_running_job(h: Harness, client_db_url: str) -> None:
    entered = threading.Event()
    causes: list[Any] = []
    client = fast_client(h, client_db_url, h.workers(h.cancellable_worker(entered, causes), Task))
    sub = client.subscribe()
    with client, Database.from_url(client_db_url) as elsewhere:
        inserted = client.insert(Task("victim"))
        assert entered.wait(WAIT)
        # Cancelled by someone else (as another process would): only the notification reaches us.
        running = elsewhere.run(CancelJob(inserted.job.id, cancel_attempted_at_json(datetime.now(UTC))))
        assert running.state is JobState.RUNNING
        if elsewhere.dialect.name == "sqlite":
            # SQLite's cancel sends nothing (§12.4); deliver the control message through the outbox.
            elsewhere.run(Notify(TOPIC_CONTROL, (build_cancel(inserted.job.id, "default"),)))
        event = wait_for(sub, inserted.job.id)
        stored = client.jobs.get(inserted.job.id)
    assert event.kind is EventKind.JOB_CANCELLED and stored.state is JobState.CANCELLED
    assert stored.errors[0].error == "JobCancelError: job cancelled remotely"
    assert stored.finalized_at is not None
    assert causes == [CancelCause.REMOTE_CANCEL]


# ---------------------------------------------------------------- stop


def test_soft_stop_waits_for_running_jobs(h: Harness, client_db_url: str) -> None:
    gate = Gate()
    finished: list[str] = []
    worker = h.gated_worker(gate, lambda args: finished.append(args.name))
    client = fast_client(h, client_db_url, h.workers(worker, Task))
    client.start()
    inserted = client.insert(Task("x"))
    assert gate.entered.wait(WAIT)
    stopper = threading.Thread(target=client.stop)
    stopper.start()
    assert not client.wait(0.2)  # still waiting for the job
    assert finished == []
    gate.release.set()
    stopper.join(WAIT)
    assert client.wait(0) and finished == ["x"]
    assert row(client_db_url, inserted.job.id).state is JobState.COMPLETED


@pytest.mark.parametrize("how", ["stop_and_cancel", "soft_stop_timeout"])
def test_hard_stop_interrupts(h: Harness, client_db_url: str, how: str) -> None:
    entered = threading.Event()
    causes: list[Any] = []
    client = fast_client(h, client_db_url, h.workers(h.cancellable_worker(entered, causes), Task))
    sub = client.subscribe([EventKind.JOB_INTERRUPTED])
    client.start()
    inserted = client.insert(Task("x"))
    assert entered.wait(WAIT)
    if how == "stop_and_cancel":
        client.stop_and_cancel()
    else:
        client.stop(timeout=timedelta(milliseconds=50))
    assert sub.get(timeout=0).job.id == inserted.job.id
    stored = row(client_db_url, inserted.job.id)
    assert (stored.state, stored.attempt, stored.errors) == (JobState.AVAILABLE, 0, ())
    assert causes == [CancelCause.STOP]


def test_soft_stop_interrupt_restores_the_attempt_and_keeps_earlier_errors(
    h: Harness, client_db_url: str
) -> None:
    """River v0.44.0 (#1290): a job cut short by its client's stop is available at once, its
    attempt back to what it was before this run, its ``errors`` as they were, event
    ``job_interrupted``; the same on a job that had failed before."""
    earlier = b'{"at":"2026-01-02T03:04:05Z","attempt":1,"error":"first try failed","trace":""}'
    with Database.from_url(client_db_url) as db:
        (stored,) = db.run(InsertFullJobs((FullJobRow(
            kind="task", encoded_args=b'{"name":"again"}', attempt=1, errors=(earlier,),
            attempted_at=datetime.now(UTC) - timedelta(minutes=1), attempted_by=("before",)),)))
    entered = threading.Event()
    client = fast_client(h, client_db_url, h.workers(h.cancellable_worker(entered, []), Task))
    sub = client.subscribe()
    client.start()
    assert entered.wait(WAIT)
    client.stop(timeout=timedelta(milliseconds=50))
    assert [event.kind for event in sub if event.job is not None] == [EventKind.JOB_INTERRUPTED]
    after = row(client_db_url, stored.id)
    assert (after.state, after.attempt, len(after.errors)) == (JobState.AVAILABLE, 1, 1)
    assert after.errors[0].error == "first try failed" and after.finalized_at is None


# ---------------------------------------------------------------- events


def test_subscription_filters_bounds_and_closes_on_stop(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task))
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
