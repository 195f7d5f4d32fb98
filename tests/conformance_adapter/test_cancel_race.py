"""River's harness leaf Cancel/Race over stdio, Postgres (the leaf is Postgres only).

A cancel and then a retry race between two adapters: the winner holds the job's row lock in an
open transaction until the loser's request is seen waiting on it, then commits. The loser's
request must stay blocked until then, and return the winner's committed row; both answers equal
the row as stored. Python plays both parts here, so both roles are checked.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from tests.conformance_adapter.adapter_process import AdapterProcess, adapter_in_schema, echo, wait_for
from tests.conftest import pg_base_url

pytestmark = pytest.mark.postgres


def _call_into(process: AdapterProcess, method: str, job_id: int, answers: list[Any]) -> None:
    answers.append(process.call(method, {"id": job_id}))


def test_the_loser_of_a_cancel_then_retry_race_returns_the_committed_row() -> None:
    with adapter_in_schema(pg_base_url()) as (winner, schema):
        name = "river-conformance-loser-" + uuid.uuid4().hex[:8]
        loser = AdapterProcess("postgres", schema.adapter_url, name)
        try:
            [inserted] = winner.insert(echo("cancel and retry race", scheduled_at="2099-01-01T00:00:00Z",
                                            queue="nowhere"))
            job_id = inserted["job"]["id"]
            for method in ("cancel", "retry"):
                winner.call("tx_begin", {"tx": method})
                won = winner.call(method, {"id": job_id, "tx": method})
                lost: list[Any] = []
                racing = threading.Thread(target=_call_into, args=(loser, method, job_id, lost))
                racing.start()

                def waiting_on_the_lock() -> bool:
                    row = schema.conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE application_name = %s AND wait_event_type = 'Lock'",
                        (loser.application_name,)).fetchone()
                    return row is not None and row[0] > 0

                wait_for(f"the loser's {method} waiting on the row lock", waiting_on_the_lock)
                assert racing.is_alive() and not lost, f"the loser's {method} returned before the commit"
                winner.call("tx_end", {"tx": method, "commit": True})
                racing.join(timeout=5)
                assert not racing.is_alive(), f"the loser's {method} stayed blocked after the commit"
                stored = winner.call("list", {"ids": [job_id]})["jobs"][0]
                assert lost == [won], f"the loser of a {method} race must return the committed row"
                assert won == stored
            assert stored["state"] == "available"
        finally:
            assert loser.close() == 0, loser.stderr
