"""SQLite plans for workflows (``river_protocol.workflow``): promotion, listing,
cancel and retry of a workflow's tasks.

SQLite has no index on ``metadata``: a workflow's rows are found by scanning
``river_job`` (the promotion reads only the pending tasks' workflows).
Running tasks of a cancelled workflow are cancelled as the cancel API does on
SQLite: ``cancel_attempted_at`` in metadata, seen by the completer and rescuer.
"""

from __future__ import annotations

import json
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import json_text
from river_protocol.dialects.rows import _utc_or_none
from river_protocol.dialects.sqlite.fragments import (
    ERRORS_ARRAY,
    JOB_COLUMNS,
    binder,
    job_rows,
    json_list,
    limit_param,
    sqlite_time,
)
from river_protocol.dialects.workflow_plans import counted, promotion_plan, targets
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


def _key(alias: str, key: str) -> str:
    q = f"{alias}." if alias else ""
    return f"json_extract({q}metadata, '$.\"{key}\"')"


def _deps_json(alias: str) -> str:
    """The task's deps as a JSON array (``[]`` when the key is missing or not an array)."""
    q = f"{alias}." if alias else ""
    value = f"json_extract({q}metadata, '$.\"{DEPS}\"')"
    return f"CASE WHEN json_type({q}metadata, '$.\"{DEPS}\"') = 'array' THEN {value} ELSE '[]' END"


def _select(d: Any, intent: PromoteWorkflowTasks) -> Plan[list[tuple[Any, ...]]]:
    """Two statements: the pending candidates, then every final row of their workflows (counted
    by ``counted``). SQLite has no index on metadata: the second statement scans river_job."""
    b = binder()
    where = f"state = 'pending' AND {_key('', WORKFLOW_ID)} IS NOT NULL AND id > {b.p(intent.after_id)}"
    if not intent.sweep:
        wids = sorted({*(intent.workflow_ids or ()), *(w for w, _ in intent.finished or ())})
        among = [f"SELECT value FROM json_each({b.p(json_list(wids))})"]
        if intent.finished_since is not None:
            among.append(f"SELECT {_key('f', WORKFLOW_ID)} FROM {d.prefix}river_job f "
                         "WHERE f.state IN ('completed', 'cancelled', 'discarded') "
                         f"AND f.finalized_at >= {b.p(sqlite_time(intent.finished_since))} "
                         f"AND {_key('f', WORKFLOW_ID)} IS NOT NULL")
        where += f" AND {_key('', WORKFLOW_ID)} IN ({' UNION '.join(among)})"
    found = yield Statement(f"""
        SELECT id, {_key('', WORKFLOW_ID)}, {_key('', TASK)}, attempt, {_deps_json('')},
               coalesce({_key('', IGNORE_CANCELLED_DEPS)}, 0) = 1,
               coalesce({_key('', IGNORE_DISCARDED_DEPS)}, 0) = 1
        FROM {d.prefix}river_job WHERE {where}
        ORDER BY id
    """ + (f" LIMIT {limit_param(b, intent.limit)}" if intent.sweep or intent.finished_since else ""),
        tuple(b.params))
    candidates = [c for c in found if targets(intent, c)][:intent.limit]
    if not candidates:
        return []
    finals = yield Statement(f"""
        SELECT {_key('', WORKFLOW_ID)}, {_key('', TASK)}, state FROM {d.prefix}river_job
        WHERE state IN ('completed', 'cancelled', 'discarded')
          AND {_key('', WORKFLOW_ID)} IN (SELECT value FROM json_each(?))
    """, (json_list(sorted({str(c[1]) for c in candidates})),))
    return counted(candidates, finals)


def _promote(d: Any, ids: list[int]) -> Statement:
    return Statement(
        f"""UPDATE {d.prefix}river_job SET state = 'available'
            WHERE id IN (SELECT value FROM json_each(?)) AND state = 'pending'
            RETURNING id, queue""",
        (json_list(ids),),
    )


def _cancel(d: Any, intent: PromoteWorkflowTasks, downs: list[CancelDependent]) -> Statement:
    pairs = json.dumps([[c.id, json_text(cancel_error(c.reason, intent.now, c.attempt))] for c in downs])
    return Statement(
        f"""UPDATE {d.prefix}river_job
            SET state = 'cancelled', finalized_at = ?,
                errors = jsonb_insert({ERRORS_ARRAY}, '$[#]',
                    json((SELECT c.value ->> '$[1]' FROM json_each(?) c
                          WHERE c.value ->> '$[0]' = river_job.id)))
            WHERE id IN (SELECT c.value ->> '$[0]' FROM json_each(?) c) AND state = 'pending'
            RETURNING id, {_key('', WORKFLOW_ID)}, {_key('', TASK)}""",
        (sqlite_time(intent.now), pairs, pairs),
    )


def _promote_workflow_tasks(d: Any, intent: PromoteWorkflowTasks) -> Plan[Any]:
    return promotion_plan(
        intent,
        lambda scope: _select(d, scope),
        lambda ids: _promote(d, ids),
        lambda downs: _cancel(d, intent, downs),
    )


def _of_workflow(b: Any, workflow_id: str) -> str:
    return f"{_key('', WORKFLOW_ID)} = {b.p(workflow_id)}"


def _list_workflow_tasks(d: Any, intent: ListWorkflowTasks) -> Plan[list[JobRow]]:
    b = binder()
    where = _of_workflow(b, intent.workflow_id)
    if intent.tasks is not None:
        where += f" AND {_key('', TASK)} IN (SELECT value FROM json_each({b.p(json_list(intent.tasks))}))"
    sql = f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE {where} ORDER BY id"
    return job_rows((yield Statement(sql, tuple(b.params))))


def _list_workflows(d: Any, intent: ListWorkflows) -> Plan[list[WorkflowSummary]]:
    b = binder()
    before = ("" if intent.before_created_at is None
              else f"HAVING min(created_at) < {b.p(sqlite_time(intent.before_created_at))}")
    sql = f"""
        SELECT id, coalesce(max(name), ''), min(created_at), json_group_object(state, n)
        FROM (
            SELECT {_key('', WORKFLOW_ID)} AS id, max({_key('', WORKFLOW_NAME)}) AS name,
                   state, min(created_at) AS created_at, count(*) AS n
            FROM {d.prefix}river_job WHERE {_key('', WORKFLOW_ID)} IS NOT NULL
            GROUP BY 1, state
        )
        GROUP BY id
        {before}
        ORDER BY min(created_at) DESC, id LIMIT {limit_param(b, intent.limit)}
    """
    rows = yield Statement(sql, tuple(b.params))
    return [WorkflowSummary(str(r[0]), str(r[1]), {JobState(k): int(v) for k, v in json.loads(r[3]).items()},
                            _utc_or_none(r[2])) for r in rows]


def _cancel_workflow(d: Any, intent: CancelWorkflow) -> Plan[list[JobRow]]:
    b = binder()
    now = sqlite_time(intent.now)
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
            finalized_at = CASE WHEN state = 'running' THEN finalized_at ELSE {b.p(now)} END,
            errors = CASE WHEN state = 'running' THEN errors
                          ELSE jsonb_insert({ERRORS_ARRAY}, '$[#]', json({b.p(json_text(intent.error))})) END,
            metadata = CASE WHEN state = 'running'
                            THEN jsonb_set(metadata, '$.cancel_attempted_at',
                                           json({b.p(json_text(intent.cancel_attempted_at))}))
                            ELSE metadata END
        WHERE {_of_workflow(b, intent.workflow_id)}
          AND state IN ('pending', 'available', 'scheduled', 'retryable', 'running')
        RETURNING {JOB_COLUMNS}
    """
    rows = job_rows((yield Statement(sql, tuple(b.params))))
    return sorted(rows, key=lambda j: j.id)


def _retry_workflow(d: Any, intent: RetryWorkflow) -> Plan[list[JobRow]]:
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = CASE WHEN attempt = 0 AND json_type(metadata, '$."{DEPS}"') IS NOT NULL
                         THEN 'pending' ELSE 'available' END,
            max_attempts = CASE WHEN attempt >= max_attempts THEN attempt + 1 ELSE max_attempts END,
            finalized_at = NULL,
            scheduled_at = {b.p(sqlite_time(intent.now))},
            metadata = jsonb_remove(metadata, '$.cancel_attempted_at')
        WHERE {_of_workflow(b, intent.workflow_id)} AND state IN ('discarded', 'cancelled')
        RETURNING {JOB_COLUMNS}
    """
    rows = job_rows((yield Statement(sql, tuple(b.params))))
    return sorted(rows, key=lambda j: j.id)


PLANNERS: dict[type[Intent], Planner] = {
    PromoteWorkflowTasks: _promote_workflow_tasks,
    ListWorkflowTasks: _list_workflow_tasks,
    ListWorkflows: _list_workflows,
    CancelWorkflow: _cancel_workflow,
    RetryWorkflow: _retry_workflow,
}
