"""SQLite plans for the maintenance services: scheduler, rescuer, cleaners and
reindexer (docs/protocol.md §11).
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import finalized_horizons, index_identifier, json_text
from river_protocol.dialects.rows import job_row_from_sqlite
from river_protocol.dialects.sqlite.fragments import (
    ERRORS_ARRAY,
    JOB_COLUMNS,
    LIMIT_PARAM,
    binder,
    in_bitmask,
    job_rows,
    json_list,
    limit_param,
    sqlite_time,
)
from river_protocol.golang.gotime import format_sqlite_time
from river_protocol.intents import (
    DeleteExpiredQueues,
    DeleteFinalizedBefore,
    DeleteNotificationsBefore,
    DropIndex,
    GetStuckJobs,
    IndexExists,
    Intent,
    ListReindexArtifacts,
    Reindex,
    RescueJobs,
    ScheduledJob,
    ScheduleJobs,
    Statement,
)
from river_protocol.job import JobRow
from river_protocol.states import JobState


def _schedule_jobs(d: Any, intent: ScheduleJobs) -> Plan[list[ScheduledJob]]:
    now = format_sqlite_time(intent.now)
    eligible = yield Statement(
        f"""
        SELECT id, unique_key IS NOT NULL AND unique_states IS NOT NULL FROM {d.prefix}river_job
        WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= ?
        ORDER BY priority, scheduled_at, id LIMIT {LIMIT_PARAM}
        """,
        (now, intent.limit),
    )
    results: dict[int, ScheduledJob] = {}
    plain: list[int] = []
    collision = f"""EXISTS (
        SELECT 1 FROM {d.prefix}river_job o
        WHERE o.unique_key = river_job.unique_key AND o.id <> river_job.id
          AND o.unique_states IS NOT NULL AND {in_bitmask("o")})"""
    for job_id, unique in eligible:
        if not unique:
            plain.append(int(job_id))
            continue
        # One at a time, in order: a row made available here blocks later rows with its key.
        rows = yield Statement(
            f"""
            UPDATE {d.prefix}river_job
            SET state = CASE WHEN {collision} THEN 'discarded' ELSE 'available' END,
                finalized_at = CASE WHEN {collision} THEN ? ELSE finalized_at END,
                metadata = CASE WHEN {collision}
                                THEN jsonb_set(metadata, '$.unique_key_conflict', 'scheduler_discarded')
                                ELSE metadata END
            WHERE id = ?
            RETURNING {JOB_COLUMNS}
            """,
            (now, job_id),
        )
        job = job_row_from_sqlite(rows[0])
        results[job.id] = ScheduledJob(job, conflict_discarded=job.state is JobState.DISCARDED)
    if plain:
        rows = yield Statement(
            f"UPDATE {d.prefix}river_job SET state = 'available'"
            f" WHERE id IN (SELECT value FROM json_each(?)) RETURNING {JOB_COLUMNS}",
            (json_list(plain),),
        )
        for job in job_rows(rows):
            results[job.id] = ScheduledJob(job, conflict_discarded=False)
    return [results[int(r[0])] for r in eligible if int(r[0]) in results]


def _get_stuck_jobs(d: Any, intent: GetStuckJobs) -> Plan[list[JobRow]]:
    sql = f"""
        SELECT {JOB_COLUMNS} FROM {d.prefix}river_job
        WHERE state = 'running' AND id > ? AND attempted_at < ?
        ORDER BY id LIMIT {LIMIT_PARAM}
    """
    params = (intent.after_id, format_sqlite_time(intent.stuck_horizon), intent.limit)
    return job_rows((yield Statement(sql, params)))


def _rescue_jobs(d: Any, intent: RescueJobs) -> Plan[None]:
    count = "metadata ->> '$.\"river:rescue_count\"'"
    sql = f"""
        UPDATE {d.prefix}river_job
        SET errors = jsonb_insert({ERRORS_ARRAY}, '$[#]', json(?)),
            finalized_at = ?,
            scheduled_at = ?,
            state = ?,
            metadata = jsonb_patch(
                jsonb_set(metadata, '$."river:rescue_count"',
                          coalesce(CASE json_type(metadata, '$."river:rescue_count"')
                                       WHEN 'integer' THEN {count}
                                       WHEN 'real' THEN CAST(round({count}) AS INTEGER) END, 0) + 1),
                jsonb(?))
        WHERE id = ?
    """
    for u in intent.updates:
        yield Statement(
            sql,
            (
                json_text(u.error), sqlite_time(u.finalized_at), format_sqlite_time(u.scheduled_at),
                u.state.value, json_text(u.metadata_updates or b"{}"), u.id,
            ),
            fetch=False,
        )
    return None


def _delete_finalized_before(d: Any, intent: DeleteFinalizedBefore) -> Plan[int]:
    b = binder()
    clauses = [
        f"(state = '{state}' AND finalized_at < {b.p(format_sqlite_time(horizon))})"
        for state, horizon in finalized_horizons(intent)
    ]
    if not clauses:
        return 0
    where = "(" + " OR ".join(clauses) + ")"
    if intent.queues_included is not None:
        where += f" AND queue IN (SELECT value FROM json_each({b.p(json_list(intent.queues_included))}))"
    if intent.queues_excluded is not None:
        where += (
            f" AND queue NOT IN (SELECT value FROM json_each({b.p(json_list(intent.queues_excluded))}))"
        )
    sql = f"""
        DELETE FROM {d.prefix}river_job WHERE id IN (
            SELECT id FROM {d.prefix}river_job WHERE {where} ORDER BY id LIMIT {limit_param(b, intent.limit)}
        ) RETURNING 1
    """
    return len((yield Statement(sql, tuple(b.params))))


def _delete_expired_queues(d: Any, intent: DeleteExpiredQueues) -> Plan[list[str]]:
    sql = f"""
        DELETE FROM {d.prefix}river_queue WHERE name IN (
            SELECT name FROM {d.prefix}river_queue WHERE updated_at < ? ORDER BY name LIMIT {LIMIT_PARAM}
        ) RETURNING name
    """
    rows = yield Statement(sql, (format_sqlite_time(intent.updated_before), intent.limit))
    return sorted(str(r[0]) for r in rows)


def _delete_notifications_before(d: Any, intent: DeleteNotificationsBefore) -> Plan[int]:
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_notification WHERE created_at < ? RETURNING 1",
        (format_sqlite_time(intent.created_before),),
    )
    return len(rows)


def _list_reindex_artifacts(d: Any, intent: ListReindexArtifacts) -> Plan[list[str]]:
    # Plain REINDEX builds nothing on the side, so there are never leftovers.
    index_identifier(intent.index)
    return []
    yield  # pragma: no cover - makes this a generator


def _index_exists(d: Any, intent: IndexExists) -> Plan[bool]:
    rows = yield Statement(
        f"SELECT EXISTS (SELECT 1 FROM {d.prefix}sqlite_master WHERE type = 'index' AND name = ?)",
        (intent.index,),
    )
    return bool(rows[0][0])


def _reindex(d: Any, intent: Reindex) -> Plan[None]:
    yield Statement(f"REINDEX {d.prefix}{index_identifier(intent.index)}", fetch=False)
    return None


def _drop_index(d: Any, intent: DropIndex) -> Plan[None]:
    yield Statement(f"DROP INDEX IF EXISTS {d.prefix}{index_identifier(intent.index)}", fetch=False)
    return None


PLANNERS: dict[type[Intent], Planner] = {
    ScheduleJobs: _schedule_jobs,
    GetStuckJobs: _get_stuck_jobs,
    RescueJobs: _rescue_jobs,
    DeleteFinalizedBefore: _delete_finalized_before,
    DeleteExpiredQueues: _delete_expired_queues,
    DeleteNotificationsBefore: _delete_notifications_before,
    ListReindexArtifacts: _list_reindex_artifacts,
    IndexExists: _index_exists,
    Reindex: _reindex,
    DropIndex: _drop_index,
}
