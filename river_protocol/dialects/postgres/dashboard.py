"""Postgres plans for the dashboard's reads (``river_protocol.dashboard``), each on one of
River's indexes so that a million-row ``river_job`` stays cheap to look at."""

from __future__ import annotations

import json
from typing import Any

from river_protocol.dashboard import (
    HISTOGRAM_PARTS,
    CountJobsByQueue,
    FinishedHistogram,
    HistogramCell,
    OldestAvailable,
    PeriodicJobsSeen,
    QueueStateCount,
    RunningClients,
    histogram_cells,
)
from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.postgres.fragments import JOB_COLUMNS, binder, job_rows
from river_protocol.dialects.rows import _utc
from river_protocol.intents import Intent, Statement
from river_protocol.job import JobRow
from river_protocol.metadata_keys import PERIODIC
from river_protocol.states import JobState

# River's job priorities are 1 to 4 (the table's priority_in_range check).
PRIORITIES = (1, 2, 3, 4)


def _count_jobs_by_queue(d: Any, intent: CountJobsByQueue) -> Plan[tuple[QueueStateCount, ...]]:
    # The (state, queue) pairs holding jobs, found by skipping through the prioritized fetching
    # index one pair at a time (a loose index scan: a few probes, not a read of every row); each
    # pair is then counted up to one past the limit, an index range of at most that many entries.
    b = binder()
    p = d.prefix
    sql = f"""
        WITH RECURSIVE pairs(state, queue) AS (
            (SELECT state, queue FROM {p}river_job ORDER BY state, queue LIMIT 1)
            UNION ALL
            SELECT n.state, n.queue FROM pairs CROSS JOIN LATERAL (
                SELECT j.state, j.queue FROM {p}river_job j
                WHERE (j.state, j.queue) > (pairs.state, pairs.queue)
                ORDER BY j.state, j.queue LIMIT 1
            ) n
        )
        SELECT pairs.queue, pairs.state::text, (
            SELECT count(*) FROM (
                SELECT 1 FROM {p}river_job j WHERE j.state = pairs.state AND j.queue = pairs.queue
                LIMIT {b.p(intent.exact_up_to + 1)}::bigint
            ) capped
        ) FROM pairs
    """
    rows = yield Statement(sql, tuple(b.params))
    out = []
    for queue, state, count in rows:
        if count <= intent.exact_up_to:
            out.append(QueueStateCount(str(queue), JobState(state), int(count)))
            continue
        # Too many to count on every refresh: the planner's estimate from the table's statistics.
        e = binder()
        plan = yield Statement(
            f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {p}river_job"
            f" WHERE state = {e.p(state)}::{p}river_job_state AND queue = {e.p(queue)}::text",
            tuple(e.params),
        )
        estimate = _plan_rows(plan)
        floor = estimate < int(count)  # statistics older than the rows: all we know is the floor
        out.append(QueueStateCount(str(queue), JobState(state), max(estimate, int(count)), True, floor))
    return tuple(out)


def _plan_rows(rows: list[tuple[Any, ...]]) -> int:
    document = rows[0][0]
    if isinstance(document, str):
        document = json.loads(document)
    return int(document[0]["Plan"]["Plan Rows"])


def _oldest_available(d: Any, intent: OldestAvailable) -> Plan[dict[str, Any]]:
    if not intent.queues:
        return {}
    # One probe of the fetching index per (queue, priority): the head of each priority's line.
    b = binder()
    p = d.prefix
    sql = f"""
        SELECT q.queue, min(x.scheduled_at)
        FROM unnest({b.p(list(intent.queues))}::text[]) AS q(queue)
        CROSS JOIN unnest({b.p(list(PRIORITIES))}::smallint[]) AS pr(priority)
        CROSS JOIN LATERAL (
            SELECT j.scheduled_at FROM {p}river_job j
            WHERE j.state = 'available' AND j.queue = q.queue AND j.priority = pr.priority
            ORDER BY j.scheduled_at LIMIT 1
        ) x
        GROUP BY q.queue
    """
    rows = yield Statement(sql, tuple(b.params))
    return {str(r[0]): _utc(r[1]) for r in rows}


def _finished_histogram(d: Any, intent: FinishedHistogram) -> Plan[tuple[HistogramCell, ...]]:
    b = binder()
    p = d.prefix
    seconds = intent.bucket.total_seconds()
    until = intent.since + intent.bucket * intent.buckets

    def part(column: str, states: tuple[JobState, ...]) -> str:
        return f"""
            SELECT queue, state::text,
                floor(extract(epoch FROM ({column} - {b.p(intent.since)}::timestamptz))
                      / {b.p(seconds)}::float8)::int,
                count(*)
            FROM {p}river_job
            WHERE state = ANY({b.p([s.value for s in states])}::{p}river_job_state[])
              AND {column} >= {b.p(intent.since)}::timestamptz AND {column} < {b.p(until)}::timestamptz
            GROUP BY 1, 2, 3
        """

    sql = " UNION ALL ".join(part(column, states) for column, states in HISTOGRAM_PARTS)
    return histogram_cells((yield Statement(sql, tuple(b.params))))


def _running_clients(d: Any, intent: RunningClients) -> Plan[dict[str, int]]:
    # The running jobs through the fetching index (state leads it), at most ``limit`` of them.
    b = binder()
    sql = f"""
        SELECT client, count(*) FROM (
            SELECT attempted_by[array_length(attempted_by, 1)] AS client FROM {d.prefix}river_job
            WHERE state = 'running' LIMIT {b.p(intent.limit)}::bigint
        ) running WHERE client IS NOT NULL GROUP BY client
    """
    rows = yield Statement(sql, tuple(b.params))
    return {str(r[0]): int(r[1]) for r in rows}


def _periodic_jobs_seen(d: Any, intent: PeriodicJobsSeen) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        SELECT {JOB_COLUMNS} FROM {d.prefix}river_job
        WHERE metadata @> {b.p(json.dumps({PERIODIC: True}))}::jsonb
        ORDER BY id DESC LIMIT {b.p(intent.limit)}::bigint
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


PLANNERS: dict[type[Intent], Planner] = {
    CountJobsByQueue: _count_jobs_by_queue,
    OldestAvailable: _oldest_available,
    FinishedHistogram: _finished_histogram,
    PeriodicJobsSeen: _periodic_jobs_seen,
    RunningClients: _running_clients,
}
