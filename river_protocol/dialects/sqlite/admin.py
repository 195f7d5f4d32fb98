"""SQLite plans for job administration: list, count, get, cancel, retry, delete,
metadata updates and requeue (docs/protocol.md §14).

A single-job change that does not apply falls back to reading the row, so
callers can tell "not found" from "not changed".
"""

from __future__ import annotations

import json
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import FINALIZED_SQL, json_text, order_and_cursor
from river_protocol.dialects.rows import Binder, job_row_from_sqlite, sqlite_now
from river_protocol.dialects.sqlite.fragments import JOB_COLUMNS, binder, job_rows, json_list, limit_param
from river_protocol.errors import JobNotFoundError, ValidationError
from river_protocol.golang.gotime import format_sqlite_time
from river_protocol.intents import (
    CancelJob,
    CountJobs,
    DeleteJob,
    DeleteJobs,
    GetJob,
    GetJobs,
    Intent,
    JobListFilter,
    ListJobs,
    RequeueRunningJobs,
    RetryJob,
    Statement,
    UpdateJobMetadata,
)
from river_protocol.job import JobRow
from river_protocol.states import JobState


def _filter(b: Binder, f: JobListFilter) -> list[str]:
    def among(column: str, values: Any) -> str:
        return f"{column} IN (SELECT value FROM json_each({b.p(json_list(values))}))"

    where: list[str] = []
    if f.ids is not None:
        where.append(among("id", f.ids))
    if f.kinds is not None:
        where.append(among("kind", f.kinds))
    if f.queues is not None:
        where.append(among("queue", f.queues))
    if f.states is not None:
        where.append(among("state", [s.value for s in f.states]))
    if f.priorities is not None:
        where.append(among("priority", f.priorities))
    if f.tags_any is not None:
        where.append(f"EXISTS (SELECT 1 FROM json_each(tags) AS tag WHERE {among('tag.value', f.tags_any)})")
    if f.tags_all is not None:
        where.append(f"NOT EXISTS (SELECT 1 FROM json_each({b.p(json_list(f.tags_all))}) AS wanted "
                     "WHERE wanted.value NOT IN (SELECT value FROM json_each(tags)))")
    if f.metadata_contains is not None:
        # River's SQLite driver has no containment operator either (JobListParams.Metadata).
        raise ValidationError("a metadata containment filter is not supported on SQLite")
    if f.created_before is not None:
        where.append(f"created_at < {b.p(format_sqlite_time(f.created_before))}")
    if f.created_after is not None:
        where.append(f"created_at > {b.p(format_sqlite_time(f.created_after))}")
    if f.finalized_before is not None:
        where.append(f"finalized_at < {b.p(format_sqlite_time(f.finalized_before))}")
    return where


def _list_jobs(d: Any, intent: ListJobs) -> Plan[list[JobRow]]:
    b = binder()
    where = _filter(b, intent.filter)
    order, cursor = order_and_cursor(b, intent, lambda b, v: b.p(format_sqlite_time(v)))
    where += cursor
    sql = f"""
        SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE {" AND ".join(where) or "true"}
        ORDER BY {order} LIMIT {limit_param(b, intent.limit)}
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


def _count_jobs(d: Any, intent: CountJobs) -> Plan[dict[tuple[JobState, str, str], int]]:
    b = binder()
    where = _filter(b, intent.filter)
    sql = f"""
        SELECT state, queue, kind, count(*) FROM {d.prefix}river_job
        WHERE {" AND ".join(where) or "true"} GROUP BY 1, 2, 3
    """
    rows = yield Statement(sql, tuple(b.params))
    return {(JobState(r[0]), str(r[1]), str(r[2])): int(r[3]) for r in rows}


def _select_job(d: Any, job_id: int) -> Plan[JobRow]:
    rows = yield Statement(f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE id = ?", (job_id,))
    if not rows:
        raise JobNotFoundError(f"job {job_id} not found")
    return job_row_from_sqlite(rows[0])


def _get_job(d: Any, intent: GetJob) -> Plan[JobRow]:
    return (yield from _select_job(d, intent.id))


def _get_jobs(d: Any, intent: GetJobs) -> Plan[list[JobRow]]:
    sql = (
        f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job"
        " WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id"
    )
    return job_rows((yield Statement(sql, (json_list(intent.ids),))))


def _changed_or_current(d: Any, job_id: int, statement: Statement) -> Plan[JobRow]:
    rows = yield statement
    if rows:
        return job_row_from_sqlite(rows[0])
    return (yield from _select_job(d, job_id))


def _cancel_job(d: Any, intent: CancelJob) -> Plan[JobRow]:
    # No notification: SQLite cancels reach running jobs through the completer and rescuer (§12.4).
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
            finalized_at = CASE WHEN state = 'running' THEN finalized_at
                                ELSE {sqlite_now(b, intent.now)} END,
            metadata = jsonb_set(metadata, '$.cancel_attempted_at',
                                 json({b.p(json_text(intent.cancel_attempted_at))}))
        WHERE id = {b.p(intent.id)} AND state NOT IN {FINALIZED_SQL} AND finalized_at IS NULL
        RETURNING {JOB_COLUMNS}
    """
    return (yield from _changed_or_current(d, intent.id, Statement(sql, tuple(b.params))))


def _retry_job(d: Any, intent: RetryJob) -> Plan[JobRow]:
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = 'available',
            max_attempts = CASE WHEN attempt = max_attempts THEN max_attempts + 1 ELSE max_attempts END,
            finalized_at = NULL,
            scheduled_at = {sqlite_now(b, intent.now)}
        WHERE id = {b.p(intent.id)} AND state <> 'running'
          AND NOT (state = 'available' AND scheduled_at < {sqlite_now(b, intent.now)})
        RETURNING {JOB_COLUMNS}
    """
    return (yield from _changed_or_current(d, intent.id, Statement(sql, tuple(b.params))))


def _delete_job(d: Any, intent: DeleteJob) -> Plan[JobRow]:
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_job WHERE id = ? AND state <> 'running' RETURNING {JOB_COLUMNS}",
        (intent.id,),
    )
    if rows:
        return job_row_from_sqlite(rows[0])
    yield from _select_job(d, intent.id)
    raise ValidationError(f"job {intent.id} is running; running jobs cannot be deleted")


def _delete_jobs(d: Any, intent: DeleteJobs) -> Plan[list[JobRow]]:
    b = binder()
    where = [*_filter(b, intent.filter), "state <> 'running'"]
    sql = f"""
        DELETE FROM {d.prefix}river_job WHERE id IN (
            SELECT id FROM {d.prefix}river_job WHERE {" AND ".join(where)}
            ORDER BY id LIMIT {limit_param(b, intent.limit)}
        ) RETURNING {JOB_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(job_rows(rows), key=lambda job: job.id)


def shallow_merge_sql(b: Binder, target: str, updates: bytes) -> str:
    """``target`` with each top-level key of ``updates`` replaced, like Postgres ``||``.

    ``jsonb_patch`` would merge nested objects and drop null-valued keys, which
    is not what "set metadata key" means; each value is taken from the update
    document itself (``->`` keeps it JSON, so its text survives unchanged).
    """
    try:
        parsed = json.loads(updates)
    except ValueError as exc:
        raise ValidationError(f"metadata updates are not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValidationError(f"metadata updates must be a JSON object, got {parsed!r}")
    if not parsed:
        return target
    pairs = []
    for key in parsed:
        if '"' in key or "\\" in key:
            raise ValidationError(f"metadata key {key!r} cannot be set on SQLite (quote or backslash)")
        path = f"'$.\"{key}\"'"
        pairs.append(f"{path}, jsonb({b.p(json_text(updates))}) -> {path}")
    return f"jsonb_set({target}, {', '.join(pairs)})"


def _update_job_metadata(d: Any, intent: UpdateJobMetadata) -> Plan[JobRow]:
    b = binder()
    merged = shallow_merge_sql(b, "metadata", intent.metadata_updates)
    sql = (
        f"UPDATE {d.prefix}river_job SET metadata = {merged}"
        f" WHERE id = {b.p(intent.id)} RETURNING {JOB_COLUMNS}"
    )
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_sqlite(rows[0])


def _requeue_running_jobs(d: Any, intent: RequeueRunningJobs) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_job SET state = 'available', scheduled_at = {sqlite_now(b, intent.now)}
        WHERE state = 'running' AND attempted_at < {b.p(format_sqlite_time(intent.attempted_before))}
        RETURNING {JOB_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(job_rows(rows), key=lambda job: job.id)


PLANNERS: dict[type[Intent], Planner] = {
    GetJob: _get_job,
    GetJobs: _get_jobs,
    ListJobs: _list_jobs,
    CountJobs: _count_jobs,
    CancelJob: _cancel_job,
    RetryJob: _retry_job,
    DeleteJob: _delete_job,
    DeleteJobs: _delete_jobs,
    UpdateJobMetadata: _update_job_metadata,
    RequeueRunningJobs: _requeue_running_jobs,
}
