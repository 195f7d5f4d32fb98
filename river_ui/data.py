"""What the pages read, through the threaded client (``river_sync``).

Job and queue reads and every change go through the client's management API
(``client.jobs`` / ``client.queues``), so their rules stay in one place; the
overview's figures are the read-only intents of ``river_protocol.dashboard``,
run on the same client's database. Everything here blocks: the app calls it
through Starlette's thread pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from river_protocol.admin import JobPage
from river_protocol.dashboard import (
    OldestAvailable,
    PeriodicJobsSeen,
    PeriodicSeen,
    QueueOverview,
    RunningClients,
    available_queues,
    count_intent,
    histogram_intent,
    live_leader,
    periodic_seen,
    queue_overviews,
)
from river_protocol.errors import ValidationError
from river_protocol.intents import GetLeader, LeaderRow, QueueRow
from river_protocol.workflow import WorkflowSummary, WorkflowView, task_info
from river_sync import Client
from river_ui.graph import Graph, GraphTask, layout

PAGE_SIZE = 50
QUEUE_PAGE = 1000
CHART_SPAN = timedelta(hours=1)
CHART_BUCKETS = 30


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Overview:
    now: datetime
    since: datetime
    bucket: timedelta
    queues: list[QueueOverview]
    leader: LeaderRow | None
    # River's schema records no producers: the clients working the running jobs now (each
    # job's last attempted_by) are what the database can tell.
    clients: Mapping[str, int] = field(default_factory=dict)


def all_queues(client: Client) -> list[QueueRow]:
    rows: list[QueueRow] = []
    after: str | None = None
    while True:
        page = client.queues.list(limit=QUEUE_PAGE, after=after)
        rows.extend(page)
        if len(page) < QUEUE_PAGE:
            return rows
        after = page[-1].name


def overview(client: Client, *, now: datetime | None = None) -> Overview:
    """Every queue's figures, the chart's series and the leader, in one read-only connection."""
    now = now or utcnow()
    histogram = histogram_intent(now, span=CHART_SPAN, buckets=CHART_BUCKETS)
    queues = all_queues(client)
    with client.database.executor(readonly=True) as ex:
        counts = ex.run(count_intent())
        oldest = ex.run(OldestAvailable(available_queues(counts)))
        cells = ex.run(histogram)
        leader = ex.run(GetLeader())
        clients = ex.run(RunningClients())
    return Overview(
        now=now,
        since=histogram.since,
        bucket=histogram.bucket,
        queues=queue_overviews(
            queues=queues, counts=counts, oldest=oldest, cells=cells, buckets=histogram.buckets, now=now
        ),
        leader=live_leader(leader, now),
        clients=clients,
    )


def periodic(client: Client, *, now: datetime | None = None, limit: int = 500) -> list[PeriodicSeen]:
    with client.database.executor(readonly=True) as ex:
        jobs = ex.run(PeriodicJobsSeen(limit=limit))
    return periodic_seen(jobs, now or utcnow())


# ---------------------------------------------------------------- the job list


@dataclass(frozen=True, slots=True)
class JobFilter:
    """The job list's filters as the query string gives them (empty = any)."""

    state: str = ""
    queue: str = ""
    kind: str = ""
    tag: str = ""
    id: str = ""
    after: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> JobFilter:
        return cls(**{name: query.get(name, "").strip() for name in cls.__slots__})

    def query(self, **changes: str) -> dict[str, str]:
        """The non-empty filters (with ``changes``) as query parameters."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values.update(changes)
        return {k: v for k, v in values.items() if v}


def list_jobs(client: Client, flt: JobFilter, *, limit: int = PAGE_SIZE) -> JobPage:
    """One page, newest first, by the admin API's keyset cursor (never an OFFSET)."""
    ids = None
    if flt.id:
        try:
            ids = [int(part) for part in flt.id.replace(",", " ").split()]
        except ValueError:
            raise ValidationError(f"job id must be a number (or numbers), got {flt.id!r}") from None
    return client.jobs.list(
        states=[flt.state] if flt.state else None,
        queues=[flt.queue] if flt.queue else None,
        kinds=[flt.kind] if flt.kind else None,
        tags_any=[flt.tag] if flt.tag else None,
        ids=ids,
        order_by="id",
        descending=True,
        limit=limit,
        after=flt.after or None,
    )


# ---------------------------------------------------------------- workflows and flow control


def workflow_graph(view: WorkflowView) -> Graph:
    """The workflow's tasks laid out as a graph (deps from each task's metadata)."""
    tasks = []
    for name, job in view.tasks.items():
        info = task_info(job.metadata)
        tasks.append(GraphTask(name, info.deps if info else (), job.state.value, job.id))
    return layout(tasks)


def list_workflows(client: Client, before: str, *, limit: int = PAGE_SIZE) -> list[WorkflowSummary]:
    """One page of workflows, newest first; ``before`` is the last ``created_at`` of the previous page."""
    moment = None
    if before:
        try:
            moment = datetime.fromisoformat(before)
        except ValueError:
            raise ValidationError(f"before must be an ISO 8601 time, got {before!r}") from None
    return client.workflows.list(limit=limit, before=moment)
