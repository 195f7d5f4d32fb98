"""Flow control's intents against real Postgres and SQLite: the limited claim does what the
pure rule (``river_protocol.flow_control.choose_claims``) says, on both databases."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from river_db.executor import Executor
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.base import drive
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import MigrationError
from river_protocol.flow_control import (
    ConcurrencyConfig,
    FlowControl,
    FlowJob,
    PartitionConfig,
    QueueLimits,
    RateLimit,
    SequenceOpts,
    choose_claims,
)
from river_protocol.flow_intents import (
    BusiestPartitions,
    ClaimLimitedJobs,
    ListQueueLimits,
    SetQueueLimits,
    UpdateQueueLimits,
)
from river_protocol.intents import ClaimJobs, FullJobRow, InsertFullJobs
from river_protocol.job import JobRow
from river_protocol.states import JobState

S = JobState
T0 = datetime(2031, 3, 4, 12, 0, 0, 250000, tzinfo=UTC)
CLIENT = "me"


class DB:
    def __init__(self, name: str, conn: Any, executor: Executor, reopen: Callable[[], Any]) -> None:
        self.name, self.conn, self.ex, self.reopen = name, conn, executor, reopen

    def run(self, intent: Any) -> Any:
        return self.ex.run(intent)

    def sql(self, text: str) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute(text)
        finally:
            cur.close()


@pytest.fixture(scope="module")
def flow_pg(module_pg_url: str) -> Iterator[str]:
    import psycopg

    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        Migrator(conn).migrate_up()
        Migrator(conn, line="python").migrate_up()
    yield module_pg_url


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[DB]:
    if request.param == "postgres":
        import psycopg

        url = request.getfixturevalue("flow_pg")
        conn: Any = psycopg.connect(url, autocommit=True)
        conn.execute("TRUNCATE river_job, river_py_queue_limit, river_py_job_start RESTART IDENTITY")
        yield DB("postgres", conn, Executor(conn, PostgresDialect()),
                 lambda: psycopg.connect(url, autocommit=True))
    else:
        path = str(tmp_path / "river.sqlite3")
        conn = connect_sqlite(path)
        Migrator(conn).migrate_up()
        Migrator(conn, line="python").migrate_up()
        yield DB("sqlite", conn, Executor(conn, SQLiteDialect()), lambda: connect_sqlite(path))
    conn.close()


def reset(db: DB) -> None:
    for table in ("river_job", "river_py_queue_limit", "river_py_job_start"):
        db.sql(f"DELETE FROM {table}")


def put(db: DB, *rows: FullJobRow) -> list[JobRow]:
    result: list[JobRow] = db.run(InsertFullJobs(rows=rows))
    return result


def row(kind: str = "k", state: S = S.AVAILABLE, *, args: Any = None, by: str | None = None,
        priority: int = 1, metadata: Any = None, queue: str = "q") -> FullJobRow:
    return FullJobRow(
        kind=kind, state=state, queue=queue, priority=priority, scheduled_at=T0 - timedelta(minutes=1),
        encoded_args=json.dumps(args or {}).encode(), metadata=json.dumps(metadata or {}).encode(),
        attempted_by=(by,) if by else (), attempt=1 if by else 0,
        attempted_at=T0 - timedelta(minutes=1) if by else None,
        finalized_at=T0 if state in (S.COMPLETED, S.CANCELLED, S.DISCARDED) else None,
    )


def claim(db: DB, flow: FlowControl, limit: int = 10, *, now: datetime = T0,
          client: str = CLIENT) -> list[int]:
    rows: list[JobRow] = db.run(ClaimLimitedJobs(
        claim=ClaimJobs(queue="q", limit=limit, client_id=client, now=now), flow=flow))
    assert all(r.state is S.RUNNING and r.attempted_by[-1] == client for r in rows)
    return sorted(r.id for r in rows)


BY_CUSTOMER = PartitionConfig(by_args=("customer",))


def test_set_queue_limits_needs_the_python_line(tmp_path: Any) -> None:
    conn = connect_sqlite(str(tmp_path / "bare.sqlite3"))
    Migrator(conn).migrate_up()
    with pytest.raises(MigrationError, match=r"river migrate-up --line python"):
        Executor(conn, SQLiteDialect()).run(SetQueueLimits("q", QueueLimits(global_limit=1)))
    assert Executor(conn, SQLiteDialect()).run(ListQueueLimits()) == []
    conn.close()


def test_limits_round_trip_and_replace(db: DB) -> None:
    db.run(SetQueueLimits("q", QueueLimits(global_limit=3, rate_allowed=5, rate_period=timedelta(seconds=2)),
                          concurrency_partition=BY_CUSTOMER))
    db.run(SetQueueLimits("r", QueueLimits(local_limit=1)))
    db.run(SetQueueLimits("r", QueueLimits(local_limit=2)))
    rows = db.run(ListQueueLimits())
    assert [r.queue for r in rows] == ["q", "r"]
    assert rows[0].limits == QueueLimits(global_limit=3, rate_allowed=5, rate_period=timedelta(seconds=2))
    assert rows[0].concurrency_partition == BY_CUSTOMER and rows[0].rate_partition == PartitionConfig()
    assert rows[1].limits == QueueLimits(local_limit=2)


def _after_first_write(ex: Executor, then: Callable[[], None]) -> Callable[[Any], Any]:
    """``ex.execute`` that calls ``then`` once, right after the plan's first write statement:
    the moment another writer can slip in between a plan's statements."""
    done = False

    def execute(step: Any) -> Any:
        nonlocal done
        rows = ex.execute(step)
        if not done and step.sql.lstrip().upper().startswith(("UPDATE", "INSERT")):
            done = True
            then()
        return rows

    return execute


def test_set_limits_on_a_new_queue_racing_another_both_succeed(db: DB) -> None:
    """Each statement on its own (autocommit, as inside a caller's autocommit connection): the
    second writer runs its whole change between the first one's statements; both succeed and
    the last one's numbers stay, the partitions written before kept."""
    db.run(SetQueueLimits("other", QueueLimits(global_limit=9), concurrency_partition=BY_CUSTOMER))
    first, second = QueueLimits(global_limit=1), QueueLimits(local_limit=2)
    conn = db.reopen()
    try:
        other = Executor(conn, db.ex.dialect, in_caller_tx=True)
        mine = Executor(db.conn, db.ex.dialect, in_caller_tx=True)
        drive(db.ex.dialect.plan(UpdateQueueLimits("q", first)),
              _after_first_write(mine, lambda: other.run(UpdateQueueLimits("q", second))))
    finally:
        conn.close()
    rows = {r.queue: r for r in db.run(ListQueueLimits())}
    assert rows["q"].limits in (first, second) and rows["q"].concurrency_partition == PartitionConfig()
    db.run(UpdateQueueLimits("other", first))
    rows = {r.queue: r for r in db.run(ListQueueLimits())}
    assert rows["other"].limits == first and rows["other"].concurrency_partition == BY_CUSTOMER


@pytest.mark.postgres
def test_set_limits_in_racing_transactions_on_a_new_queue_both_succeed(flow_pg: str) -> None:
    """Two transactions on Postgres: the second one's change starts while the first one's row is
    written but not committed, and goes on when that commits; neither fails."""
    import psycopg

    first, second = QueueLimits(global_limit=1), QueueLimits(local_limit=2)
    with psycopg.connect(flow_pg, autocommit=True) as a, psycopg.connect(flow_pg, autocommit=True) as b:
        a.execute("TRUNCATE river_py_queue_limit")
        b_pid = b.info.backend_pid
        errors: list[BaseException] = []

        def other() -> None:
            try:
                Executor(b, PostgresDialect()).run(UpdateQueueLimits("q", second))
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)

        def let_the_other_run() -> None:
            thread = threading.Thread(target=other)
            thread.start()
            # Until it has finished, or waits for this transaction's row lock.
            with psycopg.connect(flow_pg, autocommit=True) as watch:
                while thread.is_alive() and not watch.execute(
                        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)",
                        (b_pid,)).fetchone()[0]:  # type: ignore[index]
                    thread.join(0.01)
            threads.append(thread)

        threads: list[threading.Thread] = []
        ex = Executor(a, PostgresDialect())
        with ex.transaction():
            drive(PostgresDialect().plan(UpdateQueueLimits("q", first)),
                  _after_first_write(ex, let_the_other_run))
        threads[0].join()
        assert errors == []
        (row,) = Executor(a, PostgresDialect()).run(ListQueueLimits())
        assert row.limits in (first, second)


def test_global_limit_per_partition_skips_full_partitions(db: DB) -> None:
    flow = FlowControl(concurrency=ConcurrencyConfig(global_limit=2, partition=BY_CUSTOMER))
    db.run(SetQueueLimits("q", flow.limits, concurrency_partition=BY_CUSTOMER))
    put(db, row(state=S.RUNNING, args={"customer": 1}, by="other"),
        *[row(args={"customer": 1}) for _ in range(5)], *[row(args={"customer": 2}) for _ in range(5)])
    # Customer 1 has one slot left: its first job, then customer 2's first two (not blocked
    # behind customer 1's four others).
    assert claim(db, flow) == [2, 7, 8]
    assert claim(db, flow) == []
    usage = db.run(BusiestPartitions("q", BY_CUSTOMER, top=5))
    assert [(u.running) for u in usage] == [2, 2]


def test_limits_are_read_from_the_table_at_each_claim(db: DB) -> None:
    flow = FlowControl(concurrency=ConcurrencyConfig(global_limit=1))
    put(db, *[row() for _ in range(6)])
    db.run(SetQueueLimits("q", QueueLimits(global_limit=1)))
    assert claim(db, flow) == [1]
    db.run(SetQueueLimits("q", QueueLimits(global_limit=3)))
    assert claim(db, flow) == [2, 3]
    # No row at all: the client's own limits.
    db.sql("DELETE FROM river_py_queue_limit")
    assert claim(db, flow) == []


def test_local_limit_counts_this_clients_jobs_only(db: DB) -> None:
    flow = FlowControl(concurrency=ConcurrencyConfig(local_limit=1, partition=PartitionConfig(by_kind=True)))
    db.run(SetQueueLimits("q", flow.limits))
    put(db, row("a", S.RUNNING, by="other"), row("a", S.RUNNING, by="other"), row("a"), row("a"), row("b"))
    assert claim(db, flow) == [3, 5]
    assert claim(db, flow, client="third") == [4]


def test_rate_limit_sliding_window(db: DB) -> None:
    flow = FlowControl(rate_limit=RateLimit(allowed=2, period=timedelta(seconds=10)))
    db.run(SetQueueLimits("q", flow.limits))
    put(db, *[row() for _ in range(6)])
    assert claim(db, flow, now=T0) == [1, 2]
    assert claim(db, flow, now=T0 + timedelta(seconds=9)) == []
    # The window is (now - period, now]: a start exactly one period ago no longer counts.
    assert claim(db, flow, now=T0 + timedelta(seconds=10)) == [3, 4]
    assert claim(db, flow, now=T0 + timedelta(seconds=15)) == []


def test_sequence_runs_in_insert_order_and_waits_on_retries(db: DB) -> None:
    seq = SequenceOpts(by_args=("customer",))
    halting = SequenceOpts(by_args=("customer",), continue_on_discarded=False)
    flow = FlowControl(sequences=True)
    a, b = {"customer": "a"}, {"customer": "b"}
    put(db,
        row(args=a, metadata=seq.metadata("k", a)),          # 1: runs first
        row(args=a, metadata=seq.metadata("k", a)),          # 2: waits for 1
        row(args=b, state=S.DISCARDED, metadata=seq.metadata("k", b)),  # 3: gone, b moves on
        row(args=b, metadata=seq.metadata("k", b)),          # 4
        row(args=b, metadata=halting.metadata("k", b)),      # 5: behind 4 anyway
        row())                                               # 6: not in a sequence
    assert claim(db, flow) == [1, 4, 6]
    db.sql("UPDATE river_job SET state = 'retryable' WHERE id = 1")
    db.sql("UPDATE river_job SET state = 'discarded', finalized_at = attempted_at WHERE id = 4")
    assert claim(db, flow) == []  # 2 waits for 1's retry; 5 halts on discarded 4
    db.sql("UPDATE river_job SET state = 'completed', finalized_at = attempted_at WHERE id = 1")
    assert claim(db, flow) == [2]


# ---------------------------------------------------------------- SQL == the pure rule

_STATES = [S.AVAILABLE, S.AVAILABLE, S.AVAILABLE, S.RUNNING, S.RUNNING, S.COMPLETED, S.RETRYABLE,
           S.DISCARDED, S.SCHEDULED]
_jobs = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(_STATES), st.integers(0, 3),
              st.sampled_from([None, "me", "other"]), st.integers(1, 3), st.booleans()),
    min_size=0, max_size=24)
_limit = st.one_of(st.none(), st.integers(1, 3))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(jobs=_jobs, g=_limit, loc=_limit, rate=_limit, limit=st.integers(1, 8),
       by_kind=st.booleans(), by_arg=st.booleans(), sequences=st.booleans(), starts=st.integers(0, 3))
def test_sql_claim_matches_the_pure_rule(
    db: DB, jobs: list[Any], g: int | None, loc: int | None, rate: int | None, limit: int,
    by_kind: bool, by_arg: bool, sequences: bool, starts: int,
) -> None:
    reset(db)
    part = PartitionConfig(by_kind=by_kind, by_args=("c",) if by_arg else ())
    conc = ConcurrencyConfig(global_limit=g, local_limit=loc, partition=part) if (g or loc) else None
    rl = RateLimit(allowed=rate, period=timedelta(seconds=5), partition=part) if rate else None
    flow = FlowControl(concurrency=conc, rate_limit=rl, sequences=sequences)
    db.run(SetQueueLimits("q", flow.limits))
    seq = SequenceOpts(by_args=("c",))
    recent: dict[Any, int] = {}
    if rl is not None and starts:
        # Earlier starts in the window, recorded under the first kind/partition as a claim would.
        pre = FlowControl(rate_limit=RateLimit(allowed=starts, period=timedelta(seconds=5), partition=part))
        db.run(SetQueueLimits("q", pre.limits))
        seeded = put(db, *[row("a", args={"c": 0}) for _ in range(starts)])
        assert len(claim(db, pre, limit=starts, now=T0 - timedelta(seconds=1))) == starts
        db.sql(f"DELETE FROM river_job WHERE id >= {seeded[0].id}")
        recent[part.key("a", {"c": 0})] = starts
        db.run(SetQueueLimits("q", flow.limits))
    rows = [row(kind, state, args={"c": c}, by=by if state is S.RUNNING else None, priority=prio,
                metadata=seq.metadata(kind, {"c": c}) if in_seq else None)
            for kind, state, c, by, prio, in_seq in jobs]
    stored = put(db, *rows) if rows else []
    model = [FlowJob(id=r.id, kind=r.kind, state=r.state, args=json.loads(r.encoded_args),
                     priority=r.priority, scheduled_at=r.scheduled_at,
                     last_attempted_by=r.attempted_by[-1] if r.attempted_by else None,
                     metadata=r.metadata)
             for r in stored]
    expected = choose_claims(jobs=model, flow=flow, limits=flow.limits, client_id=CLIENT, limit=limit,
                             now=T0, recent_starts=recent)
    assert claim(db, flow, limit=limit) == sorted(expected)


# ---------------------------------------------------------------- the python migration line


@pytest.mark.parametrize("kind", [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def test_python_line_up_down_and_list(kind: str, request: pytest.FixtureRequest, tmp_path: Any) -> None:
    url = (str(request.getfixturevalue("scratch_pg_url")) if kind == "postgres"
           else f"sqlite://{tmp_path / 'line.sqlite3'}")
    with Migrator(url, line="python") as early, pytest.raises(MigrationError, match="migrate the main line"):
        early.migrate_up()
    with Migrator(url) as main_line:
        main_line.migrate_up()
    with Migrator(url, line="python") as m:
        assert m.all_versions()[0].name == "flow control"  # later versions: other features
        every = [v.version for v in m.all_versions()]
        assert "river_py_queue_limit" in m.get_sql(1, "up") and "DROP TABLE" in m.get_sql(1, "down")
        assert m.get_versions() == []
        assert [v.version for v in m.migrate_up().versions] == every
        assert m.get_versions() == every and m.validate().ok
        Executor(m.conn, m.dialect).run(SetQueueLimits("q", QueueLimits(global_limit=1)))
        with Migrator(m.conn) as main_again:
            assert main_again.get_versions() == [1, 2, 3, 4, 5, 6, 7, 8]  # the lines are kept apart
        assert [v.version for v in m.migrate_down(target_version=-1).versions] == every[::-1]
        assert m.get_versions() == []  # its bookkeeping rows are gone with its tables
        assert Executor(m.conn, m.dialect).run(ListQueueLimits()) == []
        m.migrate_up()
        assert m.get_versions() == every


def test_a_limited_claim_keeps_the_asynchronous_commit_option() -> None:
    intent = ClaimLimitedJobs(claim=ClaimJobs(queue="q", limit=1, client_id="c", asynchronous_commit=True),
                              flow=FlowControl(ConcurrencyConfig(global_limit=1)))
    first = next(PostgresDialect().plan(intent))
    assert first.sql == "SET LOCAL synchronous_commit = off"
    plain = ClaimLimitedJobs(claim=ClaimJobs(queue="q", limit=1, client_id="c"), flow=intent.flow)
    assert "FOR UPDATE" in next(PostgresDialect().plan(plain)).sql
