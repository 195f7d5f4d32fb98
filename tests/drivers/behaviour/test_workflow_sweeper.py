"""The workflow sweeper on every client and both databases: with the python line, a Python
client promotes the dependents of a task a Go client completed although River's leader is
that Go client (a row of its own in river_leader) or this client never takes part in River's
elections; only one client holds the lease, and another takes over when it stops."""

from __future__ import annotations

import dataclasses
import logging
import threading
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from river_db.migrator import Migrator
from river_protocol.intents import GetLease, HoldLease, ReleaseLease
from river_protocol.machines.workflow_sweeper import MISSING_LINE_NEVER_LEADS
from river_protocol.workflow import Workflow
from river_sync import Database, InsertOpts, JobState
from tests.drivers.behaviour.support import FAST, WAIT, complete_as_go, row
from tests.drivers.harness import Harness
from tests.drivers.leader_support import FAST_ELECTION, fast_maintenance, leader_id, wait_until

INTERVAL = timedelta(milliseconds=100)  # the lease: asked every 0.5 s, lasting 1.5 s
GO_LEADER = "go-river-leader"


@dataclasses.dataclass
class Step:
    kind: ClassVar[str] = "wf_sweep_step"
    name: str = ""


def _python_line(url: str) -> None:
    """The python line applied and no lease held (a Postgres database serves the module's tests)."""
    with Migrator(url, line="python") as m:
        m.migrate_up()
        cur = m.conn.cursor()
        cur.execute("DELETE FROM river_py_lease")
        cur.close()


def _execute(url: str, pg_sql: str, sqlite_sql: str) -> list[Any]:
    with Database.from_url(url) as db, db.executor() as ex:
        cur = ex.conn.execute(pg_sql if db.dialect.name == "postgres" else sqlite_sql)
        rows = list(cur.fetchall()) if cur.description else []
        if db.dialect.name == "postgres" or getattr(ex.conn, "in_transaction", False):
            ex.conn.commit()
    return rows


def _go_leads(url: str) -> None:
    """River's leader row names a Go client, for an hour: no Python client here leads River."""
    _execute(url,
             "INSERT INTO river_leader (leader_id, elected_at, expires_at) "
             f"VALUES ('{GO_LEADER}', now(), now() + interval '1 hour')",
             "INSERT INTO river_leader (leader_id, elected_at, expires_at) "
             f"VALUES ('{GO_LEADER}', datetime('now', 'subsec'), datetime('now', 'subsec', '+3600 seconds'))")


def _lease_holder(url: str) -> str | None:
    rows = _execute(url, "SELECT holder FROM river_py_lease WHERE name = 'workflow_sweeper'",
                    "SELECT holder FROM river_py_lease WHERE name = 'workflow_sweeper'")
    return str(rows[0][0]) if rows else None


def _client(h: Harness, url: str, order: list[str], lock: threading.Lock, **kwargs: Any) -> Any:
    def work(args: Step) -> None:
        with lock:
            order.append(args.name)

    kwargs.setdefault("leader_election", FAST_ELECTION)
    return h.client(url, workers=h.workers(h.worker(work), Step), queues={"default": FAST},
                    maintenance=fast_maintenance(workflow_promoter_interval=INTERVAL), **kwargs)


def _go_workflow() -> Workflow:
    wf = Workflow(name="mixed")
    wf.add("go_part", Step("go_part"), opts=InsertOpts(queue="go_only"))  # no Python client works it
    wf.add("after", Step("after"), deps=["go_part"])
    return wf


@pytest.mark.parametrize("election", ["go_leads", "disabled"])
def test_a_python_client_that_does_not_lead_river_promotes_after_a_go_completion(
        h: Harness, client_db_url: str, election: str) -> None:
    _python_line(client_db_url)
    _go_leads(client_db_url)
    order: list[str] = []
    lock = threading.Lock()
    options: dict[str, Any] = {"leader_election_disabled": True, "leader_election": True} \
        if election == "disabled" else {}
    client = _client(h, client_db_url, order, lock, **options)
    with client:
        inserted = client.insert_workflow(_go_workflow())
        go_id = inserted.job("go_part").id
        complete_as_go(client_db_url, go_id)
        after = client.wait_job(inserted.job("after"), timeout=WAIT)
        assert not client.is_leader
    assert after.state is JobState.COMPLETED and order == ["after"]
    assert row(client_db_url, go_id).state is JobState.COMPLETED
    with Database.from_url(client_db_url) as db:
        assert leader_id(db) == GO_LEADER  # River's leadership never changed hands
    assert _lease_holder(client_db_url) is None  # given up at stop


def test_one_client_holds_the_lease_and_another_takes_over_when_it_stops(
        h: Harness, client_db_url: str) -> None:
    _python_line(client_db_url)
    _go_leads(client_db_url)
    order: list[str] = []
    lock = threading.Lock()
    first, second = (_client(h, client_db_url, order, lock) for _ in range(2))
    with first, second:
        holder = wait_until(lambda: _lease_holder(client_db_url), "a client holding the sweeper's lease")
        by_id = {first.client_id: first, second.client_id: second}
        assert holder in by_id
        by_id[holder].stop()
        other = next(c for cid, c in by_id.items() if cid != holder)
        inserted = other.insert_workflow(_go_workflow())
        complete_as_go(client_db_url, inserted.job("go_part").id)
        after = other.wait_job(inserted.job("after"), timeout=WAIT)
        assert _lease_holder(client_db_url) == other.client_id
    assert after.state is JobState.COMPLETED and order == ["after"]


def test_lease_statements_on_each_database(client_db_url: str) -> None:
    """Take, refuse, renew, take over an expired lease, give up; None without the table."""
    ttl = timedelta(hours=1)
    with Migrator(client_db_url, line="python") as m:
        m.migrate_down(target_version=-1)
    with Database.from_url(client_db_url) as db:
        assert db.run(HoldLease("t", "a", ttl)) is None
        assert db.run(ReleaseLease("t", "a")) is False
    _python_line(client_db_url)
    with Database.from_url(client_db_url) as db:
        assert db.run(HoldLease("t", "a", ttl)) is True
        assert db.run(HoldLease("t", "b", ttl)) is False
        assert db.run(HoldLease("t", "a", ttl)) is True  # renewed
        assert db.run(HoldLease("other", "b", ttl)) is True  # leases are per name
        assert db.run(ReleaseLease("t", "b")) is False
        _execute(client_db_url, "UPDATE river_py_lease SET expires_at = now() - interval '1 second'",
                 "UPDATE river_py_lease SET expires_at = datetime('now', 'subsec', '-1 seconds')")
        assert db.run(HoldLease("t", "b", ttl)) is True  # a's lease lapsed
        assert db.run(HoldLease("t", "a", ttl)) is False
        assert db.run(ReleaseLease("t", "b")) is True
        assert db.run(HoldLease("t", "a", ttl)) is True


def test_without_the_python_line_a_client_that_never_leads_says_it_will_not_sweep(
        h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with Migrator(client_db_url, line="python") as m:
        m.migrate_down(target_version=-1)
    order: list[str] = []
    lock = threading.Lock()
    caplog.set_level(logging.INFO)
    client = _client(h, client_db_url, order, lock, leader_election_disabled=True, leader_election=True)
    with client:
        wait_until(lambda: any(MISSING_LINE_NEVER_LEADS in r.getMessage() for r in caplog.records),
                   "the sweeper's notice")
    assert sum(MISSING_LINE_NEVER_LEADS in r.getMessage() for r in caplog.records) == 1


def test_get_lease_reads_the_row_and_the_database_clock(client_db_url: str) -> None:
    """GetLease on each database: no table (the python line missing) is an answer, then no row,
    then the holder's row with the times the database wrote."""
    with Migrator(client_db_url, line="python") as m:
        m.migrate_down(target_version=-1)
    with Database.from_url(client_db_url) as db:
        missing = db.run(GetLease("t"), readonly=True)
        assert (missing.table_exists, missing.row) == (False, None) and missing.read_at.tzinfo is not None
    _python_line(client_db_url)
    with Database.from_url(client_db_url) as db:
        assert db.run(GetLease("t"), readonly=True).row is None
        assert db.run(HoldLease("t", "a", timedelta(hours=1))) is True
        read = db.run(GetLease("t"), readonly=True)
        assert read.table_exists and read.row is not None
        assert (read.row.name, read.row.holder) == ("t", "a")
        assert read.row.held_since <= read.read_at < read.row.expires_at
        assert read.row.expires_at - read.row.held_since == timedelta(hours=1)
        assert db.run(GetLease("other"), readonly=True).row is None  # leases are per name


def test_the_admin_api_names_the_sweeper_and_a_missing_line(h: Harness, client_db_url: str) -> None:
    with Migrator(client_db_url, line="python") as m:
        m.migrate_down(target_version=-1)
    order: list[str] = []
    lock = threading.Lock()
    client = _client(h, client_db_url, order, lock)
    status = client.workflows.sweeper()
    assert not status.line_applied and status.holder is None and status.sweeper is None
    assert "river migrate-up --line python" in status.describe()

    _python_line(client_db_url)
    _go_leads(client_db_url)
    status = client.workflows.sweeper()
    assert status.line_applied and status.holder is None and status.river_leader == GO_LEADER
    assert status.describe().startswith("nobody holds the workflow sweeper lease")
    with client:
        wait_until(lambda: _lease_holder(client_db_url), "the client taking the sweeper's lease")
        status = client.workflows.sweeper()
        assert status.held and status.sweeper == status.holder == client.client_id
        assert status.held_since is not None and status.expires_at is not None
        assert status.held_since <= status.read_at < status.expires_at
        assert status.describe().startswith(f"{client.client_id} sweeps workflows: lease taken ")
        assert status.river_leader == GO_LEADER  # River's leadership is not the sweeper's
    # Given up at stop (read by a client that never starts: the stopped one closed its database);
    # a lease whose holder died lapses, and says so.
    reader = _client(h, client_db_url, order, lock)
    assert reader.workflows.sweeper().holder is None
    _execute(client_db_url,
             "INSERT INTO river_py_lease (name, holder, held_since, expires_at) VALUES "
             "('workflow_sweeper', 'gone', now() - interval '1 minute', now() - interval '1 second')",
             "INSERT INTO river_py_lease (name, holder, held_since, expires_at) VALUES ('workflow_sweeper', "
             "'gone', datetime('now', 'subsec', '-60 seconds'), datetime('now', 'subsec', '-1 seconds'))")
    status = reader.workflows.sweeper()
    assert status.holder == "gone" and not status.held and status.sweeper is None
    assert "the workflow sweeper lease of gone" in status.describe() and "lapsed" in status.describe()
