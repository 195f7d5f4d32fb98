"""``client.jobs``, ``client.queues`` and ``client.workflows``: River's management API.

Every rule (which intents, in which transaction, when to deliver a control
message in-process) comes from ``river_protocol.admin``; this module only runs
the intents and hands control messages to the client's own producers.

``tx=``: a caller's open transaction (see ``river_anyio.transactions``). The
change then commits or rolls back with the caller's work, and nothing is
delivered in-process (the change may still roll back): on Postgres, listeners
hear the notification on commit; poll-only and SQLite clients see a pause
within their settings poll (2 s).
"""
from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from river_anyio.executor import AsyncExecutor
from river_anyio.runner import utcnow
from river_protocol.admin import (
    JobPage,
    control_payloads,
    count_by_state,
    delete_refusal,
    found_queue,
    job_page,
    list_jobs_intent,
    list_queues_intent,
    local_cancel_payload,
    pause_intents,
    update_output_intent,
    update_queue_intents,
)
from river_protocol.admin import cancel_intent as _cancel_intent
from river_protocol.client_core import QueueConfig
from river_protocol.errors import ValidationError
from river_protocol.flow_control import QueueLimits
from river_protocol.flow_intents import QueueFlowStatus, flow_status_intent, update_limits_intent
from river_protocol.intents import (
    CountJobs,
    DeleteJob,
    GetJob,
    GetQueue,
    Intent,
    JobListFilter,
    ListWorkflowTasks,
    QueueRow,
    RetryJob,
)
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_protocol.sweeper_status import SweeperStatus, sweeper_status, sweeper_status_intents
from river_protocol.workflow import (
    WorkflowSummary,
    WorkflowView,
    cancel_workflow_intent,
    list_workflows_intent,
    retry_workflow_intent,
    validate_workflow_id,
    workflow_view,
)

if TYPE_CHECKING:
    from river_anyio.client import Client


class _Admin:
    def __init__(self, client: Client) -> None:
        self._client = client

    @asynccontextmanager
    async def _executor(self, tx: Any, *, readonly: bool = False) -> AsyncIterator[AsyncExecutor]:
        """An executor in the caller's transaction, or one transaction of our own."""
        client = self._client
        if tx is not None:
            from river_anyio.caller_tx import executor_for_caller_tx

            if True:  # ASYNC  # noqa: SIM108 (one line each side)
                expect = client.dialect_name
            else:
                expect = client.database.dialect.name
            executor = await executor_for_caller_tx(tx, schema=client.schema, expect=expect)
            yield executor
            return
        if True:  # ASYNC
            db = await client._ensure_db()
        else:
            db = client.database
        if readonly:
            async with db.executor(readonly=True) as executor:
                yield executor
        else:
            async with db.transaction() as executor:
                yield executor

    async def _run(self, intents: Sequence[Intent], tx: Any, *, readonly: bool = False) -> list[Any]:
        async with self._executor(tx, readonly=readonly) as executor:
            return [await executor.run(intent) for intent in intents]

    async def _deliver(self, payload: str, *, tx: Any) -> None:
        await self._client._deliver_control(payload, in_caller_tx=tx is not None)


class JobsAPI(_Admin):
    """Read and change jobs: ``client.jobs``."""

    async def get(self, job_id: int, *, tx: Any = None) -> JobRow:
        """The job's current row; ``JobNotFoundError`` when it doesn't exist."""
        row: JobRow = (await self._run((GetJob(job_id),), tx, readonly=True))[0]
        return row

    async def list(
        self,
        *,
        states: Iterable[JobState | str] | None = None,
        kinds: Iterable[str] | None = None,
        queues: Iterable[str] | None = None,
        ids: Iterable[int] | None = None,
        priorities: Iterable[int] | None = None,
        tags_any: Iterable[str] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        order_by: str = "id",
        descending: bool = False,
        limit: int = 100,
        after: str | None = None,
        tx: Any = None,
    ) -> JobPage:
        """One page of jobs matching every given filter; ``after`` = the previous page's ``next_cursor``."""
        intent = list_jobs_intent(
            states=states, kinds=kinds, queues=queues, ids=ids, priorities=priorities, tags_any=tags_any,
            created_after=created_after, created_before=created_before, order_by=order_by,
            descending=descending, limit=limit, after=after,
        )
        return job_page(intent, (await self._run((intent,), tx, readonly=True))[0])

    async def cancel(self, job_id: int, *, tx: Any = None) -> JobRow:
        """Cancel a job (§14.1): a queued job is cancelled at once; a running one is asked to stop.

        Its client hears about it through ``river_control`` on Postgres; this
        client's own running job is told in-process as well (any database).
        Elsewhere on SQLite the attempt runs on, and if it fails it becomes
        ``cancelled`` instead of being retried.
        """
        row: JobRow = (await self._run((_cancel_intent(job_id, utcnow()),), tx))[0]
        payload = local_cancel_payload(row)
        if payload is not None:
            await self._deliver(payload, tx=tx)
        return row

    async def retry(self, job_id: int, *, tx: Any = None) -> JobRow:
        """Make the job available now (§14.2); a running job is returned unchanged."""
        row: JobRow = (await self._run((RetryJob(job_id),), tx))[0]
        return row

    async def delete(self, job_id: int, *, tx: Any = None) -> JobRow:
        """Delete a job that isn't running; returns the deleted row (``JobRunningError`` if running)."""
        try:
            row: JobRow = (await self._run((DeleteJob(job_id),), tx))[0]
        except ValidationError as exc:
            refusal = delete_refusal(exc)
            if refusal is exc:
                raise
            raise refusal from None
        return row

    async def update(self, job_id: int, *, output: Any, tx: Any = None) -> JobRow:
        """Set the job's ``metadata.output`` (JSON-encodable, ≤ 32 MB); no state change."""
        row: JobRow = (await self._run((update_output_intent(job_id, output),), tx))[0]
        return row

    async def count_by_state(
        self, *, queues: Iterable[str] | None = None, tx: Any = None
    ) -> dict[JobState, int]:
        """Number of jobs in each state (every state present), optionally in some queues only."""
        flt = JobListFilter(queues=None if queues is None else tuple(queues))
        counts = (await self._run((CountJobs(filter=flt),), tx, readonly=True))[0]
        return count_by_state(counts)


class WorkflowsAPI(_Admin):
    """List, show, cancel and retry workflows: ``client.workflows``."""

    async def get(self, workflow_id: str, *, tx: Any = None) -> WorkflowView:
        """The workflow and each task's row; ``JobNotFoundError`` when it has no tasks."""
        intent = ListWorkflowTasks(validate_workflow_id(workflow_id))
        return workflow_view(workflow_id, (await self._run((intent,), tx, readonly=True))[0])

    async def cancel(self, workflow_id: str, *, tx: Any = None) -> list[JobRow]:
        """Cancel the workflow: its pending, available, scheduled and retryable tasks at once,
        and its running ones by River's remote cancel (as ``client.jobs.cancel``). Returns the
        rows changed."""
        rows: list[JobRow] = (await self._run((cancel_workflow_intent(workflow_id, utcnow()),), tx))[0]
        for row in rows:
            payload = local_cancel_payload(row)
            if payload is not None:
                await self._deliver(payload, tx=tx)
        if tx is None:
            self._client._waits.finished(rows)
        return rows

    async def retry(self, workflow_id: str, *, tx: Any = None) -> list[JobRow]:
        """Retry the failed part: discarded and cancelled tasks that ran become available,
        tasks cancelled because of a dep go back to pending (promoted as their deps
        complete). Returns the rows changed."""
        rows: list[JobRow] = (await self._run((retry_workflow_intent(workflow_id, utcnow()),), tx))[0]
        if tx is None:
            self._client._poke({r.queue for r in rows if r.state is JobState.AVAILABLE})
            self._client._grown_ids((workflow_id,))
        return rows

    async def sweeper(self, *, tx: Any = None) -> SweeperStatus:
        """Which client sweeps workflows now: the workflow sweeper's lease (holder, taken at,
        lapses at, by the database's clock) and River's leader; ``line_applied`` is False
        without the python migration line. ``describe()`` says it in one line."""
        lease, leader = await self._run(sweeper_status_intents(), tx, readonly=True)
        return sweeper_status(lease, leader)

    # Last: a method named ``list`` hides the builtin from the annotations after it.
    async def list(self, *, limit: int = 100, before: datetime | None = None,
                   tx: Any = None) -> list[WorkflowSummary]:
        """Workflows, newest first, with their tasks counted by state; ``before``: the
        ``created_at`` of the last one of the previous page."""
        rows: list[WorkflowSummary] = (await self._run((list_workflows_intent(limit, before),), tx,
                                                      readonly=True))[0]
        return rows


class QueuesAPI(_Admin):
    """Queue records and the queues this client works: ``client.queues``."""

    async def get(self, name: str, *, tx: Any = None) -> QueueRow:
        row: QueueRow | None = (await self._run((GetQueue(name),), tx, readonly=True))[0]
        return found_queue(name, row)

    async def list(self, *, limit: int = 100, after: str | None = None, tx: Any = None) -> list[QueueRow]:
        """Queue records ordered by name; ``after`` = the last name of the previous page."""

        rows: list[QueueRow] = (await self._run((list_queues_intent(limit, after),), tx, readonly=True))[0]
        return rows

    async def pause(self, name: str = "*", *, tx: Any = None) -> int:
        """Stop every client fetching from ``name`` (``*`` = all queues); returns rows changed."""
        return await self._pause_or_resume(name, tx, pause=True)

    async def resume(self, name: str = "*", *, tx: Any = None) -> int:
        """Let clients fetch from ``name`` (``*`` = all queues) again; returns rows changed."""
        return await self._pause_or_resume(name, tx, pause=False)

    async def _pause_or_resume(self, name: str, tx: Any, *, pause: bool) -> int:
        intents = pause_intents(name, pause=pause)
        changed: int = (await self._run(intents, tx))[0]
        await self._announce(intents, tx)
        return changed

    async def update(self, name: str, *, metadata: Any = None, tx: Any = None) -> QueueRow:
        """Replace the queue's metadata (a mapping or JSON object text) and tell its producers."""
        intents = update_queue_intents(name, metadata)
        row: QueueRow = (await self._run(intents, tx))[0]
        await self._announce(intents, tx)
        return row

    async def _announce(self, intents: Sequence[Intent], tx: Any) -> None:
        for payload in control_payloads(intents):
            await self._deliver(payload, tx=tx)

    async def set_limits(self, name: str, limits: QueueLimits, *, tx: Any = None) -> None:
        """Replace queue ``name``'s flow-control limits (docs/guides/flow-control.md): every
        client's next claim of the queue obeys them; its partitions stay as configured. A client
        that starts later writes its own configured limits again."""
        await self._run((update_limits_intent(name, limits),), tx)

    async def flow_status(self, *, top: int = 5, tx: Any = None) -> builtins.list[QueueFlowStatus]:
        """Every queue with flow-control limits: the limits, its running jobs and its ``top``
        busiest partitions with their running counts (``[]`` without the python line)."""
        intent = flow_status_intent(top)
        rows: builtins.list[QueueFlowStatus] = (await self._run((intent,), tx, readonly=True))[0]
        return rows

    def worked(self) -> dict[str, QueueConfig]:
        """The queues this client works (configured, plus runtime additions, minus removals)."""
        return dict(self._client._core.queues)

    def add(self, name: str, config: QueueConfig | None = None) -> None:
        """Work another queue (no I/O); on a running client its producer starts right away."""
        self._client._add_queue(name, config or QueueConfig())

    async def remove(self, name: str, *, timeout: float | None = None) -> None:
        """Stop working ``name``: no more fetches, waits for its running jobs (up to ``timeout`` s)."""
        await self._client._remove_queue(name, timeout)
