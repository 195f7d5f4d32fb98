"""PromoteWorkflowTasks on real Postgres and SQLite, each way of naming the candidates."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from river_protocol.intents import ListWorkflowTasks, PromoteWorkflowTasks
from river_protocol.states import JobState
from river_protocol.workflow import TASK, Workflow
from river_sync import Client, Database
from tests.drivers.test_client_support import client_db_url_fixture, migrated_pg_fixture  # noqa: F401


@dataclasses.dataclass
class Part:
    kind: ClassVar[str] = "wf_db_part"


def _end(db: Database, job_id: int, state: str, at: datetime) -> None:
    """A dep finished as a Go client records it: a plain UPDATE, no promotion of ours."""
    with db.executor() as ex:
        if db.dialect.name == "postgres":
            ex.conn.execute("UPDATE river_job SET state = %s, finalized_at = %s WHERE id = %s",
                            (state, at, job_id))
        else:
            ex.conn.execute("UPDATE river_job SET state = ?, finalized_at = ? WHERE id = ?",
                            (state, at.strftime("%Y-%m-%d %H:%M:%S.000"), job_id))
        if getattr(ex.conn, "in_transaction", False) or db.dialect.name == "postgres":
            ex.conn.commit()


def _states(db: Database, wid: str) -> dict[str, JobState]:
    return {j.metadata[TASK]: j.state for j in db.run(ListWorkflowTasks(wid), readonly=True)}


def _setup(url: str) -> tuple[Any, str]:
    wf = Workflow(name="db")
    a = wf.add("a", Part())
    b = wf.add("b", Part())
    wf.add("after_a", Part(), deps=[a])
    wf.add("after_both", Part(), deps=[a, b])
    wf.add("after_b", Part(), deps=[b])
    wf.add("after_after_b", Part(), deps=["after_b"])
    with Client(url) as client:
        inserted = client.insert_workflow(wf)
    return inserted, inserted.id


def test_each_way_of_naming_candidates(client_db_url: str) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    inserted, wid = _setup(client_db_url)
    with Database.from_url(client_db_url) as db:
        _end(db, inserted.job("a").id, "completed", now)
        # Finished since later than the end: nothing looked at.
        nothing = db.run(PromoteWorkflowTasks(now=now, finished_since=now + timedelta(seconds=5)))
        assert (nothing.examined, nothing.promoted) == (0, ())
        # The completer's way: dependents of "a" only.
        first = db.run(PromoteWorkflowTasks(now=now, finished=((wid, "a"),)))
        assert first.examined == 2 and [i for i, _ in first.promoted] == [inserted.job("after_a").id]
        assert db.run(PromoteWorkflowTasks(now=now, finished=((wid, "a"),))).promoted == ()  # exactly once
        # The leader's run between full sweeps: workflows with an end since then, all their tasks.
        _end(db, inserted.job("b").id, "discarded", now)
        since = db.run(PromoteWorkflowTasks(now=now, finished_since=now - timedelta(seconds=1)))
        assert since.examined == 3 and since.promoted == ()
        assert sorted(i for i, _ in since.cancelled) == sorted(
            inserted.job(t).id for t in ("after_both", "after_b", "after_after_b"))  # the cascade too
        states = _states(db, wid)
    assert states == {"a": JobState.COMPLETED, "b": JobState.DISCARDED, "after_a": JobState.AVAILABLE,
                      "after_both": JobState.CANCELLED, "after_b": JobState.CANCELLED,
                      "after_after_b": JobState.CANCELLED}


def test_a_full_sweep_pages(client_db_url: str) -> None:
    now = datetime.now(UTC)
    inserted, wid = _setup(client_db_url)
    with Database.from_url(client_db_url) as db:
        _end(db, inserted.job("a").id, "completed", now)
        _end(db, inserted.job("b").id, "completed", now)
        page = db.run(PromoteWorkflowTasks(now=now, limit=2))
        assert page.examined == 2 and len(page.promoted) == 2
        rest = db.run(PromoteWorkflowTasks(now=now, limit=2, after_id=page.last_id))
        assert rest.examined == 2 and len(rest.promoted) == 1  # after_after_b waits for after_b
        assert _states(db, wid)["after_after_b"] is JobState.PENDING
