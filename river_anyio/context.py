"""What a worker receives besides its args: ``WorkContext`` and its cancellation token.

Blocking (``def``) workers run in a thread and are cooperative only: Python
threads can't be interrupted, so the client *sets* the token (job timeout,
remote cancel, client stop) and the worker checks it (``ctx.cancelled``,
``ctx.token.wait(seconds)``, ``ctx.token.raise_if_cancelled()``). A worker that
ignores its token keeps its thread and its queue slot until it returns. On the
async clients, client calls from that thread go through
``anyio.from_thread.run`` (or ``trio.from_thread.run`` under trio).

Async workers (``async def``, async clients only) run in the client's
long-lived job tasks, inside a cancel scope the run's token holds while it
runs. The token cancels that scope on the job's timeout, on a remote cancel and
on a hard stop, so a worker is interrupted at its next checkpoint; the token
records why (``ctx.cancel_cause``) and the client maps the interruption to the
outcome a worker that raised ``WorkCancelled`` gets. A worker that catches the
cancellation (``trio.Cancelled``, ``asyncio.CancelledError``) and returns
normally completes its job.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from river_anyio.runner import utcnow
from river_db.resumable import UNSET, Step, positional_count
from river_db.work_context import WorkContextBase
from river_protocol.errors import ValidationError
from river_protocol.intents import ListWorkflowTasks, SetStateIfRunning
from river_protocol.job import JobRow
from river_protocol.work import CancelCause, WorkCancelled, complete_in_tx_update
from river_protocol.workflow import (
    TaskInfo,
    Workflow,
    completed_outputs,
    task_info,
    task_output,
    tasks_by_name,
)

if TYPE_CHECKING:
    from river_anyio.client import Client

# One lock for every token rather than one per token (per job): it is held only to read or set
# a token's cause and event, never across a wait or a call out, so tokens barely contend for it.
_TOKEN_LOCK = threading.Lock()

if True:  # ASYNC  # noqa: SIM108 (one line each side)
    _TOKEN_SLOTS = ("_event", "cause", "scope")
else:
    _TOKEN_SLOTS = ("_event", "cause")


class CancellationToken:
    """A cancellation flag that remembers why it was set (the first cause wins).

    The ``threading.Event`` behind ``wait()`` is made on first use: most jobs never
    wait on their token, and an Event (a Condition and two locks) per job showed up
    in the burn-down profile. On the async clients it also cancels the run's scope.
    """

    __slots__ = _TOKEN_SLOTS

    def __init__(self) -> None:
        self._event: threading.Event | None = None
        self.cause: CancelCause | None = None
        if True:  # ASYNC
            self.scope: Any = None  # the run's cancel scope (trio's or AnyIO's), while it runs

    def cancel(self, cause: CancelCause) -> bool:
        """Set the token; False when it was already set (the earlier cause is kept).

        An async client calls it from its event loop's thread.
        """
        with _TOKEN_LOCK:
            if self.cause is not None:
                return False
            self.cause = cause
            event = self._event
        if event is not None:
            event.set()
        if True:  # ASYNC
            if self.scope is not None:
                self.scope.cancel()
        return True

    def is_set(self) -> bool:
        return self.cause is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, waking early when cancelled; True if cancelled.

        Blocks its thread: for blocking workers.
        """
        with _TOKEN_LOCK:
            if self.cause is not None:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise ``WorkCancelled`` when set: the way to give up that records the right outcome."""
        cause = self.cause
        if cause is not None:
            raise WorkCancelled(cause)


if True:  # ASYNC
    class AsyncStep(Step):
        """A resumable step for async code.

        ``async with ctx.step("x") as step`` or ``await ctx.step("x").run(fn)``.
        """

        async def __aenter__(self) -> AsyncStep:
            self.__enter__()
            return self

        async def __aexit__(
            self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any
        ) -> None:
            self.__exit__(typ, exc, tb)

        async def run(self, fn: Callable[..., Awaitable[Any] | Any]) -> Any:
            """Run ``fn`` (async or sync; optionally taking the cursor) unless the step is skipped."""
            async with self as step:
                if step.skip:
                    return None
                takes_cursor = positional_count(fn) >= 1
                result = fn(step.cursor) if takes_cursor else fn()
                if inspect.isawaitable(result):
                    result = await result
                return result


class TaskWorkflow:
    """``ctx.workflow``: the workflow of the running task, its deps' outputs, and a way to grow it."""

    def __init__(self, ctx: WorkContext, info: TaskInfo) -> None:
        self._ctx = ctx
        self.info = info

    @property
    def id(self) -> str:
        return self.info.workflow_id

    @property
    def name(self) -> str:
        return self.info.workflow_name

    @property
    def task(self) -> str:
        """This task's name."""
        return self.info.task

    @property
    def deps(self) -> tuple[str, ...]:
        return self.info.deps

    async def tasks(self, names: tuple[str, ...] | None = None) -> dict[str, JobRow]:
        """The workflow's rows by task name (only ``names`` when given)."""
        db = self._ctx.client.database
        return tasks_by_name(await db.run(ListWorkflowTasks(self.id, names), readonly=True))

    async def output(self, task: str) -> Any:
        """The output ``task`` recorded (``ctx.record_output``; None when it recorded none).

        Raises ``JobNotFoundError`` for a task the workflow does not have, and
        ``WorkflowTaskFailedError`` / ``ValidationError`` when it did not complete.
        """
        return task_output(self.id, task, await self.tasks((task,)))

    async def outputs(self, tasks: tuple[str, ...] | None = None) -> dict[str, Any]:
        """Every dep's output by task name (a fan-in's inputs), or those of ``tasks``.
        A dep that ended cancelled or discarded (accepted by ``ignore_*_deps``) is left out."""
        names = self.deps if tasks is None else tuple(tasks)
        return completed_outputs(names, await self.tasks(names))

    async def extend(self) -> Workflow:
        """A builder for tasks to add to this workflow (``client.insert_workflow`` it, with
        ``tx=`` if it must commit with something else): new tasks may depend on tasks
        already in the workflow, by name, this one included."""
        return Workflow(self.name, id=self.id, existing=await self.tasks())


class WorkContext(WorkContextBase):
    """Per-run context: the job row, decoded args, the client and the cancellation token.

    Resumable steps: ``step``, ``cursor``, ``set_cursor`` and ``checkpoint(tx)``
    (see ``river_db.resumable``). On the async clients ``step`` is an ``AsyncStep``,
    also usable with ``with`` and as a decorator of a sync function.
    """

    client: Client
    token: CancellationToken

    if True:  # ASYNC
        def step(self, name: str) -> AsyncStep:
            return AsyncStep(self, name)

    @property
    def workflow(self) -> TaskWorkflow:
        """The workflow this job is a task of; ``ValidationError`` for a job outside any workflow."""
        info = task_info(self.job.metadata)
        if info is None:
            raise ValidationError(f"job {self.job.id} ({self.job.kind}) is not a workflow task")
        return TaskWorkflow(self, info)

    async def complete_in(self, tx: Any) -> JobRow | None:
        """Mark this job completed inside the caller's transaction ``tx`` (docs/protocol.md §7.5).

        ``tx`` is a psycopg connection, SQLAlchemy Connection/Session or sqlite3
        connection with an open transaction; the job is completed only if it
        commits. Returns the row as updated (None if the job no longer exists).
        """
        from river_anyio.caller_tx import executor_for_caller_tx

        update = complete_in_tx_update(self.job, utcnow(), self.metadata_updates)
        executor = await executor_for_caller_tx(tx, schema=self.client.schema)
        rows = await executor.run(SetStateIfRunning(updates=(update,)))
        self.completed_in_tx = True
        return rows[0] if rows else None

    async def checkpoint(self, tx: Any, *, cursor: Any = UNSET) -> JobRow | None:
        """Store the current step (and cursor) inside ``tx`` now; returns the updated row."""
        from river_anyio.caller_tx import executor_for_caller_tx

        intent, updates = self._checkpoint_intent(cursor)
        executor = await executor_for_caller_tx(tx, schema=self.client.schema)
        row: JobRow = await executor.run(intent)
        self.metadata_updates.update(updates)
        return row
