"""Every non-migration intent, run against real Postgres and real SQLite.

Each test runs once per database with the same assertions; where the two
databases legitimately differ (COPY vs DO NOTHING, LISTEN vs the outbox) the
test says so. The schema comes from our own Migrator.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from river_db.executor import Executor
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.common import refuse_repeated_unique_keys, unique_index_covers
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.rows import (
    Binder,
    completed_row,
    job_row_from_pg,
    job_row_from_sqlite,
    pg_job_columns,
    sqlite_job_columns,
)
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.dialects.sqlite.admin import shallow_merge_sql
from river_protocol.dialects.sqlite.fragments import in_bitmask
from river_protocol.errors import (
    JobNotFoundError,
    QueueNotFoundError,
    UniqueKeyRepeatedError,
    ValidationError,
)
from river_protocol.intents import (
    CancelJob,
    ClaimJobs,
    CountJobs,
    DeleteExpiredQueues,
    DeleteFinalizedBefore,
    DeleteJob,
    DeleteJobs,
    DeleteNotificationsBefore,
    DeleteQueue,
    DropIndex,
    FetchNotifications,
    FullJobRow,
    GetCancelRequested,
    GetJob,
    GetJobs,
    GetLeader,
    GetQueue,
    GetStuckJobs,
    IndexExists,
    InsertFullJobs,
    InsertJobs,
    InsertJobsFast,
    InsertParams,
    JobListFilter,
    LeaderElect,
    LeaderReelect,
    LeaderResign,
    ListJobs,
    ListQueues,
    ListReindexArtifacts,
    MaxNotificationId,
    Notify,
    PauseQueue,
    ReconcileClaim,
    Reindex,
    RequeueRunningJobs,
    RescueJobs,
    RescueUpdate,
    ResumeQueue,
    RetryJob,
    ScheduleJobs,
    SetStateIfRunning,
    SetStateUpdate,
    Statement,
    UpdateJobMetadata,
    UpdateQueue,
    UpsertQueue,
)
from river_protocol.job import AttemptError, JobRow, encode_attempt_error
from river_protocol.states import JobState

S = JobState
T0 = datetime(2031, 3, 4, 12, 0, 0, 250000, tzinfo=UTC)  # ms precision: exact on SQLite too
KEY = bytes(range(32))
KEY2 = bytes(range(1, 33))
ALL_TABLES = ("river_job", "river_queue", "river_leader", "river_notification")


class DB:
    """An executor plus what the tests need to know about its database."""

    def __init__(self, name: str, conn: Any, executor: Executor) -> None:
        self.name = name
        self.conn = conn
        self.ex = executor

    def run(self, intent: Any) -> Any:
        return self.ex.run(intent)

    @property
    def pg(self) -> bool:
        return self.name == "postgres"


@pytest.fixture(scope="module")
def migrated_pg(module_pg_url: str) -> Iterator[str]:
    import psycopg

    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        Migrator(conn).migrate_up()
    yield module_pg_url


def _only(name: str) -> Any:
    """Parametrise a test over one database only (some behaviour exists on one side alone)."""
    marks = [pytest.mark.postgres] if name == "postgres" else []
    return pytest.mark.parametrize("db", [pytest.param(name, marks=marks)], indirect=True)


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[DB]:
    if request.param == "postgres":
        import psycopg

        url = request.getfixturevalue("migrated_pg")
        conn = psycopg.connect(url, autocommit=True)
        conn.execute("TRUNCATE " + ", ".join(ALL_TABLES) + " RESTART IDENTITY")
        yield DB("postgres", conn, Executor(conn, PostgresDialect()))
    else:
        conn = connect_sqlite(str(tmp_path / "river.sqlite3"))
        Migrator(conn).migrate_up()
        yield DB("sqlite", conn, Executor(conn, SQLiteDialect()))
    conn.close()


def job(kind: str = "k", **kw: Any) -> InsertParams:
    kw.setdefault("encoded_args", b'{"n":1}')
    return InsertParams(kind=kind, **kw)


def full(kind: str = "k", **kw: Any) -> FullJobRow:
    return FullJobRow(kind=kind, **kw)


def put(db: DB, *rows: FullJobRow) -> list[JobRow]:
    result: list[JobRow] = db.run(InsertFullJobs(rows=rows))
    return result


def insert(db: DB, *jobs: InsertParams) -> list[Any]:
    return list(db.run(InsertJobs(jobs=jobs, nonce=uuid.uuid4().hex[:16])))


def err(attempt: int, text: str = "boom", at: datetime = T0) -> bytes:
    return encode_attempt_error(at, attempt, text)


def get(db: DB, job_id: int) -> JobRow:
    row: JobRow = db.run(GetJob(id=job_id))
    return row


# ---------------------------------------------------------------- insert


def test_insert_jobs_returns_rows_in_input_order(db: DB) -> None:
    results = insert(
        db,
        job("a", tags=("t1", "t2"), metadata=b'{"m":1}', priority=2, queue="q1"),
        job("b", state=S.SCHEDULED, scheduled_at=T0, max_attempts=3),
        job("c", state=S.PENDING, created_at=T0 - timedelta(seconds=1)),
    )
    assert [r.job.kind for r in results] == ["a", "b", "c"]
    assert [r.unique_skipped_as_duplicate for r in results] == [False, False, False]
    a, b, c = (r.job for r in results)
    assert json.loads(a.encoded_args) == {"n": 1}
    assert a.tags == ("t1", "t2") and a.priority == 2 and a.queue == "q1"
    assert a.metadata["m"] == 1 and a.state is S.AVAILABLE and a.attempt == 0
    assert a.created_at is not None and a.scheduled_at is not None
    assert b.state is S.SCHEDULED and b.scheduled_at == T0 and b.max_attempts == 3
    assert c.state is S.PENDING and c.created_at == T0 - timedelta(seconds=1)
    assert a.unique_key is None and a.unique_states is None and a.errors == ()


def test_insert_jobs_unique_conflict_returns_existing_row(db: DB) -> None:
    (first,) = insert(db, job("u", unique_key=KEY, unique_states=245))
    assert first.job.unique_key == KEY and first.job.unique_states == 245
    again = insert(db, job("u", unique_key=KEY, unique_states=245), job("other"))
    assert again[0].unique_skipped_as_duplicate is True
    assert again[0].job.id == first.job.id
    assert again[1].unique_skipped_as_duplicate is False


def test_insert_jobs_refuses_a_batch_repeating_a_key_and_inserts_nothing(db: DB) -> None:
    repeated = (job("u", unique_key=KEY, unique_states=245), job("plain"),
                job("u", unique_key=KEY, unique_states=245))
    with pytest.raises(UniqueKeyRepeatedError):
        insert(db, *repeated)
    with pytest.raises(UniqueKeyRepeatedError):
        db.run(InsertJobsFast(jobs=repeated))
    assert db.run(ListJobs()) == []


def test_insert_jobs_bitmask_decides_what_conflicts(db: DB) -> None:
    # 245 leaves out cancelled and discarded: such rows no longer block a new job.
    put(db, full("u", state=S.CANCELLED, finalized_at=T0, unique_key=KEY, unique_states=245))
    (fresh,) = insert(db, job("u", unique_key=KEY, unique_states=245))
    assert fresh.unique_skipped_as_duplicate is False
    put(db, full("u", state=S.COMPLETED, finalized_at=T0, unique_key=KEY2, unique_states=245))
    (dup,) = insert(db, job("u", unique_key=KEY2, unique_states=245))
    assert dup.unique_skipped_as_duplicate is True and dup.job.state is S.COMPLETED


def test_insert_jobs_sqlite_nonce_marks_rows(db: DB) -> None:
    (r,) = db.run(InsertJobs(jobs=(job(),), nonce="0123456789abcdef"))
    if db.pg:
        assert "river:unique_nonce" not in r.job.metadata
    else:
        assert r.job.metadata["river:unique_nonce"] == "0123456789abcdef"


def test_insert_jobs_rejects_empty_batch(db: DB) -> None:
    with pytest.raises(ValidationError, match="no jobs"):
        db.run(InsertJobs(jobs=(), nonce="0123456789abcdef"))


def test_insert_jobs_fast_counts_rows(db: DB) -> None:
    count = db.run(InsertJobsFast(jobs=(
        job("f", tags=("x",)),
        job("f", scheduled_at=T0, state=S.SCHEDULED),
        job("f", unique_key=KEY, unique_states=245),
    )))
    assert count == 3
    rows = db.run(ListJobs())
    assert sorted(r.kind for r in rows) == ["f", "f", "f"]
    assert any(r.tags == ("x",) for r in rows)
    assert any(r.scheduled_at == T0 and r.state is S.SCHEDULED for r in rows)
    assert any(r.unique_key == KEY and r.unique_states == 245 for r in rows)


def test_insert_jobs_fast_unique_conflict(db: DB) -> None:
    insert(db, job("u", unique_key=KEY, unique_states=245))
    batch = InsertJobsFast(jobs=(job("u", unique_key=KEY, unique_states=245), job("x")))
    if db.pg:
        # COPY aborts the whole batch on a unique conflict (docs/protocol.md §5.3).
        import psycopg

        with pytest.raises(psycopg.errors.UniqueViolation):
            db.run(batch)
        assert len(db.run(ListJobs())) == 1
    else:
        assert db.run(batch) == 1
        assert len(db.run(ListJobs())) == 2


def test_insert_full_jobs_round_trips_every_column(db: DB) -> None:
    go_error = (
        b'{"at":"2031-03-04T14:00:00.123456789+02:00","attempt":1,"error":"e1","trace":"t"}'
    )
    (row,) = put(db, full(
        "full", encoded_args=b'{"a":[1,2]}', state=S.DISCARDED, queue="q", priority=4, attempt=2,
        max_attempts=2, attempted_at=T0, attempted_by=("c1", "c2"), created_at=T0,
        errors=(go_error, err(2)), finalized_at=T0 + timedelta(seconds=1), metadata=b'{"x":null}',
        scheduled_at=T0, tags=("a",), unique_key=KEY, unique_states=2,
    ))
    assert row == get(db, row.id)
    assert row.state is S.DISCARDED and row.attempt == 2 and row.max_attempts == 2
    assert row.attempted_by == ("c1", "c2") and row.attempted_at == T0
    assert row.errors == (
        AttemptError(at=datetime(2031, 3, 4, 12, 0, 0, 123456, tzinfo=UTC), attempt=1, error="e1",
                     trace="t"),
        AttemptError(at=T0, attempt=2, error="boom"),
    )
    assert row.finalized_at == T0 + timedelta(seconds=1)
    assert row.metadata == {"x": None} and row.tags == ("a",)
    assert row.unique_key == KEY and row.unique_states == 2


# ---------------------------------------------------------------- claim


def test_claim_jobs_orders_by_priority_scheduled_at_id(db: DB) -> None:
    ids = [r.id for r in put(
        db,
        full(priority=2, scheduled_at=T0 - timedelta(minutes=5)),
        full(priority=1, scheduled_at=T0 - timedelta(minutes=1)),
        full(priority=1, scheduled_at=T0 - timedelta(minutes=2)),
        full(priority=1, scheduled_at=T0 - timedelta(minutes=2)),
        full(priority=1, scheduled_at=T0 + timedelta(minutes=1)),  # not due yet
        full(queue="other", scheduled_at=T0 - timedelta(minutes=9)),
        full(state=S.SCHEDULED, scheduled_at=T0 - timedelta(minutes=9)),
    )]
    claimed = db.run(ClaimJobs(queue="default", limit=3, client_id="me", now=T0))
    assert sorted(j.id for j in claimed) == sorted([ids[2], ids[3], ids[1]])
    rest = db.run(ClaimJobs(queue="default", limit=10, client_id="me", now=T0))
    assert [j.id for j in rest] == [ids[0]]
    for j in claimed + rest:
        assert j.state is S.RUNNING and j.attempt == 1
        assert j.attempted_at == T0 and j.attempted_by == ("me",)


def _prepares(conn: Any) -> list[int]:
    """A counter of statements SQLite compiles on ``conn`` (the authorizer runs only while one is)."""
    count = [0]

    def authorize(*_: Any) -> int:
        count[0] += 1
        return 0  # SQLITE_OK

    conn.set_authorizer(authorize)
    return count


@_only("sqlite")
def test_sqlite_claim_and_outbox_poll_reuse_one_prepared_statement_for_any_limit(db: DB) -> None:
    put(db, *(full(scheduled_at=T0 - timedelta(minutes=1)) for _ in range(6)))
    db.run(Notify(topic="river_insert", payloads=tuple(f'{{"n":{i}}}' for i in range(6))))
    prepares = _prepares(db.conn)  # set before the warm-up: setting it may empty the statement cache
    db.run(ClaimJobs(queue="default", limit=9, client_id="me", now=T0 - timedelta(hours=1)))  # none due
    db.run(FetchNotifications(after_id=0, limit=9))
    prepares[0] = 0
    claims = [db.run(ClaimJobs(queue="default", limit=n, client_id="me", now=T0)) for n in (1, 2, 3)]
    assert [len(c) for c in claims] == [1, 2, 3]
    assert [len(db.run(FetchNotifications(after_id=0, limit=n))) for n in (1, 4, 2)] == [1, 4, 2]
    assert prepares[0] == 0  # every limit ran the statements the warm-up prepared
    # The counter does see a re-prepare: a plain ``LIMIT ?`` is compiled again for each new limit
    # on a SQLite that reads it at prepare time (>= 3.47), which is what LIMIT_PARAM avoids.
    plain = "SELECT id FROM river_notification ORDER BY id LIMIT ?"
    db.conn.execute(plain, (1,)).fetchall()
    prepares[0] = 0
    for n in (2, 3):
        assert len(db.conn.execute(plain, (n,)).fetchall()) == n
    version = tuple(int(x) for x in db.conn.execute("SELECT sqlite_version()").fetchone()[0].split("."))
    assert (prepares[0] > 0) == (version >= (3, 47, 0))


@_only("sqlite")
def test_sqlite_maintenance_and_admin_statements_reuse_one_prepare_for_any_limit(db: DB) -> None:
    # Nothing matches (an empty table), so each plan stops at its LIMIT-ed statement.
    old = T0 - timedelta(days=30)
    intents = [
        lambda n: ScheduleJobs(now=T0, limit=n),
        lambda n: GetStuckJobs(stuck_horizon=T0, limit=n),
        lambda n: DeleteFinalizedBefore(cancelled_before=old, completed_before=old, discarded_before=old,
                                        limit=n),
        lambda n: DeleteExpiredQueues(updated_before=old, limit=n),
        lambda n: ListJobs(filter=JobListFilter(kinds=("k",)), limit=n),
        lambda n: DeleteJobs(filter=JobListFilter(queues=("q",)), limit=n),
        lambda n: ListQueues(limit=n),
    ]
    prepares = _prepares(db.conn)
    for make in intents:  # the warm-up
        db.run(make(9))
    prepares[0] = 0
    for n in (1, 2, 1000):
        for make in intents:
            db.run(make(n))
    assert prepares[0] == 0


def test_claim_jobs_caps_attempted_by(db: DB) -> None:
    history = tuple(f"c{i}" for i in range(100))
    (long_row, short_row) = put(db, full(attempted_by=history, attempt=3), full(attempted_by=("x",)))
    claimed = {j.id: j for j in db.run(ClaimJobs(queue="default", limit=5, client_id="me"))}
    capped = claimed[long_row.id].attempted_by
    assert len(capped) == 100 and capped[0] == "c1" and capped[-2:] == ("c99", "me")
    assert claimed[long_row.id].attempt == 4
    assert claimed[short_row.id].attempted_by == ("x", "me")
    assert claimed[short_row.id].attempted_at is not None


def test_reconcile_claim_puts_back_only_the_lost_claims_rows(db: DB) -> None:
    before = T0 - timedelta(seconds=5)
    fresh, retried, running_here, last_claims, other_client, other_queue, earlier = put(
        db,
        full(),
        full(attempt=2, attempted_by=("c0",), attempted_at=before),
        full(), full(), full(), full(queue="other"), full(scheduled_at=datetime(2001, 1, 1, tzinfo=UTC)),
    )
    # An earlier claim, before the bound: its rows' outcomes may still be on their way.
    db.run(ClaimJobs(queue="default", limit=1, client_id="me", now=before))
    db.run(ClaimJobs(queue="default", limit=4, client_id="me", now=T0))
    db.run(ClaimJobs(queue="default", limit=5, client_id="you", now=T0))
    db.run(ClaimJobs(queue="other", limit=5, client_id="me", now=T0))
    assert get(db, earlier.id).state is S.RUNNING and get(db, earlier.id).attempted_at == before
    restored = db.run(ReconcileClaim(
        queue="default", client_id="me", claimed_since=T0,
        exclude_ids=(running_here.id, last_claims.id),
    ))
    assert restored == sorted([fresh.id, retried.id])
    back = get(db, fresh.id)
    assert (back.state, back.attempt, back.attempted_at, back.attempted_by) == (S.AVAILABLE, 0, None, ())
    back = get(db, retried.id)
    # River keeps no earlier attempted_at to go back to; the claim's own stays.
    assert (back.state, back.attempt, back.attempted_by) == (S.AVAILABLE, 2, ("c0",))
    assert back.attempted_at == T0
    for kept in (running_here, last_claims, other_client, other_queue, earlier):
        assert get(db, kept.id).state is S.RUNNING
    # Nothing left to match: a second reconcile is a no-op, and without a bound the
    # earlier claim's row is included.
    assert db.run(ReconcileClaim(queue="default", client_id="me", claimed_since=T0,
                                 exclude_ids=(running_here.id, last_claims.id))) == []
    assert db.run(ReconcileClaim(queue="default", client_id="me", claimed_since=None,
                                 exclude_ids=(running_here.id, last_claims.id))) == [earlier.id]


def test_claim_jobs_with_zero_limit_claims_nothing(db: DB) -> None:
    put(db, full())
    assert db.run(ClaimJobs(queue="default", limit=0, client_id="me")) == []


def test_claim_jobs_kind_filter(db: DB) -> None:
    a, b, c = put(db, full("a"), full("b"), full("c"))
    assert db.run(ClaimJobs(queue="default", limit=5, client_id="me", kinds=())) == []
    claimed = db.run(ClaimJobs(queue="default", limit=5, client_id="me", kinds=("a", "c")))
    assert sorted(j.id for j in claimed) == [a.id, c.id]
    assert get(db, b.id).state is S.AVAILABLE
    assert [j.id for j in db.run(ClaimJobs(queue="default", limit=5, client_id="me"))] == [b.id]


def test_claim_jobs_tag_filters(db: DB) -> None:
    red, blue, both, none = put(db, full(tags=("red",)), full(tags=("blue",)), full(tags=("blue", "red")),
                                full())
    claimed = db.run(ClaimJobs(queue="default", limit=5, client_id="me", tags_any=("red", "green")))
    assert sorted(j.id for j in claimed) == [red.id, both.id]
    untagged = db.run(ClaimJobs(queue="default", limit=5, client_id="me", untagged_only=True))
    assert [j.id for j in untagged] == [none.id]
    assert get(db, blue.id).state is S.AVAILABLE
    with pytest.raises(ValidationError, match="either"):
        db.run(ClaimJobs(queue="default", limit=5, client_id="me", tags_any=("x",), untagged_only=True))


# ---------------------------------------------------------------- set state


def _running(db: DB, **kw: Any) -> JobRow:
    kw.setdefault("attempt", 1)
    kw.setdefault("attempted_at", T0)
    (row,) = put(db, full(state=S.RUNNING, **kw))
    return row


def test_set_state_if_running_applies_outcomes(db: DB) -> None:
    done = _running(db)
    retry = _running(db, metadata=b'{"keep":1}')
    snooze = _running(db, attempt=3)
    gone_id = 999_999
    rows = db.run(SetStateIfRunning(updates=(
        SetStateUpdate(id=snooze.id, state=S.SCHEDULED, attempt=2,
                       scheduled_at=T0 + timedelta(minutes=1), metadata_do_merge=True,
                       metadata_updates=b'{"snoozes":1}'),
        SetStateUpdate(id=done.id, state=S.COMPLETED, finalized_at=T0),
        SetStateUpdate(id=retry.id, state=S.RETRYABLE, error=err(1),
                       scheduled_at=T0 + timedelta(seconds=30)),
        SetStateUpdate(id=gone_id, state=S.COMPLETED, finalized_at=T0),
    )))
    assert [r.id for r in rows] == sorted([done.id, retry.id, snooze.id])
    by_id = {r.id: r for r in rows}
    assert by_id[done.id].state is S.COMPLETED and by_id[done.id].finalized_at == T0
    r = by_id[retry.id]
    assert r.state is S.RETRYABLE and r.scheduled_at == T0 + timedelta(seconds=30)
    assert r.errors == (AttemptError(at=T0, attempt=1, error="boom"),) and r.metadata == {"keep": 1}
    s = by_id[snooze.id]
    assert s.state is S.SCHEDULED and s.attempt == 2 and s.metadata == {"snoozes": 1}


def test_set_state_if_running_cancel_override(db: DB) -> None:
    meta = b'{"cancel_attempted_at":"2031-03-04T12:00:00Z"}'
    retry = _running(db, metadata=meta)
    snooze = _running(db, metadata=meta, attempt=2)
    short = _running(db, metadata=meta)
    rows = {r.id: r for r in db.run(SetStateIfRunning(now=T0, updates=(
        SetStateUpdate(id=retry.id, state=S.RETRYABLE, error=err(1),
                       scheduled_at=T0 + timedelta(minutes=5)),
        SetStateUpdate(id=snooze.id, state=S.SCHEDULED, attempt=1,
                       scheduled_at=T0 + timedelta(minutes=5)),
        SetStateUpdate(id=short.id, state=S.AVAILABLE, scheduled_at=T0 + timedelta(seconds=1)),
    )))}
    r = rows[retry.id]
    assert r.state is S.CANCELLED and r.finalized_at == T0 and r.scheduled_at == retry.scheduled_at
    assert len(r.errors) == 1  # the error is still recorded
    s = rows[snooze.id]
    assert s.state is S.CANCELLED and s.attempt == 2  # attempt untouched when cancelling
    # The override covers only retryable/scheduled targets (§8.1).
    assert rows[short.id].state is S.AVAILABLE
    assert rows[short.id].scheduled_at == T0 + timedelta(seconds=1)


def test_set_state_if_running_leaves_non_running_rows_but_merges_metadata(db: DB) -> None:
    (done,) = put(db, full(state=S.COMPLETED, finalized_at=T0, metadata=b'{"a":1}'))
    (other,) = put(db, full(state=S.AVAILABLE))
    rows = {r.id: r for r in db.run(SetStateIfRunning(updates=(
        SetStateUpdate(id=done.id, state=S.RETRYABLE, error=err(1), scheduled_at=T0,
                       metadata_do_merge=True, metadata_updates=b'{"output":{"v":2}}'),
        SetStateUpdate(id=other.id, state=S.COMPLETED, finalized_at=T0),
    )))}
    d = rows[done.id]
    assert d.state is S.COMPLETED and d.errors == () and d.metadata == {"a": 1, "output": {"v": 2}}
    assert rows[other.id].state is S.AVAILABLE and rows[other.id].finalized_at is None


def test_set_state_if_running_plain_completions(db: DB) -> None:
    kept = _running(db, metadata=b'{"keep":1}')
    second = _running(db, attempt=2)
    (other,) = put(db, full(state=S.AVAILABLE))
    asked = _running(db, metadata=b'{"cancel_attempted_at":"2031-03-04T12:00:00Z"}')  # success wins
    intent = SetStateIfRunning(updates=tuple(
        SetStateUpdate(id=j, state=S.COMPLETED, finalized_at=T0)
        for j in (kept.id, second.id, other.id, asked.id, 999_999)))
    if db.pg:
        # Columns no update sets are bound as NULL arrays, which unnest pads with NULLs.
        params = next(db.ex.dialect.plan(intent)).params
        assert params[2] is None and params[3] is None and params[5:8] == (None, None, None)
    rows = {r.id: r for r in db.run(intent)}
    assert rows[kept.id].state is S.COMPLETED and rows[kept.id].finalized_at == T0
    assert rows[kept.id].metadata == {"keep": 1} and rows[kept.id].errors == ()
    assert rows[second.id].attempt == 2 and rows[second.id].state is S.COMPLETED
    assert rows[other.id].state is S.AVAILABLE and rows[other.id].finalized_at is None
    assert rows[asked.id].state is S.COMPLETED and 999_999 not in rows
    assert list(rows) == sorted(rows)


def _raw(db: DB, sql: str, *params: Any) -> None:
    """Run ``sql`` as another writer would (``%s`` placeholders on both databases)."""
    if db.pg:
        db.conn.execute(sql, params)
    else:
        db.conn.execute(sql.replace("%s", "?"), params)
        db.conn.commit()


def test_completions_of_claimed_runs_read_back_the_rows_the_database_holds(
    db: DB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completion that knows each run's claimed row reads back only what an update can
    change; the rows it returns are still exactly the stored ones: after another
    writer changed metadata (a cancel request), with errors from an earlier attempt, for a job
    claimed again by another client since (read back whole) and for one no longer running."""
    from river_protocol.dialects.postgres import jobs as pg_jobs
    from river_protocol.dialects.sqlite import jobs as sqlite_jobs
    from river_protocol.outcomes import Completed
    from river_protocol.work import plain_success

    put(db, full(), full(metadata=b'{"keep":1}', tags=("a", "b"), priority=2, unique_key=KEY,
                     unique_states=0b1111_0101),
        full(attempt=1, errors=(err(1),)), full(), full(), full())
    claimed = {r.id: r for r in db.run(ClaimJobs(queue="default", limit=10, client_id="me", now=T0))}
    plain, kept, retried, asked, again, gone = sorted(claimed)
    assert claimed[retried].attempt == 2 and len(claimed[retried].errors) == 1
    cancel_meta = '{"cancel_attempted_at":"2031-03-04T12:00:01Z"}'
    if db.pg:
        _raw(db, "UPDATE river_job SET metadata = %s::jsonb WHERE id = %s", cancel_meta, asked)
        _raw(db, "UPDATE river_job SET attempted_at = %s, attempted_by = ARRAY['other'] WHERE id = %s",
             T0 + timedelta(seconds=5), again)
    else:
        _raw(db, "UPDATE river_job SET metadata = jsonb(%s) WHERE id = %s", cancel_meta, asked)
        _raw(db, "UPDATE river_job SET attempted_at = %s, attempted_by = jsonb('[\"other\"]') WHERE id = %s",
             "2031-03-04 12:00:05.250", again)
    _raw(db, "UPDATE river_job SET state = 'cancelled', finalized_at = attempted_at WHERE id = %s", gone)
    done_at = T0 + timedelta(seconds=9)
    updates = []
    for job_id in sorted(claimed):
        finish = plain_success(claimed[job_id], Completed(), done_at, None)
        assert finish is not None and finish.update.claimed is claimed[job_id]
        updates.append(finish.update)
    intent = SetStateIfRunning(updates=tuple(updates))
    slim: list[int] = []

    def spy(claim: JobRow, *values: Any) -> JobRow:
        slim.append(claim.id)
        return completed_row(claim, *values)

    monkeypatch.setattr(sqlite_jobs, "completed_row", spy)
    monkeypatch.setattr(pg_jobs, "completed_row", spy)
    rows = {r.id: r for r in db.run(intent)}
    assert list(rows) == sorted(claimed)
    for job_id, row in rows.items():
        assert row == get(db, job_id), job_id
    assert rows[plain].state is S.COMPLETED and rows[plain].finalized_at == done_at
    assert rows[kept].metadata == {"keep": 1} and rows[kept].tags == ("a", "b")
    assert rows[kept].unique_key == KEY
    assert rows[retried].errors == claimed[retried].errors and rows[retried].attempt == 2
    assert rows[asked].metadata == json.loads(cancel_meta) and rows[asked].state is S.COMPLETED
    assert rows[again].attempted_by == ("other",) and rows[again].state is S.COMPLETED
    assert rows[gone].state is S.CANCELLED
    # The plain ones came back slim, the one claimed again whole (both dialects).
    assert sorted(slim) == [plain, kept, retried, asked]


def test_completion_reads_a_claimed_row_as_the_full_reader_would() -> None:
    """``completed_row`` (the claim plus what a completion read back) builds what the dialect's
    full reader builds from the whole row, on its direct path and on the reader's."""
    at = datetime(2031, 3, 4, 12, 0, 0, 250000, tzinfo=UTC)
    claim = JobRow(id=7, kind="k", encoded_args=b'{"n":1}', state=S.RUNNING, queue="q", priority=3, attempt=2,
                   max_attempts=5, attempted_at=at, attempted_by=("a", "b"), created_at=at, scheduled_at=at,
                   tags=("t",), unique_key=KEY, unique_states=5)
    done = at + timedelta(seconds=1)
    error_text = json.dumps(json.loads(err(1)))

    def whole(state: str, finalized: Any, errors: Any, metadata: Any) -> tuple[Any, ...]:
        return (7, "k", '{"n":1}', state, "q", 3, 2, 5, at, ["a", "b"], at, finalized, at, errors, metadata,
                ["t"], KEY, 5)

    for errors, metadata in [(None, "{}"), ([error_text], "{}"), (None, '{"m":[1]}'), (None, "[]")]:
        mine = completed_row(claim, "completed", 2, done, at, errors, metadata, job_row_from_pg)
        assert mine == job_row_from_pg(whole("completed", done, errors, metadata)), (errors, metadata)
    assert completed_row(claim, "completed", 2, done, at, None, "[]", job_row_from_pg).undecodable
    text = "2031-03-04 12:00:01.250"  # SQLite: times and the errors array as text
    for errors in [None, "[]", json.dumps([json.loads(err(1))])]:
        mine = completed_row(claim, "completed", 2, text, "2031-03-04 12:00:00.250", errors, "{}",
                             job_row_from_sqlite)
        at_text = "2031-03-04 12:00:00.250"
        sqlite_row = (7, "k", '{"n":1}', "completed", "q", 3, 2, 5, at_text, '["a","b"]', at_text, text,
                      at_text, errors, "{}", '["t"]', KEY, 5)
        assert mine == job_row_from_sqlite(sqlite_row), errors


@_only("postgres")  # SQLite keeps River's millisecond text
@pytest.mark.parametrize("at", [
    datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC), datetime(1969, 12, 31, 23, 59, 59, 500001, tzinfo=UTC),
    datetime(2026, 12, 1, 15, 0, 0, 123457, tzinfo=timezone(timedelta(hours=5))),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
])
def test_set_state_times_are_stored_to_the_microsecond(db: DB, at: datetime) -> None:
    """Postgres receives them as microseconds since the epoch; every year from 1 to 9999 is exact."""
    done, later = _running(db), _running(db)
    rows = {r.id: r for r in db.run(SetStateIfRunning(updates=(
        SetStateUpdate(id=done.id, state=S.COMPLETED, finalized_at=at),
        SetStateUpdate(id=later.id, state=S.SCHEDULED, scheduled_at=at),
    )))}
    assert rows[done.id].finalized_at == at and get(db, done.id).finalized_at == at
    assert rows[later.id].scheduled_at == at and get(db, later.id).scheduled_at == at


def test_rows_per_job_come_back_binary_on_postgres_with_the_same_values(db: DB) -> None:
    from dataclasses import replace

    from river_db.executor import execute_step

    (row,) = put(db, full(state=S.AVAILABLE, tags=("t",), metadata=b'{"m":[1,"x"]}', priority=2,
                          unique_key=b"\x01k", unique_states=3, errors=(err(1), err(2, "two"))))
    claim = next(db.ex.dialect.plan(ClaimJobs(queue=row.queue, limit=5, client_id="c")))
    assert claim.binary is db.pg  # SQLite has no such format; its dialect never asks
    if not db.pg:
        return
    binary = execute_step(db.conn, claim)
    db.conn.execute(f"UPDATE river_job SET state = 'available', attempt = 0, attempted_by = NULL"
                    f" WHERE id = {row.id}")
    text = execute_step(db.conn, replace(claim, binary=False))
    assert len(binary) == len(text) == 1
    assert [v for i, v in enumerate(binary[0]) if i != 8] == [v for i, v in enumerate(text[0]) if i != 8]
    from_binary, from_text = job_row_from_pg(binary[0]), job_row_from_pg(text[0])
    assert replace(from_binary, attempted_at=None) == replace(from_text, attempted_at=None)
    assert from_binary.tags == ("t",) and len(from_binary.errors) == 2 and from_binary.unique_states == 3


@pytest.mark.postgres
def test_client_side_cursors_get_the_same_rows_in_text(migrated_pg: str) -> None:
    import psycopg

    with psycopg.connect(migrated_pg, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        conn.execute("TRUNCATE " + ", ".join(ALL_TABLES) + " RESTART IDENTITY")
        ex = Executor(conn, PostgresDialect())
        (inserted,) = ex.run(InsertJobs(jobs=(job(),)))
        (claimed,) = ex.run(ClaimJobs(queue=inserted.job.queue, limit=1, client_id="c"))
    assert claimed.id == inserted.job.id and claimed.state is S.RUNNING and claimed.attempted_by == ("c",)


# ---------------------------------------------------------------- maintenance


def test_schedule_jobs_makes_due_jobs_available(db: DB) -> None:
    due, later, retry = put(
        db,
        full(state=S.SCHEDULED, scheduled_at=T0 - timedelta(seconds=1)),
        full(state=S.SCHEDULED, scheduled_at=T0 + timedelta(hours=1)),
        full(state=S.RETRYABLE, scheduled_at=T0 + timedelta(seconds=3), priority=2),
    )
    results = db.run(ScheduleJobs(now=T0 + timedelta(seconds=5), limit=10))
    assert [r.job.id for r in results] == [due.id, retry.id]
    assert all(r.job.state is S.AVAILABLE and not r.conflict_discarded for r in results)
    assert get(db, later.id).state is S.SCHEDULED


def test_schedule_jobs_discards_unique_conflicts(db: DB) -> None:
    holder, blocked, free = put(
        db,
        full("u", state=S.AVAILABLE, unique_key=KEY, unique_states=245),
        # Bitmask 1 covers only `available`: this row may wait beside the holder, but
        # making it available would collide, so the scheduler discards it.
        full("u", state=S.RETRYABLE, scheduled_at=T0, unique_key=KEY, unique_states=1),
        full("u", state=S.RETRYABLE, scheduled_at=T0, unique_key=KEY2, unique_states=245),
    )
    results = {r.job.id: r for r in db.run(ScheduleJobs(now=T0 + timedelta(seconds=5), limit=10))}
    b = results[blocked.id]
    assert b.conflict_discarded and b.job.state is S.DISCARDED
    assert b.job.finalized_at == T0 + timedelta(seconds=5)
    assert b.job.metadata == {"unique_key_conflict": "scheduler_discarded"}
    assert results[free.id].job.state is S.AVAILABLE and not results[free.id].conflict_discarded
    assert get(db, holder.id).state is S.AVAILABLE


def test_get_stuck_and_rescue_jobs(db: DB) -> None:
    old = T0 - timedelta(hours=2)
    a = _running(db, attempted_at=old, metadata=b'{"river:rescue_count":2}')
    b = _running(db, attempted_at=old)
    _running(db, attempted_at=T0)  # not stuck
    stuck = db.run(GetStuckJobs(stuck_horizon=T0 - timedelta(hours=1), limit=10))
    assert [j.id for j in stuck] == [a.id, b.id]
    page2 = db.run(GetStuckJobs(stuck_horizon=T0 - timedelta(hours=1), limit=10, after_id=a.id))
    assert [j.id for j in page2] == [b.id]
    error = err(1, "Stuck job rescued by JobRescuer")
    db.run(RescueJobs(updates=(
        RescueUpdate(id=a.id, state=S.RETRYABLE, error=error, finalized_at=None,
                     scheduled_at=T0 + timedelta(seconds=10)),
        RescueUpdate(id=b.id, state=S.DISCARDED, error=error, finalized_at=T0,
                     scheduled_at=b.scheduled_at or T0, metadata_updates=b'{"extra":true}'),
    )))
    ra, rb = get(db, a.id), get(db, b.id)
    assert ra.state is S.RETRYABLE and ra.scheduled_at == T0 + timedelta(seconds=10)
    assert ra.metadata == {"river:rescue_count": 3}
    assert ra.errors[0].error == "Stuck job rescued by JobRescuer"
    assert rb.state is S.DISCARDED and rb.finalized_at == T0
    assert rb.metadata == {"river:rescue_count": 1, "extra": True}


def test_delete_finalized_before(db: DB) -> None:
    old, new = T0 - timedelta(days=2), T0
    rows = put(
        db,
        full(state=S.COMPLETED, finalized_at=old),
        full(state=S.COMPLETED, finalized_at=new),
        full(state=S.CANCELLED, finalized_at=old),
        full(state=S.DISCARDED, finalized_at=old, queue="keep"),
        full(state=S.DISCARDED, finalized_at=old),
        full(state=S.AVAILABLE),
    )
    horizon = T0 - timedelta(days=1)
    # cancelled_before=None: cancelled rows are left alone.
    deleted = db.run(DeleteFinalizedBefore(
        cancelled_before=None, completed_before=horizon, discarded_before=horizon, limit=10,
        queues_excluded=("keep",),
    ))
    assert deleted == 2
    left = {r.id for r in db.run(ListJobs())}
    assert left == {rows[1].id, rows[2].id, rows[3].id, rows[5].id}
    assert db.run(DeleteFinalizedBefore(None, None, None, limit=10)) == 0
    assert db.run(DeleteFinalizedBefore(horizon, horizon, horizon, limit=1,
                                        queues_included=("keep",))) == 1
    assert db.run(DeleteFinalizedBefore(horizon, horizon, horizon, limit=10)) == 1


def test_delete_expired_queues(db: DB) -> None:
    db.run(UpsertQueue(name="old_b", now=T0 - timedelta(days=2)))
    db.run(UpsertQueue(name="old_a", now=T0 - timedelta(days=2)))
    db.run(UpsertQueue(name="fresh", now=T0))
    assert db.run(DeleteExpiredQueues(updated_before=T0 - timedelta(days=1), limit=1)) == ["old_a"]
    assert db.run(DeleteExpiredQueues(updated_before=T0 - timedelta(days=1), limit=5)) == ["old_b"]
    assert [q.name for q in db.run(ListQueues())] == ["fresh"]


def test_index_intents(db: DB) -> None:
    assert db.run(IndexExists(index="river_job_kind")) is True
    assert db.run(IndexExists(index="no_such_index")) is False
    assert db.run(ListReindexArtifacts(index="river_job_kind")) == []
    db.run(Reindex(index="river_job_kind"))
    db.ex.execute(Statement("CREATE INDEX scratch_idx ON river_job (queue)", fetch=False))
    assert db.run(IndexExists(index="scratch_idx")) is True
    db.run(DropIndex(index="scratch_idx"))
    db.run(DropIndex(index="scratch_idx"))  # already gone: no error
    assert db.run(IndexExists(index="scratch_idx")) is False
    with pytest.raises(ValidationError, match="invalid index name"):
        db.run(Reindex(index="x; DROP TABLE river_job"))


@_only("postgres")  # SQLite's plain REINDEX leaves no artifacts
def test_list_reindex_artifacts_finds_leftovers_on_postgres(db: DB) -> None:
    for name in ("river_job_kind_ccnew", "river_job_kind_ccold1", "river_job_kind_other"):
        db.ex.execute(Statement(f"CREATE INDEX {name} ON river_job (kind)", fetch=False))
    assert db.run(ListReindexArtifacts(index="river_job_kind")) == [
        "river_job_kind_ccnew", "river_job_kind_ccold1",
    ]


# ---------------------------------------------------------------- queues


def test_queue_upsert_get_list(db: DB) -> None:
    q = db.run(UpsertQueue(name="alpha", metadata=b'{"a":1}', now=T0))
    assert (q.name, q.created_at, q.updated_at, q.paused_at, q.metadata) == (
        "alpha", T0, T0, None, {"a": 1})
    again = db.run(UpsertQueue(name="alpha", metadata=b'{"b":2}', now=T0 + timedelta(minutes=10)))
    assert again.created_at == T0 and again.updated_at == T0 + timedelta(minutes=10)
    assert again.metadata == {"a": 1}
    db.run(UpsertQueue(name="beta"))
    db.run(UpsertQueue(name="gamma_alpha"))
    assert db.run(GetQueue(name="alpha")) == again
    assert db.run(GetQueue(name="missing")) is None
    assert [x.name for x in db.run(ListQueues())] == ["alpha", "beta", "gamma_alpha"]
    assert [x.name for x in db.run(ListQueues(limit=1, after_name="alpha"))] == ["beta"]
    assert [x.name for x in db.run(ListQueues(name_contains="ALPHA", exclude=("alpha",)))] == [
        "gamma_alpha"]


def test_queue_pause_resume(db: DB) -> None:
    for name in ("a", "b"):
        db.run(UpsertQueue(name=name, now=T0))
    assert db.run(PauseQueue(name="a", now=T0 + timedelta(seconds=1))) == 1
    a = db.run(GetQueue(name="a"))
    assert a.paused_at == T0 + timedelta(seconds=1) and a.updated_at == T0 + timedelta(seconds=1)
    # Pausing everything leaves the already-paused row's times alone.
    assert db.run(PauseQueue(name="*", now=T0 + timedelta(seconds=2))) == 2
    assert db.run(GetQueue(name="a")).paused_at == T0 + timedelta(seconds=1)
    assert db.run(GetQueue(name="b")).paused_at == T0 + timedelta(seconds=2)
    assert db.run(ResumeQueue(name="b", now=T0 + timedelta(seconds=3))) == 1
    b = db.run(GetQueue(name="b"))
    assert b.paused_at is None and b.updated_at == T0 + timedelta(seconds=3)
    assert db.run(ResumeQueue(name="*", now=T0 + timedelta(seconds=4))) == 2
    assert db.run(GetQueue(name="a")).paused_at is None
    assert db.run(GetQueue(name="b")).updated_at == T0 + timedelta(seconds=3)
    with pytest.raises(QueueNotFoundError):
        db.run(PauseQueue(name="nope"))
    with pytest.raises(QueueNotFoundError):
        db.run(ResumeQueue(name="nope"))


def test_queue_pause_all_without_queues_is_fine(db: DB) -> None:
    assert db.run(PauseQueue(name="*")) == 0
    assert db.run(ResumeQueue(name="*")) == 0


def test_queue_update_and_delete(db: DB) -> None:
    db.run(UpsertQueue(name="q", metadata=b'{"a":1}', now=T0))
    updated = db.run(UpdateQueue(name="q", metadata=b'{"b":2}'))
    assert updated.metadata == {"b": 2} and updated.updated_at > T0 - timedelta(days=3650)
    assert db.run(UpdateQueue(name="q")).metadata == {"b": 2}
    with pytest.raises(QueueNotFoundError):
        db.run(UpdateQueue(name="missing", metadata=b"{}"))
    assert db.run(DeleteQueue(name="q")).name == "q"
    assert db.run(GetQueue(name="q")) is None
    with pytest.raises(QueueNotFoundError):
        db.run(DeleteQueue(name="q"))


# ---------------------------------------------------------------- leader


def test_leader_elect_reelect_resign(db: DB) -> None:
    ttl = timedelta(seconds=15)
    won = db.run(LeaderElect(leader_id="one", ttl=ttl, now=T0))
    assert won is not None and won.leader_id == "one"
    assert won.elected_at == T0 and won.expires_at == T0 + ttl
    assert db.run(GetLeader()) == won
    # Someone else can't take a live term.
    assert db.run(LeaderElect(leader_id="two", ttl=ttl, now=T0 + timedelta(seconds=5))) is None
    kept = db.run(LeaderReelect(leader_id="one", elected_at=won.elected_at, ttl=ttl,
                                now=T0 + timedelta(seconds=5)))
    assert kept is not None and kept.expires_at == T0 + timedelta(seconds=20)
    assert kept.elected_at == T0
    # Wrong term or wrong id: no row.
    assert db.run(LeaderReelect(leader_id="one", elected_at=T0 + timedelta(milliseconds=1),
                                ttl=ttl, now=T0 + timedelta(seconds=6))) is None
    assert db.run(LeaderReelect(leader_id="two", elected_at=T0, ttl=ttl,
                                now=T0 + timedelta(seconds=6))) is None
    # After expiry the reelect fails and another client wins.
    late = T0 + timedelta(seconds=21)
    assert db.run(LeaderReelect(leader_id="one", elected_at=T0, ttl=ttl, now=late)) is None
    two = db.run(LeaderElect(leader_id="two", ttl=ttl, now=late))
    assert two is not None and two.leader_id == "two" and two.elected_at == late
    assert db.run(LeaderResign(leader_id="one", elected_at=T0)) is False
    assert db.run(LeaderResign(leader_id="two", elected_at=late)) is True
    assert db.run(GetLeader()) is None
    assert db.run(LeaderResign(leader_id="two", elected_at=late)) is False


def test_leader_elect_on_db_clock(db: DB) -> None:
    won = db.run(LeaderElect(leader_id="one", ttl=timedelta(seconds=15)))
    assert won is not None
    assert won.expires_at - won.elected_at == timedelta(seconds=15)
    again = db.run(LeaderReelect(leader_id="one", elected_at=won.elected_at,
                                 ttl=timedelta(seconds=15)))
    assert again is not None and again.expires_at >= won.expires_at


@_only("postgres")  # SQLite resignations send no notification (§10.1)
def test_leader_resign_notifies_on_postgres(db: DB) -> None:
    won = db.run(LeaderElect(leader_id="one", ttl=timedelta(seconds=15)))
    listener = _listener(db, "public.river_leadership")
    assert db.run(LeaderResign(leader_id="one", elected_at=won.elected_at)) is True
    (note,) = list(listener.notifies(timeout=5, stop_after=1))
    assert json.loads(note.payload) == {"leader_id": "one", "action": "resigned"}
    listener.close()


# ---------------------------------------------------------------- notifications


def _listener(db: DB, channel: str) -> Any:
    import psycopg

    conn = psycopg.connect(db.conn.info.dsn, autocommit=True)
    conn.execute(f'LISTEN "{channel}"')
    return conn


def test_notify(db: DB) -> None:
    payloads = ('{"queue":"a"}', '{"queue":"b"}')
    if db.pg:
        listener = _listener(db, "public.river_insert")
        db.run(Notify(topic="river_insert", payloads=payloads))
        notes = list(listener.notifies(timeout=5, stop_after=2))
        listener.close()
        assert [(n.channel, n.payload) for n in notes] == [
            ("public.river_insert", p) for p in payloads]
        with pytest.raises(ValidationError, match="outbox"):
            db.run(FetchNotifications(after_id=0))
        with pytest.raises(ValidationError, match="outbox"):
            db.run(MaxNotificationId())
    else:
        assert db.run(MaxNotificationId()) == 0
        db.run(Notify(topic="river_insert", payloads=payloads))
        db.run(Notify(topic="river_control", payloads=()))
        rows = db.run(FetchNotifications(after_id=0))
        assert [(r.topic, r.payload) for r in rows] == [("river_insert", p) for p in payloads]
        assert db.run(MaxNotificationId()) == rows[-1].id
        assert db.run(FetchNotifications(after_id=rows[0].id)) == rows[1:]
        assert db.run(FetchNotifications(after_id=0, limit=1)) == rows[:1]


def test_delete_notifications_before(db: DB) -> None:
    table = "river_notification"
    ph = "%s" if db.pg else "?"
    stamp = T0 if db.pg else "2031-03-04 12:00:00.25"
    for topic in ("old", "new"):
        db.ex.execute(Statement(
            f"INSERT INTO {table} (topic, payload, created_at) VALUES ({ph}, 'x', {ph})",
            (topic, stamp if topic == "old" else (T0 + timedelta(hours=1) if db.pg
                                                  else "2031-03-04 13:00:00")),
            fetch=False,
        ))
    assert db.run(DeleteNotificationsBefore(created_before=T0 + timedelta(minutes=1))) == 1
    assert db.run(DeleteNotificationsBefore(created_before=T0 + timedelta(minutes=1))) == 0


# ---------------------------------------------------------------- job administration


def test_get_jobs_and_not_found(db: DB) -> None:
    a, b = put(db, full("a"), full("b"))
    assert get(db, a.id) == a
    assert [j.kind for j in db.run(GetJobs(ids=(b.id, a.id, 12345)))] == ["a", "b"]
    with pytest.raises(JobNotFoundError):
        db.run(GetJob(id=12345))


def test_list_jobs_filters(db: DB) -> None:
    rows = put(
        db,
        full("a", queue="q1", priority=1, tags=("red",), created_at=T0),
        full("b", queue="q2", priority=2, tags=("blue", "green"), created_at=T0 + timedelta(1)),
        full("a", queue="q2", state=S.COMPLETED, finalized_at=T0, created_at=T0 + timedelta(2)),
    )
    ids = [r.id for r in rows]

    def listed(**kw: Any) -> list[int]:
        return [j.id for j in db.run(ListJobs(filter=JobListFilter(**kw)))]

    assert listed() == ids
    assert listed(kinds=("a",)) == [ids[0], ids[2]]
    assert listed(queues=("q2",)) == [ids[1], ids[2]]
    assert listed(states=(S.COMPLETED,)) == [ids[2]]
    assert listed(priorities=(2,)) == [ids[1]]
    assert listed(tags_any=("green", "red")) == [ids[0], ids[1]]
    assert listed(ids=(ids[2], ids[0])) == [ids[0], ids[2]]
    assert listed(created_before=T0 + timedelta(1)) == [ids[0]]
    assert listed(created_after=T0) == [ids[1], ids[2]]
    assert listed(finalized_before=T0 + timedelta(seconds=1)) == [ids[2]]
    counts = db.run(CountJobs())
    assert counts == {(S.AVAILABLE, "q1", "a"): 1, (S.AVAILABLE, "q2", "b"): 1,
                      (S.COMPLETED, "q2", "a"): 1}
    assert db.run(CountJobs(filter=JobListFilter(kinds=("a",)))) == {
        (S.AVAILABLE, "q1", "a"): 1, (S.COMPLETED, "q2", "a"): 1}


def test_list_jobs_order_and_cursor(db: DB) -> None:
    rows = put(
        db,
        full(state=S.COMPLETED, finalized_at=T0 + timedelta(seconds=2)),
        full(state=S.COMPLETED, finalized_at=T0),
        full(state=S.AVAILABLE),
        full(state=S.COMPLETED, finalized_at=T0),
    )
    ids = [r.id for r in rows]
    expected = [ids[1], ids[3], ids[0], ids[2]]  # finalized_at then id; NULL last
    seen: list[int] = []
    after = None
    while True:
        page = db.run(ListJobs(order_by="finalized_at", limit=2, after=after))
        if not page:
            break
        seen += [j.id for j in page]
        after = (page[-1].finalized_at, page[-1].id)
    assert seen == expected
    desc = [j.id for j in db.run(ListJobs(order_by="finalized_at", descending=True))]
    assert desc == [ids[0], ids[3], ids[1], ids[2]]
    by_id = db.run(ListJobs(order_by="id", descending=True, limit=2, after=(None, ids[3])))
    assert [j.id for j in by_id] == [ids[2], ids[1]]
    with pytest.raises(ValidationError, match="cannot order"):
        db.run(ListJobs(order_by="kind"))


def test_list_jobs_tags_all_and_metadata_containment(db: DB) -> None:
    rows = put(
        db,
        full(tags=("red", "blue"), metadata=b'{"writer": "go", "n": 1}'),
        full(tags=("red",), metadata=b'{"writer": "python"}'),
        full(tags=("blue", "red", "green"), metadata=b'{"writer": "python", "n": 1}'),
    )
    ids = [r.id for r in rows]

    def listed(**kw: Any) -> list[int]:
        return [j.id for j in db.run(ListJobs(filter=JobListFilter(**kw)))]

    assert listed(tags_all=("red", "blue")) == [ids[0], ids[2]]
    assert listed(tags_all=("red",)) == ids
    assert listed(tags_all=("red", "purple")) == []
    if db.pg:
        assert listed(metadata_contains=b'{"writer":"python"}') == [ids[1], ids[2]]
        assert listed(metadata_contains=b'{"n":1}', tags_all=("green",)) == [ids[2]]
    else:
        with pytest.raises(ValidationError, match="not supported on SQLite"):
            listed(metadata_contains=b'{"writer":"python"}')


def test_list_jobs_go_keyset(db: DB) -> None:
    rows = put(
        db,
        full(state=S.COMPLETED, finalized_at=T0 + timedelta(seconds=2)),
        full(state=S.COMPLETED, finalized_at=T0),
        full(state=S.COMPLETED, finalized_at=T0),
        full(state=S.RUNNING, attempt=1, attempted_at=T0),
    )
    ids = [r.id for r in rows]

    def listed(**kw: Any) -> list[int]:
        return [j.id for j in db.run(ListJobs(go_keyset=True, **kw))]

    finalized = JobListFilter(states=(S.COMPLETED,))
    assert listed(order_by="finalized_at", filter=finalized) == [ids[1], ids[2], ids[0]]
    assert listed(order_by="finalized_at", filter=finalized, after=(T0, ids[1])) == [ids[2], ids[0]]
    assert listed(order_by="finalized_at", filter=finalized, descending=True, after=(T0, ids[2])) == [ids[1]]
    assert listed(order_by="attempted_at", filter=JobListFilter(states=(S.RUNNING,))) == [ids[3]]
    # Ordering by id, ids alone decide.
    assert listed(order_by="id", descending=True, after=(None, ids[2])) == [ids[1], ids[0]]


def test_list_jobs_go_keyset_places_nulls_as_postgres_does(db: DB) -> None:
    # Newer River (harness leaf List/CursorInterchange): NULLs last ascending, first descending,
    # on both databases, and a cursor standing on a NULL (value None) pages on past it.
    rows = put(
        db,
        full(state=S.AVAILABLE),
        full(state=S.CANCELLED, finalized_at=T0 + timedelta(seconds=1)),
        full(state=S.AVAILABLE),
        full(state=S.CANCELLED, finalized_at=T0),
    )
    ids = [r.id for r in rows]

    def listed(**kw: Any) -> list[int]:
        return [j.id for j in db.run(ListJobs(go_keyset=True, order_by="finalized_at", **kw))]

    assert listed() == [ids[3], ids[1], ids[0], ids[2]]
    assert listed(descending=True) == [ids[2], ids[0], ids[1], ids[3]]
    # Ascending, past a value: later values, then every NULL.
    assert listed(after=(T0, ids[3])) == [ids[1], ids[0], ids[2]]
    # Ascending, past a NULL: the later NULLs only.
    assert listed(after=(None, ids[0])) == [ids[2]]
    # Descending, past a NULL: the earlier NULLs, then every value.
    assert listed(descending=True, after=(None, ids[2])) == [ids[0], ids[1], ids[3]]
    # Descending, past a value: earlier values only, no NULL.
    assert listed(descending=True, after=(T0 + timedelta(seconds=1), ids[1])) == [ids[3]]


@_only("postgres")
@pytest.mark.parametrize("kind", ["cancel", "retry"])
def test_the_loser_of_a_cancel_or_retry_race_returns_the_committed_row(db: DB, kind: str) -> None:
    import threading

    import psycopg

    (job,) = put(db, full(state=S.SCHEDULED, scheduled_at=T0 + timedelta(days=3650)))

    def intent(stamp: bytes) -> Any:
        return CancelJob(id=job.id, cancel_attempted_at=stamp) if kind == "cancel" else RetryJob(id=job.id)

    url = db.conn.info.dsn
    winner = psycopg.connect(url)  # a transaction that holds the row until it commits
    winner.execute("SELECT 1")  # psycopg opened the transaction
    won = Executor(winner, PostgresDialect(), in_caller_tx=True).run(intent(b'"2031-01-01T00:00:00.5Z"'))
    lost: list[JobRow] = []
    loser_conn = psycopg.connect(url, autocommit=True)
    loser = threading.Thread(target=lambda: lost.append(
        Executor(loser_conn, PostgresDialect()).run(intent(b'"2031-01-01T00:00:09Z"'))))
    loser.start()
    try:
        for _ in range(500):  # until the loser's statement waits on the winner's row lock
            row = db.conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                  " AND datname = current_database()").fetchone()
            if row is not None and row[0] > 0:
                break
            loser.join(0.01)
        assert not lost, "the loser returned before the winner committed"
        winner.commit()
        loser.join(15)
    finally:
        winner.close()
    loser_conn.close()
    assert lost == [won] == [get(db, job.id)]


def test_get_cancel_requested_names_running_jobs_with_a_cancel_attempt(db: DB) -> None:
    stamp = b'{"cancel_attempted_at":"2031-01-01T00:00:00Z"}'
    asked, unasked, done, other = put(
        db,
        full(state=S.RUNNING, attempt=1, attempted_at=T0, metadata=stamp),
        full(state=S.RUNNING, attempt=1, attempted_at=T0),
        full(state=S.CANCELLED, finalized_at=T0, metadata=stamp),
        full(state=S.RUNNING, attempt=1, attempted_at=T0, metadata=stamp),
    )
    ids = (asked.id, unasked.id, done.id)
    when = "2031-01-01T00:00:00Z"
    assert db.run(GetCancelRequested(ids=ids)) == ((asked.id, when),)
    assert db.run(GetCancelRequested(ids=(other.id, asked.id))) == ((asked.id, when), (other.id, when))
    assert db.run(GetCancelRequested(ids=())) == ()


def test_cancel_job(db: DB) -> None:
    stamp = b'"2031-03-04T12:00:00.25Z"'
    avail, running, done = put(
        db, full(), full(state=S.RUNNING, attempt=1, attempted_at=T0),
        full(state=S.COMPLETED, finalized_at=T0),
    )
    listener = _listener(db, "public.river_control") if db.pg else None
    c = db.run(CancelJob(id=avail.id, cancel_attempted_at=stamp, now=T0))
    assert c.state is S.CANCELLED and c.finalized_at == T0
    assert c.metadata == {"cancel_attempted_at": "2031-03-04T12:00:00.25Z"}
    r = db.run(CancelJob(id=running.id, cancel_attempted_at=stamp))
    assert r.state is S.RUNNING and r.finalized_at is None
    assert r.metadata == {"cancel_attempted_at": "2031-03-04T12:00:00.25Z"}
    d = db.run(CancelJob(id=done.id, cancel_attempted_at=stamp))
    assert d == done
    with pytest.raises(JobNotFoundError):
        db.run(CancelJob(id=12345, cancel_attempted_at=stamp))
    if listener is not None:
        notes = list(listener.notifies(timeout=5, stop_after=2))
        listener.close()
        assert [json.loads(n.payload) for n in notes] == [
            {"action": "cancel", "job_id": avail.id, "queue": "default"},
            {"action": "cancel", "job_id": running.id, "queue": "default"},
        ]


def test_retry_job(db: DB) -> None:
    discarded, running, waiting, past = put(
        db,
        full(state=S.DISCARDED, attempt=3, max_attempts=3, finalized_at=T0, errors=(err(3),)),
        full(state=S.RUNNING, attempt=1, attempted_at=T0),
        full(state=S.SCHEDULED, scheduled_at=T0 + timedelta(days=1)),
        full(state=S.AVAILABLE, scheduled_at=T0 - timedelta(days=1)),
    )
    r = db.run(RetryJob(id=discarded.id, now=T0))
    assert r.state is S.AVAILABLE and r.scheduled_at == T0 and r.finalized_at is None
    assert r.max_attempts == 4 and r.attempt == 3 and len(r.errors) == 1
    assert db.run(RetryJob(id=running.id, now=T0)) == running
    assert db.run(RetryJob(id=waiting.id, now=T0)).scheduled_at == T0
    assert db.run(RetryJob(id=past.id, now=T0)) == past
    with pytest.raises(JobNotFoundError):
        db.run(RetryJob(id=12345))


def test_delete_job(db: DB) -> None:
    avail, running = put(db, full(), full(state=S.RUNNING, attempt=1, attempted_at=T0))
    assert db.run(DeleteJob(id=avail.id)) == avail
    with pytest.raises(JobNotFoundError):
        db.run(GetJob(id=avail.id))
    with pytest.raises(ValidationError, match="running jobs cannot be deleted"):
        db.run(DeleteJob(id=running.id))
    assert get(db, running.id) == running
    with pytest.raises(JobNotFoundError):
        db.run(DeleteJob(id=avail.id))


def test_delete_jobs(db: DB) -> None:
    rows = put(db, full("a"), full("a", state=S.RUNNING, attempt=1, attempted_at=T0), full("a"),
               full("b"), full("a"))
    deleted = db.run(DeleteJobs(filter=JobListFilter(kinds=("a",)), limit=2))
    assert [j.id for j in deleted] == [rows[0].id, rows[2].id]
    assert [j.id for j in db.run(ListJobs())] == [rows[1].id, rows[3].id, rows[4].id]


def test_update_job_metadata_is_shallow(db: DB) -> None:
    (row,) = put(db, full(metadata=b'{"output":{"a":1},"keep":true}'))
    updated = db.run(UpdateJobMetadata(id=row.id, metadata_updates=b'{"output":{"b":2},"n":null}'))
    assert updated.metadata == {"output": {"b": 2}, "keep": True, "n": None}
    assert db.run(UpdateJobMetadata(id=row.id, metadata_updates=b"{}")).metadata == updated.metadata
    with pytest.raises(JobNotFoundError):
        db.run(UpdateJobMetadata(id=12345, metadata_updates=b'{"a":1}'))


def test_requeue_running_jobs(db: DB) -> None:
    old = _running(db, attempted_at=T0 - timedelta(hours=1), attempt=2)
    _running(db, attempted_at=T0)
    moved = db.run(RequeueRunningJobs(attempted_before=T0 - timedelta(minutes=1), now=T0))
    assert [(j.id, j.state, j.scheduled_at, j.attempt) for j in moved] == [
        (old.id, S.AVAILABLE, T0, 2)]


def test_every_intent_has_a_planner_on_both_dialects() -> None:
    import river_protocol.intents as intents

    migration_intents = {"GetMigrations", "ApplyMigration"}
    wanted = {
        cls for name, cls in vars(intents).items()
        if isinstance(cls, type) and issubclass(cls, intents.Intent)
        and cls is not intents.Intent and name not in migration_intents
    }
    for dialect in (PostgresDialect, SQLiteDialect):
        missing = {c.__name__ for c in wanted} - {c.__name__ for c in dialect.planners()}
        assert not missing, f"{dialect.name} lacks planners for {sorted(missing)}"


# ---------------------------------------------------------------- SQLite text forms


MS_TEXT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")  # River 0.44's one shape


def _timestamp_texts(db: DB) -> list[tuple[str, str]]:
    columns = {
        "river_job": ("attempted_at", "created_at", "finalized_at", "scheduled_at"),
        "river_queue": ("created_at", "paused_at", "updated_at"),
        "river_leader": ("elected_at", "expires_at"),
    }
    texts = []
    for table, names in columns.items():
        for row in db.ex.execute(Statement(f"SELECT {', '.join(names)} FROM {table}")):
            texts += [(f"{table}.{name}", value) for name, value in zip(names, row, strict=True) if value]
    return texts


@_only("sqlite")  # Postgres stores timestamptz, not text
def test_sqlite_db_clock_times_have_three_fractional_digits(db: DB) -> None:
    put(db, full())
    db.run(ClaimJobs(queue="default", limit=1, client_id="me"))
    db.run(UpsertQueue(name="q"))
    won = db.run(LeaderElect(leader_id="one", ttl=timedelta(seconds=15)))
    texts = _timestamp_texts(db)
    assert {column for column, _ in texts} >= {
        "river_job.attempted_at", "river_job.created_at",
        "river_leader.elected_at", "river_leader.expires_at",
        "river_queue.created_at", "river_queue.updated_at",
    }
    assert [(column, text) for column, text in texts if not MS_TEXT.match(text)] == []
    assert won.expires_at - won.elected_at == timedelta(seconds=15)


@_only("sqlite")  # Postgres stores timestamptz, not text
def test_sqlite_every_write_path_writes_three_fractional_digits(db: DB) -> None:
    # Whole seconds and a tenth: the texts River up to v0.43 trimmed ("12:00:00", "12:00:00.1").
    whole, tenth = datetime(2031, 3, 4, 12, 0, tzinfo=UTC), datetime(2031, 3, 4, 12, 0, 0, 100000, tzinfo=UTC)
    (inserted,) = insert(db, job(scheduled_at=whole, created_at=tenth))
    put(db, full(state=S.RUNNING, attempt=1, attempted_at=whole, created_at=tenth, scheduled_at=whole))
    done, rescued, cancelled = (_running(db, attempted_at=whole - timedelta(hours=2)) for _ in range(3))
    db.run(ClaimJobs(queue="default", limit=1, client_id="me", now=whole))
    db.run(SetStateIfRunning(updates=(SetStateUpdate(id=done.id, state=S.COMPLETED, finalized_at=whole),)))
    db.run(RescueJobs(updates=(RescueUpdate(id=rescued.id, state=S.RETRYABLE, error=err(1), finalized_at=None,
                                            scheduled_at=tenth),)))
    db.run(CancelJob(id=cancelled.id, cancel_attempted_at=b'"2031-03-04T12:00:00Z"', now=tenth))
    db.run(RetryJob(id=done.id, now=whole))
    db.run(UpsertQueue(name="q", now=whole))
    db.run(PauseQueue(name="q", now=tenth))
    db.run(LeaderElect(leader_id="one", ttl=timedelta(seconds=15), now=whole))
    texts = _timestamp_texts(db)
    assert len(texts) >= 14
    assert [(column, text) for column, text in texts if not MS_TEXT.match(text)] == []
    assert get(db, inserted.job.id).created_at == tenth


@_only("sqlite")  # Go's SQLite driver returned null errors before 0.44.1
def test_sqlite_rows_without_errors_read_as_an_empty_list(db: DB) -> None:
    (row,) = put(db, full())
    (stored,) = db.ex.execute(Statement("SELECT errors FROM river_job WHERE id = ?", (row.id,)))[0]
    assert stored is None
    assert row.errors == () and get(db, row.id).errors == ()
    assert db.run(ListJobs(filter=JobListFilter()))[0].errors == ()


@_only("sqlite")  # text timestamps exist only on SQLite
def test_sqlite_reads_go_written_text(db: DB) -> None:
    (row,) = put(db, full(state=S.RUNNING, attempt=1, attempted_at=T0))
    # The Go completer binds native times, which modernc stores as time.String() text.
    db.ex.execute(Statement(
        "UPDATE river_job SET state = 'completed',"
        " finalized_at = '2031-03-04 12:00:01.234567891 +0000 UTC m=+0.000000001',"
        " scheduled_at = '2031-03-04T14:00:00+02:00' WHERE id = ?", (row.id,), fetch=False))
    job = get(db, row.id)
    assert job.finalized_at == datetime(2031, 3, 4, 12, 0, 1, 234567, tzinfo=UTC)
    assert job.scheduled_at == datetime(2031, 3, 4, 12, 0, tzinfo=UTC)
    # Reelect matches the term's instant whatever text form elected_at has.
    db.ex.execute(Statement(
        "INSERT INTO river_leader (leader_id, elected_at, expires_at)"
        " VALUES ('go', '2031-03-04T12:00:00.250Z', '2031-03-04 12:00:15.25')", fetch=False))
    kept = db.run(LeaderReelect(leader_id="go", elected_at=T0, ttl=timedelta(seconds=15), now=T0))
    assert kept is not None and kept.expires_at == T0 + timedelta(seconds=15)


# ---------------------------------------------------------------- pure parsing and rendering


T_ROWS = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)


def _row(**over: object) -> list[object]:
    base: dict[str, object] = {
        "id": 7, "kind": "k", "args": '{"a":1}', "state": "available", "queue": "default",
        "priority": 1, "attempt": 0, "max_attempts": 25, "attempted_at": None,
        "attempted_by": None, "created_at": T_ROWS, "finalized_at": None, "scheduled_at": T_ROWS,
        "errors": None, "metadata": "{}", "tags": None, "unique_key": None,
        "unique_states": None,
    }
    base.update(over)
    return list(base.values())


def test_pg_row_reads_bit_strings_and_error_arrays() -> None:
    job = job_row_from_pg(_row(
        unique_states="11110101", unique_key=b"\x01", tags=["a"], attempted_by=["c"],
        errors=['{"at":"2031-03-04T12:00:00.123456789Z","attempt":1,"error":"e","trace":""}'],
    ))
    assert job.unique_states == 245 and job.unique_key == b"\x01"
    assert job.tags == ("a",) and job.attempted_by == ("c",)
    assert job.errors[0].at == datetime(2031, 3, 4, 12, 0, 0, 123456, tzinfo=UTC)
    assert job.args == {"a": 1}


def test_sqlite_row_reads_text_times_and_json_arrays() -> None:
    job = job_row_from_sqlite(_row(
        created_at="2031-03-04 12:00:00", scheduled_at="2031-03-04 13:00:00.5 +0100 CET",
        tags='["x"]', attempted_by='["c1","c2"]', unique_states=0, state="running",
        errors='[{"at":"2031-03-04T12:00:00Z","attempt":1,"error":"e","trace":""}]',
    ))
    assert job.created_at == T_ROWS
    assert job.scheduled_at == datetime(2031, 3, 4, 12, 0, 0, 500000, tzinfo=UTC)
    assert job.tags == ("x",) and job.attempted_by == ("c1", "c2")
    assert job.unique_states is None and job.state is JobState.RUNNING
    assert job.errors[0].attempt == 1


def test_row_parsing_marks_non_object_metadata_instead_of_raising() -> None:
    job = job_row_from_sqlite(_row(metadata="[1]"))
    assert job.metadata == {} and job.undecodable is not None
    assert "metadata must be a JSON object" in job.undecodable


def _top_level_entries(columns: str) -> int:
    depth, entries = 0, 1
    for char in columns:
        depth += {"(": 1, ")": -1}.get(char, 0)
        entries += char == "," and depth == 0
    return entries


def test_column_lists_have_one_entry_per_field() -> None:
    assert _top_level_entries(pg_job_columns()) == _top_level_entries(sqlite_job_columns()) == 18
    assert "u.args::text" in pg_job_columns("u")
    # A malformed value comes back as stored rather than failing the statement.
    assert "WHEN json_valid(metadata, 10) THEN json(metadata) ELSE metadata END" in sqlite_job_columns()


def test_binder_keeps_placeholder_order() -> None:
    b = Binder("?")
    text = f"a = {b.p(1)} AND b = {b.p('x')}"
    assert text == "a = ? AND b = ?" and b.params == [1, "x"]


def test_a_batch_repeating_a_unique_key_is_refused_before_any_sql() -> None:
    key = b"k" * 32
    jobs = (
        InsertParams(kind="a", encoded_args=b"{}", unique_key=key, unique_states=245),
        InsertParams(kind="b", encoded_args=b"{}"),
        # Pending is not in bitmask 1, so this one stays out of the index: no conflict.
        InsertParams(kind="a", encoded_args=b"{}", unique_key=key, unique_states=1,
                     state=JobState.PENDING),
    )
    assert not unique_index_covers(jobs[2])
    refuse_repeated_unique_keys(jobs)  # no repeat inside the index
    repeated = (*jobs, InsertParams(kind="a", encoded_args=b"{}", unique_key=key, unique_states=245))
    with pytest.raises(UniqueKeyRepeatedError, match="jobs 0 and 3") as caught:
        refuse_repeated_unique_keys(repeated)
    assert caught.value.positions == (0, 3)
    assert isinstance(caught.value, ValidationError)
    for dialect in (PostgresDialect(), SQLiteDialect()):
        for intent in (InsertJobs(repeated, nonce="ab" * 8), InsertJobsFast(repeated)):
            with pytest.raises(UniqueKeyRepeatedError):
                dialect.plan(intent).send(None)


def test_sqlite_bitmask_matches_index_spelling() -> None:
    text = in_bitmask()
    assert text.startswith("CASE state WHEN 'available' THEN unique_states & (1 << 0)")
    assert "WHEN 'scheduled' THEN unique_states & (1 << 7) ELSE 0 END >= 1" in text


def test_shallow_merge_sql_validates_updates() -> None:
    assert shallow_merge_sql(Binder("?"), "metadata", b"{}") == "metadata"
    with pytest.raises(ValidationError, match="JSON object"):
        shallow_merge_sql(Binder("?"), "metadata", b"[1]")
    with pytest.raises(ValidationError, match="not valid JSON"):
        shallow_merge_sql(Binder("?"), "metadata", b"{")
    with pytest.raises(ValidationError, match="quote"):
        shallow_merge_sql(Binder("?"), "metadata", b'{"a\\"b":1}')


# ---------------------------------------------------------------- configured schema


@pytest.mark.postgres
def test_postgres_statements_qualify_a_configured_schema(scratch_pg_url: str) -> None:
    import psycopg

    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA other")
        Migrator(conn, schema="other").migrate_up()
        ex = Executor(conn, PostgresDialect("other"))
        listener = psycopg.connect(scratch_pg_url, autocommit=True)
        listener.execute('LISTEN "other.river_control"')
        (first,) = ex.run(InsertJobs(jobs=(job(unique_key=KEY, unique_states=245),)))
        (dup,) = ex.run(InsertJobs(jobs=(job(unique_key=KEY, unique_states=245),)))
        assert dup.unique_skipped_as_duplicate and dup.job.id == first.job.id
        (waiting,) = ex.run(InsertFullJobs(rows=(full(state=S.SCHEDULED, scheduled_at=T0,
                                                      unique_key=KEY, unique_states=1),)))
        (scheduled,) = ex.run(ScheduleJobs(now=T0 + timedelta(seconds=5), limit=5))
        assert scheduled.conflict_discarded and scheduled.job.id == waiting.id
        (claimed,) = ex.run(ClaimJobs(queue="default", limit=5, client_id="me"))
        ex.run(CancelJob(id=claimed.id, cancel_attempted_at=b'"2031-03-04T12:00:00Z"'))
        (note,) = list(listener.notifies(timeout=5, stop_after=1))
        listener.close()
        assert json.loads(note.payload)["job_id"] == claimed.id
        (done,) = ex.run(SetStateIfRunning(updates=(
            SetStateUpdate(id=claimed.id, state=S.RETRYABLE, error=err(1), scheduled_at=T0),)))
        assert done.state is S.CANCELLED
        assert ex.run(IndexExists(index="river_job_kind")) is True
        assert conn.execute("SELECT count(*) FROM other.river_job").fetchone() == (2,)
