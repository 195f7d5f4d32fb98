"""Insert middleware on both clients: what it sees, what it may change, and that it wraps the insert."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from river_protocol.errors import ValidationError
from river_protocol.middleware import metadata_of, with_metadata
from river_sync import Database, InsertManyParams, InsertOpts, PeriodicJob
from tests.drivers.behaviour.support import leader_client
from tests.drivers.behaviour.support import stored_metadata as stored_with_nonce
from tests.drivers.harness import Harness
from tests.drivers.leader_support import all_jobs, wait_until
from tests.drivers.test_client_support import Other, Task


def stored_metadata(url: str, job_id: int) -> dict[str, Any]:
    """Stored metadata without the SQLite insert's own nonce key."""
    return {k: v for k, v in stored_with_nonce(url, job_id).items() if k != "river:unique_nonce"}


def test_metadata_added_by_middleware_is_stored_next_to_the_callers(h: Harness, client_db_url: str) -> None:
    seen: list[tuple[str, ...]] = []

    def stamp(params: Any) -> Any:
        seen.append(tuple(p.kind for p in params))
        return [with_metadata(p, {"stamped": len(seen)}) for p in params]

    client = h.client(client_db_url, insert_middleware=[h.insert_middleware(stamp)])
    one = client.insert(Task("a"), InsertOpts(metadata={"mine": True}))
    many = client.insert_many([Task("b"), InsertManyParams(Other(3))])
    assert seen == [("task",), ("task", "other")]
    assert stored_metadata(client_db_url, one.job.id) == {"mine": True, "stamped": 1}
    assert [stored_metadata(client_db_url, r.job.id) for r in many] == [{"stamped": 2}, {"stamped": 2}]
    # The returned row is the stored one.
    assert one.job.metadata == stored_with_nonce(client_db_url, one.job.id)


def test_first_middleware_is_outermost(h: Harness, client_db_url: str) -> None:
    order: list[str] = []

    def named(name: str) -> Any:
        def change(params: Any) -> Any:
            order.append(name)
            return [with_metadata(p, {"last": name}) for p in params]

        return h.insert_middleware(change)

    client = h.client(client_db_url, insert_middleware=[named("outer"), named("inner")])
    result = client.insert(Task("x"))
    assert order == ["outer", "inner"]
    assert stored_metadata(client_db_url, result.job.id) == {"last": "inner"}


def test_middleware_may_not_change_what_the_insert_was_planned_from(h: Harness, client_db_url: str) -> None:
    move = h.insert_middleware(lambda params: [dataclasses.replace(p, queue="elsewhere") for p in params])
    client = h.client(client_db_url, insert_middleware=[move])
    with pytest.raises(ValidationError, match="changed queue of job 0"):
        client.insert(Task("x"))
    drop = h.client(client_db_url, insert_middleware=[h.insert_middleware(lambda params: params[:1])])
    with pytest.raises(ValidationError, match="passed on 1 jobs for an insert of 2"):
        drop.insert_many([Task("a"), Task("b")])
    assert len(client.jobs.list().jobs) == 0


def test_priority_and_tags_may_change(h: Harness, client_db_url: str) -> None:
    bump = h.insert_middleware(
        lambda params: [dataclasses.replace(p, priority=4, tags=("mw",)) for p in params]
    )
    client = h.client(client_db_url, insert_middleware=[bump])
    job = client.jobs.get(client.insert(Task("x")).job.id)
    assert (job.priority, job.tags) == (4, ("mw",))


def test_middleware_runs_inside_the_callers_transaction(h: Harness, client_db_url: str) -> None:
    calls: list[int] = []

    def count(params: Any) -> Any:
        calls.append(len(params))
        assert metadata_of(params[0]) == {}
        return params

    client = h.client(client_db_url, insert_middleware=[h.insert_middleware(count)])
    with pytest.raises(RuntimeError), h.transaction(client) as tx:
        client.insert(Task("gone"), tx=tx)
        raise RuntimeError("roll back")
    assert calls == [1]
    assert len(client.jobs.list().jobs) == 0


def test_periodic_inserts_pass_through_the_middleware_too(h: Harness, client_db_url: str) -> None:
    seen: list[tuple[str, ...]] = []

    def stamp(params: Any) -> Any:
        seen.append(tuple(p.kind for p in params))
        return [with_metadata(p, {"stamped": True}) for p in params]

    periodic = PeriodicJob(timedelta(hours=1), lambda: Task("p"), id="hourly", run_on_start=True,
                           opts=InsertOpts(queue="parked"))  # nobody works it: the row stays as inserted
    with Database.from_url(client_db_url) as db, leader_client(
        h, client_db_url, h.workers(lambda args: None, Task), periodic_jobs=[periodic],
        insert_middleware=[h.insert_middleware(stamp)],
    ):
        (row,) = wait_until(lambda: all_jobs(db), "the periodic job to be enqueued")
    assert seen == [("task",)]
    assert stored_metadata(client_db_url, row.id) == {
        "periodic": True, "river:periodic_job_id": "hourly", "stamped": True,
    }
