"""Helpers of the behavioural suite: clients with fast settings on either driver, reads through river_sync."""

from __future__ import annotations

import json
from typing import Any

from river_protocol.intents import GetJob
from river_protocol.job import JobRow
from river_sync import Database, EventKind
from tests.drivers.harness import Harness
from tests.drivers.leader_support import FAST_ELECTION, fast_maintenance
from tests.drivers.test_client_support import (
    FAST,
    WAIT,
    wait_for,
    wait_for_all,
)

__all__ = ["FAST", "WAIT", "complete_as_go", "fast_client", "leader_client", "row", "wait_for",
           "wait_for_all"]


def fast_client(h: Harness, url: str, workers: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("queues", {"default": FAST})
    return h.client(url, workers=workers, **kwargs)


def leader_client(h: Harness, url: str, workers: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("queues", {"default": FAST})
    kwargs.setdefault("leader_election", FAST_ELECTION)
    kwargs.setdefault("maintenance", fast_maintenance())
    return h.client(url, workers=workers, **kwargs)


def row(url: str, job_id: int) -> JobRow:
    """The job as stored, read through a river_sync Database (the same whichever driver wrote it)."""
    with Database.from_url(url) as db:
        value = db.run(GetJob(job_id), readonly=True)
    assert isinstance(value, JobRow)
    return value


def complete_as_go(url: str, job_id: int) -> None:
    """Complete a job with a plain UPDATE, as a Go client's completer writes it: none of this
    project's promotion follows it."""
    with Database.from_url(url) as db, db.executor() as ex:
        sql = ("UPDATE river_job SET state = 'completed', attempt = 1, attempted_at = now(), "
               "finalized_at = now() WHERE id = %s") if db.dialect.name == "postgres" else (
               "UPDATE river_job SET state = 'completed', attempt = 1, "
               "attempted_at = datetime('now', 'subsec'), finalized_at = datetime('now', 'subsec') "
               "WHERE id = ?")
        ex.conn.execute(sql, (job_id,))
        if db.dialect.name == "postgres" or getattr(ex.conn, "in_transaction", False):
            ex.conn.commit()


def next_of(sub: Any, kind: EventKind) -> Any:
    while True:
        event = sub.get(timeout=WAIT)
        if event.kind is kind:
            return event


def stored_metadata(url: str, job_id: int) -> dict[str, Any]:
    """metadata exactly as stored, decoded by a plain JSON parser."""
    with Database.from_url(url) as db, db.executor(readonly=True) as ex:
        if db.dialect.name == "postgres":
            sql = "SELECT metadata::text FROM river_job WHERE id = %s"
        else:
            sql = "SELECT json(metadata) FROM river_job WHERE id = ?"
        raw = ex.conn.execute(sql, (job_id,)).fetchone()[0]
    value = json.loads(raw)
    assert isinstance(value, dict)
    return value
