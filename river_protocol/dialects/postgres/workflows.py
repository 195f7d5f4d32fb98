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
from river_protocol.dialects.workflow_plans import counted, promotion_plan
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


def _select(d: Any, intent: PromoteWorkflowTasks) -> Plan[list[tuple[Any, ...]]]:
    """Two statements: the pending candidates, then every final row of their workflows (counted
    by ``counted``), each workflow found once through River's GIN index on metadata. A probe of
    that index per dep costs milliseconds (its posting lists for our keys hold every workflow
    row), so it is made once per workflow, not once per dep."""
    b = binder()
    after = b.p(intent.after_id)  # bound first: it comes first in the text
    if intent.sweep:
        where = f"j.metadata ? '{WORKFLOW_ID}'"
    else:
        named = []
        if intent.workflow_ids:
            named.append(f"SELECT j2.id FROM unnest({b.p(list(intent.workflow_ids))}::text[]) AS w(id) "
                         f"JOIN {d.prefix}river_job j2 ON {_of_workflow(d, 'j2', 'w.id')} "
                         "WHERE j2.state = 'pending'")
        if intent.finished:
            pairs = intent.finished
            named.append(
                f"SELECT j3.id FROM unnest({b.p([w for w, _ in pairs])}::text[], "
                f"{b.p([t for _, t in pairs])}::text[]) AS f(wid, task) "
                f"JOIN {d.prefix}river_job j3 ON j3.metadata @> jsonb_build_object("
                f"'{WORKFLOW_ID}', f.wid, '{DEPS}', jsonb_build_array(f.task)) WHERE j3.state = 'pending'")
        if intent.finished_since is not None:
            # River's (state, finalized_at) index finds the recent ends.
            named.append(
                f"SELECT j4.id FROM {d.prefix}river_job j4 WHERE j4.state = 'pending' "
                f"AND j4.metadata ->> '{WORKFLOW_ID}' IN (SELECT f.metadata ->> '{WORKFLOW_ID}' "
                f"FROM {d.prefix}river_job f WHERE f.state IN ('completed', 'cancelled', 'discarded') "
                f"AND f.finalized_at >= {b.p(intent.finished_since)}::timestamptz "
                f"AND f.metadata ? '{WORKFLOW_ID}')")
        where = f"j.id IN ({' UNION '.join(named) or 'SELECT NULL::bigint'})"
    candidates = yield Statement(f"""
        SELECT j.id, j.metadata ->> '{WORKFLOW_ID}', j.metadata ->> '{TASK}', j.attempt,
               (CASE WHEN jsonb_typeof(j.metadata -> '{DEPS}') = 'array'
                     THEN j.metadata -> '{DEPS}' ELSE '[]'::jsonb END)::text,
               coalesce(j.metadata -> '{IGNORE_CANCELLED_DEPS}' = 'true'::jsonb, false),
               coalesce(j.metadata -> '{IGNORE_DISCARDED_DEPS}' = 'true'::jsonb, false)
        FROM {d.prefix}river_job j
        WHERE j.state = 'pending' AND j.id > {after}::bigint AND {where}
        ORDER BY j.id LIMIT {b.p(intent.limit)}::bigint
    """, tuple(b.params))
    if not candidates:
        return []
    f = binder()
    finals = yield Statement(f"""
        SELECT w.id, d.metadata ->> '{TASK}', d.state::text
        FROM unnest({f.p(sorted({str(c[1]) for c in candidates}))}::text[]) AS w(id)
        JOIN {d.prefix}river_job d ON {_of_workflow(d, 'd', 'w.id')}
        WHERE d.state IN ('completed', 'cancelled', 'discarded')
    """, tuple(f.params))
    return counted(candidates, finals)


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
        RETURNING j.id, j.metadata ->> '{WORKFLOW_ID}', j.metadata ->> '{TASK}'
    """
    return Statement(sql, tuple(b.params))


def _promote_workflow_tasks(d: Any, intent: PromoteWorkflowTasks) -> Plan[Any]:
    return promotion_plan(
        intent,
        lambda scope: _select(d, scope),
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
