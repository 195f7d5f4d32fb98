"""SQLite plans for the dashboard's reads (``river_protocol.dashboard``). SQLite counts exactly:
an embedded database's tables are small, and its covering index makes the count one pass."""

from __future__ import annotations

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
from river_protocol.dialects.rows import _utc
from river_protocol.dialects.sqlite.fragments import JOB_COLUMNS, binder, job_rows, json_list, sqlite_time
from river_protocol.intents import Intent, Statement
from river_protocol.job import JobRow
from river_protocol.metadata_keys import PERIODIC
from river_protocol.states import JobState


def _count_jobs_by_queue(d: Any, intent: CountJobsByQueue) -> Plan[tuple[QueueStateCount, ...]]:
    rows = yield Statement(f"SELECT queue, state, count(*) FROM {d.prefix}river_job GROUP BY state, queue")
    return tuple(QueueStateCount(str(r[0]), JobState(r[1]), int(r[2])) for r in rows)


def _oldest_available(d: Any, intent: OldestAvailable) -> Plan[dict[str, Any]]:
    if not intent.queues:
        return {}
    b = binder()
    sql = f"""
        SELECT queue, min(scheduled_at) FROM {d.prefix}river_job
        WHERE state = 'available' AND queue IN (SELECT value FROM json_each({b.p(json_list(intent.queues))}))
        GROUP BY queue
    """
    rows = yield Statement(sql, tuple(b.params))
    return {str(r[0]): _utc(r[1]) for r in rows}


def _finished_histogram(d: Any, intent: FinishedHistogram) -> Plan[tuple[HistogramCell, ...]]:
    b = binder()
    seconds = intent.bucket.total_seconds()
    since = sqlite_time(intent.since)
    until = sqlite_time(intent.since + intent.bucket * intent.buckets)

    def part(column: str, states: tuple[JobState, ...]) -> str:
        # Stored times are canonical text, so the range compares as text (the index's order).
        return f"""
            SELECT queue, state,
                CAST((julianday({column}) - julianday({b.p(since)})) * 86400.0 / {b.p(seconds)} AS INTEGER),
                count(*)
            FROM {d.prefix}river_job
            WHERE state IN (SELECT value FROM json_each({b.p(json_list(s.value for s in states))}))
              AND {column} >= {b.p(since)} AND {column} < {b.p(until)}
            GROUP BY 1, 2, 3
        """

    sql = " UNION ALL ".join(part(column, states) for column, states in HISTOGRAM_PARTS)
    return histogram_cells((yield Statement(sql, tuple(b.params))))


def _running_clients(d: Any, intent: RunningClients) -> Plan[dict[str, int]]:
    b = binder()
    sql = f"""
        SELECT client, count(*) FROM (
            SELECT json_extract(attempted_by, '$[#-1]') AS client FROM {d.prefix}river_job
            WHERE state = 'running' LIMIT {b.p(intent.limit)}
        ) WHERE client IS NOT NULL GROUP BY client
    """
    rows = yield Statement(sql, tuple(b.params))
    return {str(r[0]): int(r[1]) for r in rows}


def _periodic_jobs_seen(d: Any, intent: PeriodicJobsSeen) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        SELECT {JOB_COLUMNS} FROM {d.prefix}river_job
        WHERE json_extract(metadata, '$.{PERIODIC}') = 1
        ORDER BY id DESC LIMIT {b.p(intent.limit)}
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


PLANNERS: dict[type[Intent], Planner] = {
    CountJobsByQueue: _count_jobs_by_queue,
    OldestAvailable: _oldest_available,
    FinishedHistogram: _finished_histogram,
    PeriodicJobsSeen: _periodic_jobs_seen,
    RunningClients: _running_clients,
}
