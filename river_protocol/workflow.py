"""Workflows: jobs that wait for other jobs (pure rules, no I/O).

A workflow is a set of named tasks, each an ordinary River job, some of which
depend on others. A task without deps is inserted ``available`` (or
``scheduled``); a task with deps is inserted in River's ``pending`` state,
which no River client claims, and a promoter moves it on once its deps are
final: to ``available`` when every dep completed (or ended in a state its
``ignore_*_deps`` option accepts), to ``cancelled`` when one was discarded or
cancelled. Once available, a task is a plain River job, so a Go worker that
knows its kind works it.

Everything a task needs is kept in its own ``metadata``, under this project's
``river_py:`` namespace (never River Pro's ``workflow_id``/``task``/``deps``
keys, so a database with River Pro installed is not confused): no table.

This module holds the builder (``Workflow``), its validation, how a workflow
becomes insert items, and ``decide``: the one rule that says what a pending
task becomes given its deps' states. The dialects' promotion plans call it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from river_protocol.errors import JobNotFoundError, RiverError, ValidationError
from river_protocol.job import JobRow, encode_attempt_error
from river_protocol.metadata_keys import OUTPUT
from river_protocol.options import InsertOpts
from river_protocol.states import JobState

# ---------------------------------------------------------------- metadata keys (ours, never River Pro's)

PREFIX = "river_py:"
WORKFLOW_ID = "river_py:workflow_id"
WORKFLOW_NAME = "river_py:workflow_name"
TASK = "river_py:task"
DEPS = "river_py:deps"
IGNORE_CANCELLED_DEPS = "river_py:ignore_cancelled_deps"
IGNORE_DISCARDED_DEPS = "river_py:ignore_discarded_deps"

TASK_NAME_MAX_LEN = 200
WORKFLOW_ID_RE = re.compile(r"\A[A-Za-z0-9_.:\-]{1,100}\Z")


class WorkflowError(RiverError):
    """Base of the errors a workflow wait raises."""


class WorkflowTaskFailedError(WorkflowError):
    """A task (or job) waited for ended discarded or cancelled; ``job`` is its final row."""

    def __init__(self, message: str, job: JobRow | None = None, jobs: Sequence[JobRow] = ()) -> None:
        super().__init__(message)
        self.job = job
        self.jobs = tuple(jobs)


class WaitTimeoutError(WorkflowError, TimeoutError):
    """The timeout of a wait passed before the job (or workflow) was final; ``job`` is its last row read."""

    def __init__(self, message: str, job: JobRow | None = None) -> None:
        super().__init__(message)
        self.job = job


# ---------------------------------------------------------------- the builder


@dataclass(frozen=True, slots=True)
class TaskRef:
    """What ``Workflow.add`` returns: a task's name, usable in other tasks' ``deps``."""

    name: str
    workflow: int = field(default=0, compare=False, repr=False)  # id() of the builder it came from


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    args: Any
    deps: tuple[str, ...]
    opts: InsertOpts | None
    ignore_cancelled_deps: bool
    ignore_discarded_deps: bool


def validate_task_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ValidationError(f"a workflow task name must be a non-empty string, got {name!r}")
    if len(name) > TASK_NAME_MAX_LEN:
        raise ValidationError(f"workflow task name is longer than {TASK_NAME_MAX_LEN} characters: "
                              f"{name[:40]!r}...")
    return name


def validate_workflow_id(value: Any) -> str:
    if not isinstance(value, str) or WORKFLOW_ID_RE.fullmatch(value) is None:
        raise ValidationError(
            f"a workflow id must be 1 to 100 letters, digits or '_.:-', got {value!r}"
        )
    return value


class Workflow:
    """A DAG of tasks to insert together with ``client.insert_workflow(wf)``.

    ``add`` returns a ``TaskRef`` to name as another task's dep. A dep may also be
    given by name (``str``): a name added later in this builder, or, for a builder
    made by a running task (``ctx.workflow.extend()``), a task already inserted in
    the workflow (``existing``). A duplicate name, or a ``TaskRef`` from another
    builder, is a ``ValidationError`` at ``add``; an unknown name or a cycle is one
    at insert (``validate``), and then nothing is inserted.
    """

    def __init__(self, name: str = "", *, id: str | None = None,
                 existing: Iterable[str] = ()) -> None:
        if not isinstance(name, str):
            raise ValidationError(f"workflow name must be a string, got {name!r}")
        self.name = name
        self.id = validate_workflow_id(id) if id is not None else None
        self.existing = frozenset(existing)
        self._tasks: dict[str, Task] = {}

    def add(
        self,
        task_name: str,
        args: Any,
        *,
        deps: Iterable[TaskRef | str] = (),
        opts: InsertOpts | None = None,
        ignore_cancelled_deps: bool = False,
        ignore_discarded_deps: bool = False,
    ) -> TaskRef:
        name = validate_task_name(task_name)
        if name in self._tasks or name in self.existing:
            raise ValidationError(f"workflow {self.name!r} already has a task named {name!r}")
        if opts is not None and not isinstance(opts, InsertOpts):
            raise ValidationError(f"task {name!r}: opts must be InsertOpts, got {type(opts).__name__}")
        if opts is not None and opts.unique_opts is not None and not opts.unique_opts.is_empty():
            raise ValidationError(f"task {name!r}: unique options are not accepted on workflow tasks "
                                  "(a duplicate would be skipped and leave its dependents waiting)")
        if opts is not None and opts.pending:
            raise ValidationError(f"task {name!r}: a workflow decides which tasks are pending; "
                                  "InsertOpts(pending=True) is not accepted")
        if isinstance(deps, str | TaskRef):
            deps = (deps,)
        names: list[str] = []
        for dep in deps:
            if isinstance(dep, TaskRef):
                if dep.workflow not in (0, id(self)):
                    raise ValidationError(f"task {name!r}: dep {dep.name!r} belongs to another workflow")
                dep_name = dep.name
            elif isinstance(dep, str):
                dep_name = dep
            else:
                raise ValidationError(f"task {name!r}: a dep must be a TaskRef or a task name, got {dep!r}")
            if dep_name == name:
                raise ValidationError(f"task {name!r} cannot depend on itself")
            if dep_name not in names:
                names.append(dep_name)
        self._tasks[name] = Task(name, args, tuple(names), opts, bool(ignore_cancelled_deps),
                                 bool(ignore_discarded_deps))
        return TaskRef(name, id(self))

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(self._tasks.values())

    def __len__(self) -> int:
        return len(self._tasks)

    def validate(self) -> tuple[Task, ...]:
        """The tasks in an order where each comes after its deps; unknown deps and cycles raise."""
        if not self._tasks:
            raise ValidationError(f"workflow {self.name!r} has no tasks")
        for task in self._tasks.values():
            for dep in task.deps:
                if dep not in self._tasks and dep not in self.existing:
                    raise ValidationError(f"task {task.name!r} depends on unknown task {dep!r}")
        return topological_order(self._tasks)


def topological_order(tasks: Mapping[str, Task]) -> tuple[Task, ...]:
    """Kahn's order of ``tasks`` (deps outside the mapping are taken as already there)."""
    waiting = {name: sum(1 for d in t.deps if d in tasks) for name, t in tasks.items()}
    dependents: dict[str, list[str]] = {}
    for task in tasks.values():
        for dep in task.deps:
            if dep in tasks:
                dependents.setdefault(dep, []).append(task.name)
    ready = [name for name, n in waiting.items() if n == 0]
    order: list[Task] = []
    while ready:
        name = ready.pop(0)
        order.append(tasks[name])
        for child in dependents.get(name, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(order) != len(tasks):
        stuck = sorted(name for name, n in waiting.items() if n > 0)
        raise ValidationError(f"workflow has a cycle among tasks {stuck}")
    return tuple(order)


@dataclass(frozen=True, slots=True)
class WorkflowItem:
    """One task as an ``insert_many`` item: the args and the options with our metadata."""

    task: str
    args: Any
    opts: InsertOpts


def task_metadata(workflow_id: str, workflow_name: str, task: Task) -> dict[str, Any]:
    meta: dict[str, Any] = {WORKFLOW_ID: workflow_id, TASK: task.name}
    if workflow_name:
        meta[WORKFLOW_NAME] = workflow_name
    if task.deps:
        meta[DEPS] = list(task.deps)
    if task.ignore_cancelled_deps:
        meta[IGNORE_CANCELLED_DEPS] = True
    if task.ignore_discarded_deps:
        meta[IGNORE_DISCARDED_DEPS] = True
    return meta


def _user_metadata(task: Task) -> dict[str, Any]:
    import json

    raw = task.opts.metadata if task.opts is not None else None
    if raw is None:
        return {}
    value = json.loads(bytes(raw)) if isinstance(raw, bytes | bytearray) else dict(raw)
    if not isinstance(value, dict):
        raise ValidationError(f"task {task.name!r}: metadata must be a JSON object")
    ours = sorted(k for k in value if isinstance(k, str) and k.startswith(PREFIX))
    if ours:
        raise ValidationError(f"task {task.name!r}: metadata keys {ours} are reserved for workflows")
    return value


def workflow_items(wf: Workflow, workflow_id: str) -> tuple[WorkflowItem, ...]:
    """``wf``'s tasks (validated, deps first) as insert items: tasks with deps pending."""
    validate_workflow_id(workflow_id)
    items = []
    for task in wf.validate():
        metadata = {**_user_metadata(task), **task_metadata(workflow_id, wf.name, task)}
        base = task.opts or InsertOpts()
        opts = dataclasses.replace(base, metadata=metadata, pending=bool(task.deps))
        items.append(WorkflowItem(task.name, task.args, opts))
    return tuple(items)


# ---------------------------------------------------------------- what a task's metadata says


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """A job's workflow membership, read from its metadata."""

    workflow_id: str
    task: str
    workflow_name: str = ""
    deps: tuple[str, ...] = ()
    ignore_cancelled_deps: bool = False
    ignore_discarded_deps: bool = False


def task_info(metadata: Mapping[str, Any]) -> TaskInfo | None:
    """The workflow facts of a job's metadata; None for a job outside any workflow (or a malformed one)."""
    wid, task = metadata.get(WORKFLOW_ID), metadata.get(TASK)
    if not isinstance(wid, str) or not isinstance(task, str):
        return None
    deps = metadata.get(DEPS) or ()
    if not isinstance(deps, list | tuple) or not all(isinstance(d, str) for d in deps):
        deps = ()
    name = metadata.get(WORKFLOW_NAME)
    return TaskInfo(wid, task, name if isinstance(name, str) else "", tuple(deps),
                    metadata.get(IGNORE_CANCELLED_DEPS) is True, metadata.get(IGNORE_DISCARDED_DEPS) is True)


# ---------------------------------------------------------------- the promotion rule


@dataclass(frozen=True, slots=True)
class PendingTask:
    """A pending task and what one promotion read found of its deps.

    ``completed`` counts the deps found completed; ``cancelled`` and ``discarded``
    name the deps found in those states. A dep counted nowhere is not final yet, or
    has no row (not inserted yet by a growing workflow, or deleted): the task waits.
    """

    id: int
    workflow_id: str
    task: str
    deps: tuple[str, ...]
    completed: int = 0
    cancelled: tuple[str, ...] = ()
    discarded: tuple[str, ...] = ()
    ignore_cancelled_deps: bool = False
    ignore_discarded_deps: bool = False
    attempt: int = 0

    @classmethod
    def from_states(cls, id: int, workflow_id: str, task: str, deps: Sequence[str],
                    dep_states: Mapping[str, JobState], **flags: Any) -> PendingTask:
        """The read a promoter makes of ``dep_states`` (dep name -> state; a missing name has no row)."""
        found = [(d, dep_states[d]) for d in dict.fromkeys(deps) if d in dep_states]
        return cls(id, workflow_id, task, tuple(deps),
                   completed=sum(1 for _, s in found if s is JobState.COMPLETED),
                   cancelled=tuple(d for d, s in found if s is JobState.CANCELLED),
                   discarded=tuple(d for d, s in found if s is JobState.DISCARDED), **flags)


@dataclass(frozen=True, slots=True)
class Promote:
    id: int


@dataclass(frozen=True, slots=True)
class CancelDependent:
    id: int
    workflow_id: str
    reason: str
    attempt: int = 0


Decision = Promote | CancelDependent | None


def decide(task: PendingTask) -> Decision:
    """What ``task`` becomes: ``Promote`` once every dep is final in a state it accepts
    (completed, or cancelled/discarded with the matching ``ignore_*_deps``),
    ``CancelDependent`` as soon as one dep ended in a state it does not accept, else
    None (it waits)."""
    unacceptable = []
    if not task.ignore_cancelled_deps:
        unacceptable += [f"{dep!r} was cancelled" for dep in task.cancelled]
    if not task.ignore_discarded_deps:
        unacceptable += [f"{dep!r} was discarded" for dep in task.discarded]
    if unacceptable:
        return CancelDependent(task.id, task.workflow_id,
                               "workflow dependency " + ", ".join(sorted(unacceptable)), task.attempt)
    accepted = task.completed + len(task.cancelled) + len(task.discarded)
    if accepted < len(set(task.deps)):
        return None
    return Promote(task.id)


def cancel_error(reason: str, now: datetime, attempt: int = 0) -> bytes:
    """The ``errors[]`` element a cancelled dependent gets."""
    return encode_attempt_error(now, attempt, reason)


# ---------------------------------------------------------------- waits


def is_failure(state: JobState) -> bool:
    return state in (JobState.CANCELLED, JobState.DISCARDED)


def wait_outcome(job: JobRow) -> JobRow | WorkflowTaskFailedError | None:
    """What a wait for ``job`` answers now: the row once completed, an error once failed, None meanwhile."""
    if job.state is JobState.COMPLETED:
        return job
    if is_failure(job.state):
        last = job.errors[-1].error if job.errors else ""
        detail = f": {last}" if last else ""
        return WorkflowTaskFailedError(f"job {job.id} ({job.kind}) was {job.state.value}{detail}", job)
    return None


def workflow_wait_outcome(
    jobs: Sequence[JobRow], workflow_id: str | None = None,
) -> tuple[JobRow, ...] | WorkflowTaskFailedError | JobNotFoundError | None:
    """A wait for a whole workflow: its rows once all final with none failed, an error once all
    are final and some failed, None while any is not final. No rows at all: a JobNotFoundError
    naming ``workflow_id`` when it is given (a wait on a workflow that does not exist), else None."""
    if not jobs:
        return None if workflow_id is None else JobNotFoundError(f"workflow {workflow_id} has no tasks")
    if any(not j.state.finalized for j in jobs):
        return None
    failed = [j for j in jobs if is_failure(j.state)]
    if failed:
        names = ", ".join(f"{task_name(j)!r} {j.state.value}" for j in failed[:5])
        more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
        return WorkflowTaskFailedError(f"workflow tasks failed: {names}{more}", failed[0], failed)
    return tuple(jobs)


def task_name(job: JobRow) -> str:
    info = task_info(job.metadata)
    return info.task if info is not None else str(job.id)


# ---------------------------------------------------------------- what a running task reads of its workflow


def tasks_by_name(rows: Iterable[JobRow]) -> dict[str, JobRow]:
    """A workflow's rows by task name (``ctx.workflow.tasks()``); a row outside any workflow is left out."""
    return {info.task: row for row in rows if (info := task_info(row.metadata)) is not None}


def task_output(workflow_id: str, task: str, tasks: Mapping[str, JobRow]) -> Any:
    """The output ``task`` recorded (None when it recorded none), read from ``tasks`` (by name).

    ``JobNotFoundError`` when the workflow has no such task, ``WorkflowTaskFailedError`` when it
    ended discarded or cancelled, ``ValidationError`` while it is not final.
    """
    job = tasks.get(task)
    if job is None:
        raise JobNotFoundError(f"workflow {workflow_id} has no task {task!r}")
    outcome = wait_outcome(job)
    if isinstance(outcome, WorkflowTaskFailedError):
        raise outcome
    if outcome is None:
        raise ValidationError(f"task {task_name(job)!r} has not completed (it is {job.state.value})")
    return job.metadata.get(OUTPUT)


def completed_outputs(names: Iterable[str], tasks: Mapping[str, JobRow]) -> dict[str, Any]:
    """The outputs of the tasks ``names`` that completed, by name (a fan-in's inputs): a dep that
    ended cancelled or discarded (accepted by ``ignore_*_deps``), or has no row, is left out."""
    return {name: job.metadata.get(OUTPUT) for name in names
            if (job := tasks.get(name)) is not None and job.state is JobState.COMPLETED}


# ---------------------------------------------------------------- waiting back-off


@dataclass(slots=True)
class Backoff:
    """The re-check schedule of a wait with nothing to wake it: starts at ``first``, doubles up to ``cap``."""

    first: float = 0.01
    cap: float = 1.0
    _next: float = 0.0

    def next(self) -> float:
        self._next = self.first if self._next == 0 else min(self._next * 2, self.cap)
        return self._next

    def reset(self) -> None:
        self._next = 0.0


# ---------------------------------------------------------------- a workflow's summary


@dataclass(frozen=True, slots=True)
class WorkflowSummary:
    """One workflow as ``list_workflows`` shows it: counts of its tasks by state."""

    id: str
    name: str
    counts: Mapping[JobState, int]
    created_at: datetime | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def state(self) -> str:
        """``running`` while any task is not final, else ``failed`` if one failed, else ``completed``."""
        if any(not s.finalized for s, n in self.counts.items() if n):
            return "running"
        if any(is_failure(s) for s, n in self.counts.items() if n):
            return "failed"
        return "completed"


# ---------------------------------------------------------------- what insert_workflow returns


@dataclass(frozen=True, slots=True)
class WorkflowInsertResult:
    """A workflow as inserted: its id and name, and each task's ``InsertResult`` by task name."""

    id: str
    name: str
    tasks: Mapping[str, Any]  # task name -> river_protocol.intents.InsertResult

    def job(self, task: str) -> JobRow:
        """The inserted row of ``task``."""
        try:
            return self.tasks[task].job  # type: ignore[no-any-return]
        except KeyError:
            raise ValidationError(f"workflow {self.id} has no task {task!r}") from None


# ---------------------------------------------------------------- management


WORKFLOW_CANCELLED = "workflow cancelled"


def cancel_workflow_intent(workflow_id: str, now: datetime) -> Any:
    """Cancel every unfinished task of ``workflow_id`` (``CancelWorkflow``): queued ones at once
    with ``WORKFLOW_CANCELLED`` in ``errors``, running ones through River's remote cancel."""
    from river_protocol.intents import CancelWorkflow
    from river_protocol.outcomes import cancel_attempted_at_json

    return CancelWorkflow(workflow_id=validate_workflow_id(workflow_id),
                          cancel_attempted_at=cancel_attempted_at_json(now),
                          error=encode_attempt_error(now, 0, WORKFLOW_CANCELLED), now=now)


def retry_workflow_intent(workflow_id: str, now: datetime) -> Any:
    """Retry the failed part of ``workflow_id`` (``RetryWorkflow``)."""
    from river_protocol.intents import RetryWorkflow

    return RetryWorkflow(workflow_id=validate_workflow_id(workflow_id), now=now)


def list_workflows_intent(limit: int = 100, before: datetime | None = None) -> Any:
    from river_protocol.intents import ListWorkflows

    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ValidationError(f"limit must be 1 to 10000, got {limit!r}")
    if before is not None:
        if not isinstance(before, datetime):
            raise ValidationError(f"before must be a datetime, got {type(before).__name__}")
        if before.utcoffset() is None:  # compared with stored UTC times: a naive one means nothing
            raise ValidationError(f"before must carry its offset, got {before.isoformat()}")
    return ListWorkflows(limit=limit, before_created_at=before)


@dataclass(frozen=True, slots=True)
class WorkflowView:
    """One workflow with each task's row (``client.workflows.get``)."""

    id: str
    name: str
    tasks: Mapping[str, JobRow]

    @property
    def summary(self) -> WorkflowSummary:
        counts: dict[JobState, int] = {}
        for job in self.tasks.values():
            counts[job.state] = counts.get(job.state, 0) + 1
        created = min((j.created_at for j in self.tasks.values() if j.created_at is not None), default=None)
        return WorkflowSummary(self.id, self.name, counts, created)


def workflow_view(workflow_id: str, rows: Sequence[JobRow]) -> WorkflowView:
    """The view of a workflow's rows; ``JobNotFoundError`` when it has none."""
    if not rows:
        raise JobNotFoundError(f"workflow {workflow_id} not found")
    infos = [(task_info(r.metadata), r) for r in rows]
    name = next((i.workflow_name for i, _ in infos if i is not None and i.workflow_name), "")
    return WorkflowView(workflow_id, name, {(i.task if i else str(r.id)): r for i, r in infos})
