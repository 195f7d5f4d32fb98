"""Postgres plans for job administration: list, count, get, cancel, retry, delete,
metadata updates and requeue (docs/protocol.md §14).

Single-job changes lock the row first and return it unchanged when the change
does not apply, so callers can tell "not found" from "not changed".
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import FINALIZED_SQL, json_text, order_and_cursor
from river_protocol.dialects.postgres.fragments import JOB_COLUMNS, binder, channel_sql, job_rows, now_sql
from river_protocol.dialects.rows import Binder, job_row_from_pg, pg_job_columns
from river_protocol.errors import JobNotFoundError, ValidationError
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


def _filter(d: Any, b: Binder, f: JobListFilter, alias: str = "") -> list[str]:
    q = f"{alias}." if alias else ""
    where: list[str] = []
    if f.ids is not None:
        where.append(f"{q}id = ANY({b.p(list(f.ids))}::bigint[])")
    if f.kinds is not None:
        where.append(f"{q}kind = ANY({b.p(list(f.kinds))}::text[])")
    if f.queues is not None:
        where.append(f"{q}queue = ANY({b.p(list(f.queues))}::text[])")
    if f.states is not None:
        # Compared as River's enum, not as text, so the planner can use the indexes leading with
        # state (the fetching index's (state, queue, ...), the finalized index) for a filtered list.
        where.append(f"{q}state = ANY({b.p([s.value for s in f.states])}::{d.prefix}river_job_state[])")
    if f.priorities is not None:
        where.append(f"{q}priority = ANY({b.p(list(f.priorities))}::smallint[])")
    if f.tags_any is not None:
        where.append(f"{q}tags && {b.p(list(f.tags_any))}::varchar(255)[]")
    if f.tags_all is not None:
        where.append(f"{q}tags @> {b.p(list(f.tags_all))}::varchar(255)[]")
    if f.metadata_contains is not None:
        where.append(f"{q}metadata @> {b.p(f.metadata_contains.decode())}::jsonb")
    if f.created_before is not None:
        where.append(f"{q}created_at < {b.p(f.created_before)}::timestamptz")
    if f.created_after is not None:
        where.append(f"{q}created_at > {b.p(f.created_after)}::timestamptz")
    if f.finalized_before is not None:
        where.append(f"{q}finalized_at < {b.p(f.finalized_before)}::timestamptz")
    return where


def _list_jobs(d: Any, intent: ListJobs) -> Plan[list[JobRow]]:
    b = binder()
    where = _filter(d, b, intent.filter)
    order, cursor = order_and_cursor(b, intent, lambda b, v: f"{b.p(v)}::timestamptz")
    where += cursor
    sql = f"""
        SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE {" AND ".join(where) or "true"}
        ORDER BY {order} LIMIT {b.p(intent.limit)}::bigint
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


def _count_jobs(d: Any, intent: CountJobs) -> Plan[dict[tuple[JobState, str, str], int]]:
    b = binder()
    where = _filter(d, b, intent.filter)
    sql = f"""
        SELECT state::text, queue, kind, count(*) FROM {d.prefix}river_job
        WHERE {" AND ".join(where) or "true"} GROUP BY 1, 2, 3
    """
    rows = yield Statement(sql, tuple(b.params))
    return {(JobState(r[0]), str(r[1]), str(r[2])): int(r[3]) for r in rows}


def _get_job(d: Any, intent: GetJob) -> Plan[JobRow]:
    b = binder()
    rows = yield Statement(
        f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE id = {b.p(intent.id)}::bigint", tuple(b.params)
    )
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _get_jobs(d: Any, intent: GetJobs) -> Plan[list[JobRow]]:
    b = binder()
    sql = (
        f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job"
        f" WHERE id = ANY({b.p(list(intent.ids))}::bigint[]) ORDER BY id"
    )
    return job_rows((yield Statement(sql, tuple(b.params))))


def _locked_change(d: Any, b: Binder, job_id: int, change: str) -> str:
    """A statement returning the changed row, or the unchanged row when ``change`` matched nothing;
    its last column says which (see ``_changed_or_current``)."""
    return f"""
        WITH changed AS ({change})
        SELECT {pg_job_columns("c")}, true FROM changed c
        UNION ALL
        SELECT {JOB_COLUMNS}, false FROM {d.prefix}river_job
        WHERE id = {b.p(job_id)}::bigint AND NOT EXISTS (SELECT 1 FROM changed)
    """


def _changed_or_current(d: Any, job_id: int, rows: list[Any]) -> Plan[list[Any]]:
    """The rows of a ``_locked_change``, re-read when the change matched nothing.

    A change that waited on another transaction's lock of the row, and then no longer
    matched it, reads the row as its statement's snapshot saw it, from before that
    transaction committed. A new statement sees the committed row, which is what the
    loser of such a race must return.
    """
    if rows and rows[0][-1] is False:
        b = binder()
        sql = f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE id = {b.p(job_id)}::bigint"
        fresh = yield Statement(sql, tuple(b.params))
        return list(fresh)
    return rows


def _cancel_job(d: Any, intent: CancelJob) -> Plan[JobRow]:
    b = binder()
    change = f"""
        WITH target AS (
            SELECT id, queue, state, finalized_at FROM {d.prefix}river_job
            WHERE id = {b.p(intent.id)}::bigint FOR UPDATE
        ),
        announced AS (
            SELECT id, pg_notify({channel_sql(d, b, "river_control")},
                                 json_build_object('action', 'cancel', 'job_id', id,
                                                   'queue', queue)::text)
            FROM target
            WHERE state NOT IN {FINALIZED_SQL} AND finalized_at IS NULL
        )
        UPDATE {d.prefix}river_job j
        SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
            finalized_at = CASE WHEN j.state = 'running' THEN j.finalized_at
                                ELSE {now_sql(b, intent.now)} END,
            metadata = jsonb_set(j.metadata, '{{cancel_attempted_at}}',
                                 {b.p(json_text(intent.cancel_attempted_at))}::jsonb, true)
        FROM announced a WHERE j.id = a.id
        RETURNING j.*
    """
    rows = yield from _changed_or_current(
        d, intent.id, (yield Statement(_locked_change(d, b, intent.id, change), tuple(b.params))))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _retry_job(d: Any, intent: RetryJob) -> Plan[JobRow]:
    b = binder()
    change = f"""
        WITH target AS (SELECT id FROM {d.prefix}river_job WHERE id = {b.p(intent.id)}::bigint FOR UPDATE)
        UPDATE {d.prefix}river_job j
        SET state = 'available',
            max_attempts = CASE WHEN j.attempt = j.max_attempts THEN j.max_attempts + 1
                                ELSE j.max_attempts END,
            finalized_at = NULL,
            scheduled_at = {now_sql(b, intent.now)}
        FROM target t
        WHERE j.id = t.id AND j.state <> 'running'
          AND NOT (j.state = 'available' AND j.scheduled_at < {now_sql(b, intent.now)})
        RETURNING j.*
    """
    rows = yield from _changed_or_current(
        d, intent.id, (yield Statement(_locked_change(d, b, intent.id, change), tuple(b.params))))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _delete_job(d: Any, intent: DeleteJob) -> Plan[JobRow]:
    b = binder()
    change = f"""
        WITH target AS (SELECT id FROM {d.prefix}river_job WHERE id = {b.p(intent.id)}::bigint FOR UPDATE)
        DELETE FROM {d.prefix}river_job j USING target t
        WHERE j.id = t.id AND j.state <> 'running'
        RETURNING j.*
    """
    rows = yield from _changed_or_current(
        d, intent.id, (yield Statement(_locked_change(d, b, intent.id, change), tuple(b.params))))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    job = job_row_from_pg(rows[0])
    if job.state is JobState.RUNNING:
        raise ValidationError(f"job {intent.id} is running; running jobs cannot be deleted")
    return job


def _delete_jobs(d: Any, intent: DeleteJobs) -> Plan[list[JobRow]]:
    b = binder()
    where = [*_filter(d, b, intent.filter), "state <> 'running'"]
    sql = f"""
        WITH doomed AS (
            SELECT id FROM {d.prefix}river_job WHERE {" AND ".join(where)}
            ORDER BY id LIMIT {b.p(intent.limit)}::bigint
            FOR UPDATE SKIP LOCKED
        ),
        deleted AS (
            DELETE FROM {d.prefix}river_job j USING doomed WHERE j.id = doomed.id RETURNING j.*
        )
        SELECT {pg_job_columns("x")} FROM deleted x ORDER BY x.id
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


def _update_job_metadata(d: Any, intent: UpdateJobMetadata) -> Plan[JobRow]:
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_job SET metadata = metadata || {b.p(json_text(intent.metadata_updates))}::jsonb
        WHERE id = {b.p(intent.id)}::bigint RETURNING {JOB_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _requeue_running_jobs(d: Any, intent: RequeueRunningJobs) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        WITH moved AS (
            UPDATE {d.prefix}river_job SET state = 'available', scheduled_at = {now_sql(b, intent.now)}
            WHERE state = 'running' AND attempted_at < {b.p(intent.attempted_before)}::timestamptz
            RETURNING *
        )
        SELECT {pg_job_columns("m")} FROM moved m ORDER BY m.id
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


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
