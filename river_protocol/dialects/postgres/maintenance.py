"""Postgres plans for the maintenance services: scheduler, rescuer, cleaners and
reindexer (docs/protocol.md §11).
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import finalized_horizons, index_identifier, json_text
from river_protocol.dialects.postgres.fragments import JOB_COLUMNS, binder, job_rows
from river_protocol.dialects.rows import job_row_from_pg, pg_job_columns
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


def _schedule_jobs(d: Any, intent: ScheduleJobs) -> Plan[list[ScheduledJob]]:
    b = binder()
    sql = f"""
        WITH due AS (
            SELECT id, unique_key, unique_states, priority, scheduled_at
            FROM {d.prefix}river_job
            WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= {b.p(intent.now)}::timestamptz
            ORDER BY priority, scheduled_at, id
            LIMIT {b.p(intent.limit)}::bigint
            FOR UPDATE
        ),
        ranked AS (
            SELECT due.*,
                   CASE WHEN unique_key IS NOT NULL AND unique_states IS NOT NULL
                        THEN row_number() OVER (PARTITION BY unique_key
                                                ORDER BY priority, scheduled_at, id) END AS rank
            FROM due
        ),
        decided AS (
            SELECT r.id,
                   r.rank IS NOT NULL AND (r.rank > 1 OR EXISTS (
                       SELECT 1 FROM {d.prefix}river_job o
                       WHERE o.unique_key = r.unique_key AND o.id <> r.id
                         AND o.unique_states IS NOT NULL
                         AND {d.prefix}river_job_state_in_bitmask(o.unique_states, o.state)
                   )) AS discard
            FROM ranked r
        ),
        updated AS (
            UPDATE {d.prefix}river_job j
            SET state = CASE WHEN x.discard THEN 'discarded'::{d.prefix}river_job_state
                             ELSE 'available'::{d.prefix}river_job_state END,
                finalized_at = CASE WHEN x.discard THEN {b.p(intent.now)}::timestamptz
                                    ELSE j.finalized_at END,
                metadata = CASE WHEN x.discard
                                THEN j.metadata || '{{"unique_key_conflict": "scheduler_discarded"}}'::jsonb
                                ELSE j.metadata END
            FROM decided x
            WHERE j.id = x.id
            RETURNING j.*, x.discard
        )
        SELECT {pg_job_columns("u")}, u.discard FROM updated u
        ORDER BY u.priority, u.scheduled_at, u.id
    """
    rows = yield Statement(sql, tuple(b.params))
    return [ScheduledJob(job=job_row_from_pg(r), conflict_discarded=bool(r[-1])) for r in rows]


def _get_stuck_jobs(d: Any, intent: GetStuckJobs) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        SELECT {JOB_COLUMNS} FROM {d.prefix}river_job
        WHERE state = 'running' AND id > {b.p(intent.after_id)}::bigint
          AND attempted_at < {b.p(intent.stuck_horizon)}::timestamptz
        ORDER BY id LIMIT {b.p(intent.limit)}::bigint
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


def _rescue_jobs(d: Any, intent: RescueJobs) -> Plan[None]:
    if not intent.updates:
        return None
    us = intent.updates
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_job j
        SET errors = array_append(j.errors, r.error::jsonb),
            finalized_at = r.finalized_at,
            scheduled_at = r.scheduled_at,
            state = r.state::{d.prefix}river_job_state,
            metadata = j.metadata || jsonb_build_object(
                'river:rescue_count',
                coalesce(CASE WHEN jsonb_typeof(j.metadata -> 'river:rescue_count') = 'number'
                              THEN (j.metadata ->> 'river:rescue_count')::numeric::bigint END, 0) + 1
            ) || r.updates::jsonb
        FROM unnest(
            {b.p([u.id for u in us])}::bigint[],
            {b.p([json_text(u.error) for u in us])}::text[],
            {b.p([u.finalized_at for u in us])}::timestamptz[],
            {b.p([u.scheduled_at for u in us])}::timestamptz[],
            {b.p([u.state.value for u in us])}::text[],
            {b.p([json_text(u.metadata_updates or b"{}") for u in us])}::text[]
        ) AS r(id, error, finalized_at, scheduled_at, state, updates)
        WHERE j.id = r.id
    """
    yield Statement(sql, tuple(b.params), fetch=False)
    return None


def _delete_finalized_before(d: Any, intent: DeleteFinalizedBefore) -> Plan[int]:
    b = binder()
    clauses = [
        f"(state = '{state}' AND finalized_at < {b.p(horizon)}::timestamptz)"
        for state, horizon in finalized_horizons(intent)
    ]
    if not clauses:
        return 0
    where = "(" + " OR ".join(clauses) + ")"
    if intent.queues_included is not None:
        where += f" AND queue = ANY({b.p(list(intent.queues_included))}::text[])"
    if intent.queues_excluded is not None:
        where += f" AND NOT (queue = ANY({b.p(list(intent.queues_excluded))}::text[]))"
    sql = f"""
        WITH deleted AS (
            DELETE FROM {d.prefix}river_job WHERE id IN (
                SELECT id FROM {d.prefix}river_job WHERE {where}
                ORDER BY id LIMIT {b.p(intent.limit)}::bigint
            ) RETURNING 1
        )
        SELECT count(*) FROM deleted
    """
    rows = yield Statement(sql, tuple(b.params))
    return int(rows[0][0])


def _delete_expired_queues(d: Any, intent: DeleteExpiredQueues) -> Plan[list[str]]:
    b = binder()
    sql = f"""
        DELETE FROM {d.prefix}river_queue WHERE name IN (
            SELECT name FROM {d.prefix}river_queue
            WHERE updated_at < {b.p(intent.updated_before)}::timestamptz
            ORDER BY name LIMIT {b.p(intent.limit)}::bigint
        ) RETURNING name
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(str(r[0]) for r in rows)


def _delete_notifications_before(d: Any, intent: DeleteNotificationsBefore) -> Plan[int]:
    b = binder()
    sql = f"""
        WITH deleted AS (
            DELETE FROM {d.prefix}river_notification
            WHERE created_at < {b.p(intent.created_before)}::timestamptz RETURNING 1
        )
        SELECT count(*) FROM deleted
    """
    rows = yield Statement(sql, tuple(b.params))
    return int(rows[0][0])


def _list_reindex_artifacts(d: Any, intent: ListReindexArtifacts) -> Plan[list[str]]:
    index_identifier(intent.index)
    b = binder()
    sql = f"""
        SELECT c.relname::text FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = coalesce({b.p(d.schema)}::text, current_schema())
          AND c.relkind = 'i'
          AND left(c.relname, length({b.p(intent.index)}::text)) = {b.p(intent.index)}::text
          AND substring(c.relname FROM length({b.p(intent.index)}::text) + 1) ~ '^_cc(new|old)[0-9]*$'
        ORDER BY 1
    """
    rows = yield Statement(sql, tuple(b.params))
    return [str(r[0]) for r in rows]


def _index_exists(d: Any, intent: IndexExists) -> Plan[bool]:
    b = binder()
    sql = f"""
        SELECT EXISTS (
            SELECT 1 FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relname = {b.p(intent.index)}::text AND c.relkind = 'i'
              AND n.nspname = coalesce({b.p(d.schema)}::text, current_schema())
        )
    """
    rows = yield Statement(sql, tuple(b.params))
    return bool(rows[0][0])


def _reindex(d: Any, intent: Reindex) -> Plan[None]:
    # CONCURRENTLY refuses to run inside a transaction block: the intent is not transactional.
    yield Statement(f"REINDEX INDEX CONCURRENTLY {d.prefix}{index_identifier(intent.index)}", fetch=False)
    return None


def _drop_index(d: Any, intent: DropIndex) -> Plan[None]:
    yield Statement(
        f"DROP INDEX CONCURRENTLY IF EXISTS {d.prefix}{index_identifier(intent.index)}", fetch=False
    )
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
