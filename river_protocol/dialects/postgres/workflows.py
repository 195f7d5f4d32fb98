"""Postgres plans for workflows (``river_protocol.workflow``): promotion, listing,
cancel and retry of a workflow's tasks.

A workflow's rows are found through River's GIN index on ``metadata``
(``metadata @> '{"river_py:workflow_id": ...}'``); no table of our own.
"""

from __future__ import annotations

import json
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import json_text
from river_protocol.dialects.postgres.fragments import JOB_COLUMNS, binder, channel_sql, job_rows
from river_protocol.dialects.rows import pg_job_columns
from river_protocol.dialects.workflow_plans import one_statement, promotion_plan
from river_protocol.intents import (
    CancelWorkflow,
    Intent,
    ListWorkflows,
    ListWorkflowTasks,
    PromoteWorkflowTasks,
    RetryWorkflow,
    Statement,
)
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_protocol.workflow import (
    DEPS,
    IGNORE_CANCELLED_DEPS,
    IGNORE_DISCARDED_DEPS,
    TASK,
    WORKFLOW_ID,
    WORKFLOW_NAME,
    CancelDependent,
    WorkflowSummary,
    cancel_error,
)


def _of_workflow(d: Any, alias: str, wid_sql: str) -> str:
    return f"{alias}.metadata @> jsonb_build_object('{WORKFLOW_ID}', {wid_sql})"


def _select(d: Any, ids: tuple[str, ...] | None, after_id: int, limit: int) -> Statement:
    b = binder()
    if ids is None:
        source = f"{d.prefix}river_job j"
        where = f"j.state = 'pending' AND j.metadata ? '{WORKFLOW_ID}' AND j.id > {b.p(after_id)}::bigint"
    else:
        source = (f"unnest({b.p(list(ids))}::text[]) AS w(id) JOIN {d.prefix}river_job j "
                  f"ON {_of_workflow(d, 'j', 'w.id')}")
        where = f"j.state = 'pending' AND j.id > {b.p(after_id)}::bigint"
    # The candidates' fields are read once (MATERIALIZED): a fan-in's metadata holds every dep's
    # name and is stored compressed out of line, so reading it again for each dep row (as a
    # join condition would) decompressed it ten thousand times for a 10,000-way fan-in. The
    # workflow id as plain text lets each dep lookup use River's GIN index on metadata.
    sql = f"""
        WITH p AS MATERIALIZED (
            SELECT j.id, j.attempt, j.metadata ->> '{WORKFLOW_ID}' AS wid, j.metadata ->> '{TASK}' AS task,
                   CASE WHEN jsonb_typeof(j.metadata -> '{DEPS}') = 'array'
                        THEN j.metadata -> '{DEPS}' ELSE '[]'::jsonb END AS deps,
                   coalesce(j.metadata -> '{IGNORE_CANCELLED_DEPS}' = 'true'::jsonb, false) AS ign_c,
                   coalesce(j.metadata -> '{IGNORE_DISCARDED_DEPS}' = 'true'::jsonb, false) AS ign_d
            FROM {source}
            WHERE {where}
            ORDER BY j.id LIMIT {b.p(limit)}::bigint
        )
        SELECT p.id, p.wid, p.task, p.attempt, p.deps::text, p.ign_c, p.ign_d,
               s.completed, s.cancelled::text, s.discarded::text
        FROM p
        CROSS JOIN LATERAL (
            SELECT count(DISTINCT d.metadata ->> '{TASK}') FILTER (WHERE d.state = 'completed') AS completed,
                   coalesce(jsonb_agg(DISTINCT d.metadata ->> '{TASK}')
                            FILTER (WHERE d.state = 'cancelled'), '[]'::jsonb) AS cancelled,
                   coalesce(jsonb_agg(DISTINCT d.metadata ->> '{TASK}')
                            FILTER (WHERE d.state = 'discarded'), '[]'::jsonb) AS discarded
            FROM {d.prefix}river_job d
            WHERE {_of_workflow(d, 'd', 'p.wid')}
              AND d.metadata ->> '{TASK}' IN (SELECT jsonb_array_elements_text(p.deps))
        ) s
        ORDER BY p.id
    """
    return Statement(sql, tuple(b.params))


def _promote(d: Any, ids: list[int]) -> Statement:
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_job SET state = 'available'
        WHERE id = ANY({b.p(ids)}::bigint[]) AND state = 'pending'
        RETURNING id, queue
    """
    return Statement(sql, tuple(b.params))


def _cancel(d: Any, intent: PromoteWorkflowTasks, downs: list[CancelDependent]) -> Statement:
    b = binder()
    errors = [json_text(cancel_error(c.reason, intent.now, c.attempt)) for c in downs]
    sql = f"""
        UPDATE {d.prefix}river_job j
        SET state = 'cancelled', finalized_at = {b.p(intent.now)}::timestamptz,
            errors = array_append(j.errors, c.error::jsonb)
        FROM unnest({b.p([c.id for c in downs])}::bigint[], {b.p(errors)}::text[]) AS c(id, error)
        WHERE j.id = c.id AND j.state = 'pending'
        RETURNING j.id, j.metadata ->> '{WORKFLOW_ID}'
    """
    return Statement(sql, tuple(b.params))


def _promote_workflow_tasks(d: Any, intent: PromoteWorkflowTasks) -> Plan[Any]:
    return promotion_plan(
        intent,
        lambda ids, after, limit: one_statement(_select(d, ids, after, limit)),
        lambda ids: _promote(d, ids),
        lambda downs: _cancel(d, intent, downs),
    )


def _list_workflow_tasks(d: Any, intent: ListWorkflowTasks) -> Plan[list[JobRow]]:
    b = binder()
    where = _of_workflow(d, "j", f"{b.p(intent.workflow_id)}::text")
    if intent.tasks is not None:
        where += f" AND j.metadata ->> '{TASK}' = ANY({b.p(list(intent.tasks))}::text[])"
    sql = f"SELECT {pg_job_columns('j')} FROM {d.prefix}river_job j WHERE {where} ORDER BY j.id"
    return job_rows((yield Statement(sql, tuple(b.params))))


def _list_workflows(d: Any, intent: ListWorkflows) -> Plan[list[WorkflowSummary]]:
    b = binder()
    before = ("" if intent.before_created_at is None
              else f"HAVING min(created_at) < {b.p(intent.before_created_at)}::timestamptz")
    sql = f"""
        SELECT id, coalesce(max(name), ''), min(created_at), jsonb_object_agg(state, n)::text
        FROM (
            SELECT metadata ->> '{WORKFLOW_ID}' AS id, max(metadata ->> '{WORKFLOW_NAME}') AS name,
                   state, min(created_at) AS created_at, count(*) AS n
            FROM {d.prefix}river_job WHERE metadata ? '{WORKFLOW_ID}'
            GROUP BY 1, state
        ) x
        GROUP BY id
        {before}
        ORDER BY min(created_at) DESC, id LIMIT {b.p(intent.limit)}::bigint
    """
    rows = yield Statement(sql, tuple(b.params))
    return [WorkflowSummary(str(r[0]), str(r[1]), {JobState(k): int(v) for k, v in json.loads(r[3]).items()},
                            r[2]) for r in rows]


def _cancel_workflow(d: Any, intent: CancelWorkflow) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        WITH target AS (
            SELECT id, queue, state FROM {d.prefix}river_job j
            WHERE {_of_workflow(d, 'j', f"{b.p(intent.workflow_id)}::text")}
              AND state IN ('pending', 'available', 'scheduled', 'retryable', 'running')
            FOR UPDATE
        ),
        announced AS (
            SELECT id, pg_notify({channel_sql(d, b, "river_control")},
                                 json_build_object('action', 'cancel', 'job_id', id, 'queue', queue)::text)
            FROM target WHERE state = 'running'
        ),
        changed AS (
            UPDATE {d.prefix}river_job j
            SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
                finalized_at = CASE WHEN j.state = 'running' THEN j.finalized_at
                                    ELSE {b.p(intent.now)}::timestamptz END,
                errors = CASE WHEN j.state = 'running' THEN j.errors
                              ELSE array_append(j.errors, {b.p(json_text(intent.error))}::jsonb) END,
                metadata = CASE WHEN j.state = 'running'
                                THEN jsonb_set(j.metadata, '{{cancel_attempted_at}}',
                                               {b.p(json_text(intent.cancel_attempted_at))}::jsonb, true)
                                ELSE j.metadata END
            FROM target t LEFT JOIN announced a ON a.id = t.id WHERE j.id = t.id
            RETURNING j.*
        )
        SELECT {pg_job_columns("c")} FROM changed c ORDER BY c.id
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


def _retry_workflow(d: Any, intent: RetryWorkflow) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        WITH target AS (
            SELECT id FROM {d.prefix}river_job j
            WHERE {_of_workflow(d, 'j', f"{b.p(intent.workflow_id)}::text")}
              AND state IN ('discarded', 'cancelled')
            FOR UPDATE
        ),
        changed AS (
            UPDATE {d.prefix}river_job j
            SET state = CASE WHEN j.attempt = 0 AND j.metadata ? '{DEPS}'
                             THEN 'pending'::{d.prefix}river_job_state
                             ELSE 'available'::{d.prefix}river_job_state END,
                max_attempts = CASE WHEN j.attempt >= j.max_attempts THEN j.attempt + 1
                                    ELSE j.max_attempts END,
                finalized_at = NULL,
                scheduled_at = {b.p(intent.now)}::timestamptz,
                metadata = j.metadata - 'cancel_attempted_at'
            FROM target t WHERE j.id = t.id
            RETURNING j.*
        )
        SELECT {pg_job_columns("c")} FROM changed c ORDER BY c.id
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


PLANNERS: dict[type[Intent], Planner] = {
    PromoteWorkflowTasks: _promote_workflow_tasks,
    ListWorkflowTasks: _list_workflow_tasks,
    ListWorkflows: _list_workflows,
    CancelWorkflow: _cancel_workflow,
    RetryWorkflow: _retry_workflow,
}

__all__ = ["JOB_COLUMNS", "PLANNERS"]
