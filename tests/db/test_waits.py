"""river_db.waits: who waits for which job or workflow, and what a wait accepts."""

from __future__ import annotations

from datetime import timedelta

import pytest

from river_db.waits import WaitRegistry, job_id_of, timeout_seconds, widened, workflow_id_of
from river_protocol.errors import ValidationError
from river_protocol.intents import InsertResult
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_protocol.workflow import WORKFLOW_ID, WorkflowInsertResult


def row(job_id: int, wid: str | None = None) -> JobRow:
    return JobRow(id=job_id, kind="k", encoded_args=b"{}", state=JobState.COMPLETED,
                  metadata={WORKFLOW_ID: wid} if wid else {})


def test_wakes_the_waiters_of_a_job_and_of_its_workflow_until_unwatched() -> None:
    registry = WaitRegistry()
    woken: list[str] = []
    stop_job = registry.watch(lambda: woken.append("job 1"), job_id=1)
    stop_flow = registry.watch(lambda: woken.append("flow w"), workflow_id="w")
    registry.watch(lambda: woken.append("job 9"), job_id=9)
    assert len(registry) == 3
    registry.finished([row(1), row(2, "w")])
    assert sorted(woken) == ["flow w", "job 1"]
    woken.clear()
    registry.finished_ids([9], ["w"])
    assert sorted(woken) == ["flow w", "job 9"]
    stop_job()
    stop_flow()
    stop_flow()  # twice is harmless
    woken.clear()
    registry.finished([row(1, "w")])
    assert woken == [] and len(registry) == 1


def test_what_a_wait_accepts() -> None:
    job = row(5)
    assert job_id_of(job) == 5 and job_id_of(7) == 7
    assert job_id_of(InsertResult(job, unique_skipped_as_duplicate=False)) == 5
    for bad in (True, "5", 1.5, None):
        with pytest.raises(ValidationError, match="wait_job takes"):
            job_id_of(bad)
    assert workflow_id_of("w-1") == "w-1"
    assert workflow_id_of(WorkflowInsertResult("w-2", "n", {})) == "w-2"
    with pytest.raises(ValidationError, match="wait_workflow takes"):
        workflow_id_of(3)
    with pytest.raises(ValidationError, match="workflow id"):
        workflow_id_of("not an id")
    assert timeout_seconds(None) is None and timeout_seconds(2) == 2.0
    assert timeout_seconds(timedelta(milliseconds=250)) == 0.25
    with pytest.raises(ValidationError, match="cannot be negative"):
        timeout_seconds(-1)


def test_a_job_wait_watches_its_workflow_once_the_row_names_it() -> None:
    assert widened({"job_id": 1}, row(1, "w")) == {"job_id": 1, "workflow_id": "w"}
    assert widened({"job_id": 1}, row(1)) == {"job_id": 1}
    assert widened({"job_id": 1}, None) == {"job_id": 1}
    assert widened({"workflow_id": "x"}, row(1, "w")) == {"workflow_id": "x"}
