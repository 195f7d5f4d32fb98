"""Who waits for which job or workflow in this process, and how a wait learns it may be over.

``client.wait_job``/``wait_workflow`` register a waker here and re-read their rows when
woken. This client's own completer and promoter wake them at once (``finished``);
a job finalized by another process (a Go client, another of ours) is seen at the next
re-check of the wait's bounded back-off (``river_protocol.workflow.Backoff``). One
registry per client serves every waiter of the process that uses that client.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.intents import InsertResult
from river_protocol.job import JobRow
from river_protocol.workflow import WORKFLOW_ID, WorkflowInsertResult, validate_workflow_id

Waker = Callable[[], Any]


class WaitRegistry:
    """Wakers by job id and by workflow id; thread-safe (completions arrive on the client's threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[int, set[Waker]] = {}
        self._workflows: dict[str, set[Waker]] = {}

    def watch(self, wake: Waker, *, job_id: int | None = None,
              workflow_id: str | None = None) -> Callable[[], None]:
        """Call ``wake()`` when that job or a task of that workflow is reported finished; returns
        the function that stops it."""
        with self._lock:
            if job_id is not None:
                self._jobs.setdefault(job_id, set()).add(wake)
            if workflow_id is not None:
                self._workflows.setdefault(workflow_id, set()).add(wake)

        def unwatch() -> None:
            with self._lock:
                if job_id is not None:
                    _drop(self._jobs, job_id, wake)
                if workflow_id is not None:
                    _drop(self._workflows, workflow_id, wake)

        return unwatch

    def __len__(self) -> int:
        with self._lock:
            return sum(map(len, self._jobs.values())) + sum(map(len, self._workflows.values()))

    def finished(self, jobs: Iterable[JobRow]) -> None:
        """Wake the waiters of ``jobs`` (rows that just changed state) and of their workflows."""
        with self._lock:
            if not self._jobs and not self._workflows:
                return
            wakers: set[Waker] = set()
            for job in jobs:
                wakers.update(self._jobs.get(job.id, ()))
                wid = job.metadata.get(WORKFLOW_ID) if self._workflows else None
                if isinstance(wid, str):
                    wakers.update(self._workflows.get(wid, ()))
        for wake in wakers:
            wake()

    def finished_ids(self, job_ids: Iterable[int], workflow_ids: Iterable[str] = ()) -> None:
        """``finished`` for rows known by id only (a promotion's cancellations)."""
        with self._lock:
            wakers: set[Waker] = set()
            for job_id in job_ids:
                wakers.update(self._jobs.get(job_id, ()))
            for wid in workflow_ids:
                wakers.update(self._workflows.get(wid, ()))
        for wake in wakers:
            wake()


def _drop(table: dict[Any, set[Waker]], key: Any, wake: Waker) -> None:
    wakers = table.get(key)
    if wakers is not None:
        wakers.discard(wake)
        if not wakers:
            del table[key]


def job_id_of(job: Any) -> int:
    """The id of what ``wait_job`` was given: a ``JobRow``, an ``InsertResult`` or an id."""
    if isinstance(job, InsertResult):
        return job.job.id
    if isinstance(job, JobRow):
        return job.id
    if isinstance(job, int) and not isinstance(job, bool):
        return job
    raise ValidationError(f"wait_job takes a JobRow, an InsertResult or a job id, got {type(job).__name__}")


def workflow_id_of(workflow: Any) -> str:
    """The id of what ``wait_workflow`` was given: a ``WorkflowInsertResult`` or a workflow id."""
    if isinstance(workflow, WorkflowInsertResult):
        return workflow.id
    if isinstance(workflow, str):
        return validate_workflow_id(workflow)
    raise ValidationError(
        f"wait_workflow takes a WorkflowInsertResult or a workflow id, got {type(workflow).__name__}")


def timeout_seconds(timeout: timedelta | float | None) -> float | None:
    """A wait's timeout in seconds (None: no limit); a negative one is refused."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if seconds < 0:
        raise ValidationError(f"a wait's timeout cannot be negative, got {timeout}")
    return seconds


def widened(watch: dict[str, Any], last: Any) -> dict[str, Any]:
    """A job wait's watch, plus the job's workflow once its row says it is a workflow task:
    the workflow's ``river_py_finished`` announcements then wake it too."""
    if "workflow_id" in watch or not isinstance(last, JobRow):
        return watch
    wid = last.metadata.get(WORKFLOW_ID)
    return {**watch, "workflow_id": wid} if isinstance(wid, str) else watch
