"""Postgres plans for flow control (river_protocol.flow_control, whose docstring states the rule).

A limited claim is serialised per queue by locking the queue's ``river_py_queue_limit`` row
(or, with none, a transaction-level advisory lock on the queue's name). The claim itself is
the next statement of that transaction: under READ COMMITTED it takes a new snapshot, so it
sees every claim committed by the lock's previous holder. Completions and rescues are not
serialised; they only lower what the claim counts, so the count is never too low.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.flow_common import (
    LIMIT_COLUMNS,
    ORDER,
    UPSERT_SET,
    busiest_plan,
    chosen_sql,
    fast_ok_sql,
    flow_status_plan,
    full_conditions,
    limits_from_row,
    list_limits_plan,
    missing_line,
    partitions_json,
    ranked_sql,
    update_limits_plan,
)
from river_protocol.dialects.postgres.fragments import binder, job_rows, now_sql, table_exists
from river_protocol.dialects.postgres.jobs import _claim_filters, claim_set_sql
from river_protocol.dialects.rows import Binder, pg_job_columns
from river_protocol.errors import ValidationError
from river_protocol.flow_control import (
    SEQUENCE_HALT,
    SEQUENCE_KEY,
    SEQUENCE_WAIT_STATES,
    PartitionConfig,
    QueueLimits,
    scan_size,
    start_retention,
)
from river_protocol.flow_intents import (
    BusiestPartitions,
    ClaimLimitedJobs,
    GetFlowStatus,
    ListQueueLimits,
    PartitionUsage,
    QueueFlowStatus,
    QueueLimitRow,
    SetQueueLimits,
    UpdateQueueLimits,
)
from river_protocol.intents import Statement
from river_protocol.job import JobRow

# The claim's time: its statement's start, after the queue's lock is held. now() is the
# transaction's start, before the lock: a claim that waited for the lock while a job of the
# partition finished would record its start before that job's end.
CLOCK = "statement_timestamp()"


def partition_sql(p: PartitionConfig, alias: str) -> str:
    """The partition key of a row of ``river_job`` as text (JSON array of the kind and args)."""
    parts = ([f"{alias}.kind"] if p.by_kind else []) + [f"{alias}.args -> '{a}'" for a in p.by_args]
    return f"jsonb_build_array({', '.join(parts)})::text" if parts else "'[]'::text"


def _lock(d: Any, intent: ClaimLimitedJobs) -> Plan[QueueLimits]:
    queue = intent.claim.queue
    rows = yield Statement(
        f"SELECT {LIMIT_COLUMNS} FROM {d.prefix}river_py_queue_limit"
        " WHERE queue = %s FOR UPDATE", (queue,))
    if rows:
        return limits_from_row(rows[0])
    # No row (deleted by hand): the client's own limits, serialised on the queue's name.
    yield Statement("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"river_py_claim:{d.prefix}{queue}",))
    return intent.flow.limits


def _heads_sql(d: Any, b: Binder, queue: str) -> str:
    """The ``heads`` CTE: per sequence key, the first job (lowest id) not yet finished; only it
    may start. One pass over the queue's unfinished jobs, not one per candidate."""
    waits = ", ".join(f"'{s.value}'" for s in SEQUENCE_WAIT_STATES)
    return f""",
        heads AS (
            SELECT s.metadata ->> '{SEQUENCE_KEY}' AS skey, min(s.id) AS head
            FROM {d.prefix}river_job s
            WHERE s.queue = {b.p(queue)}::text AND s.state IN ({waits}) AND s.metadata ? '{SEQUENCE_KEY}'
            GROUP BY 1
        )"""


def _sequence_sql(d: Any) -> str:
    """A candidate of a sequence starts only as its head (an available job is unfinished, so it
    is its own sequence's head or behind it); one that says so also waits behind a discarded or
    cancelled job of its sequence. Sets computed once per claim, not per candidate."""
    return f"""
          AND (NOT j.metadata ? '{SEQUENCE_KEY}' OR j.id = ANY(ARRAY(SELECT head FROM heads)))
          AND NOT (j.metadata ? '{SEQUENCE_HALT}' AND EXISTS (
              SELECT 1 FROM {d.prefix}river_job e
              WHERE e.queue = j.queue AND e.id < j.id AND e.state IN ('cancelled', 'discarded')
                AND e.metadata ->> '{SEQUENCE_KEY}' = j.metadata ->> '{SEQUENCE_KEY}'
                AND (j.metadata -> '{SEQUENCE_HALT}') ? e.state::text))"""


def _candidates_sql(d: Any, b: Binder, intent: ClaimLimitedJobs, limits: QueueLimits, size: int,
                    leave_out_full: bool = True) -> str:
    """The first ``size`` candidates (rule step 2) in claim order, with their partition keys
    (``leave_out_full=False``: full partitions kept, for the fast path's check).

    A full partition is found by a lookup in the ``counts`` and ``rcounts`` objects (binary
    search), not by a join: a join's plan follows the table's statistics, and on a queue whose
    statistics are stale (a fresh or fast-changing one) a nested loop of every candidate over
    every running partition took a second per claim."""
    claim, flow = intent.claim, intent.flow
    ckey, rkey = partition_sql(flow.concurrency_partition, "j"), partition_sql(flow.rate_partition, "j")
    sql = [f"""
            SELECT j.id, j.priority, j.scheduled_at, {ckey} AS ckey, {rkey} AS rkey
            FROM {d.prefix}river_job j
            WHERE state = 'available' AND queue = {b.p(claim.queue)}::text
              AND scheduled_at <= {now_sql(b, claim.now, CLOCK)}{_claim_filters(b, claim)}"""]
    if leave_out_full and full_conditions(limits):
        sql.append(f"""
              AND NOT ((SELECT full_keys FROM counts) ? {ckey})""")
    if leave_out_full and limits.rate_allowed is not None:
        sql.append(f"""
              AND NOT ((SELECT full_keys FROM rcounts) ? {rkey})""")
    if flow.sequences:
        sql.append(_sequence_sql(d))
    sql.append(f"""
            ORDER BY {ORDER}
            LIMIT {b.p(size)}::integer""")
    return "".join(sql)


def _count(cte: str, column: str, key: str) -> str:
    """A partition's count in the ``cte``'s ``column`` object (0 when absent)."""
    return f"coalesce(((SELECT {column} FROM {cte}) ->> {key})::bigint, 0)"


def _claim_limited(d: Any, intent: ClaimLimitedJobs) -> Plan[list[JobRow]]:
    claim, flow = intent.claim, intent.flow
    if claim.limit <= 0:
        return []
    if claim.max_attempted_by < 1:
        raise ValidationError("max_attempted_by must be at least 1")
    if claim.asynchronous_commit:  # this transaction only, as the plain claim does
        yield Statement("SET LOCAL synchronous_commit = off", (), fetch=False)
    limits = yield from _lock(d, intent)
    rate = limits.rate_allowed is not None
    now: datetime | None = claim.now
    if rate and now is None:
        # After the lock, so that start times are in the order the claims ran.
        now = (yield Statement("SELECT clock_timestamp()"))[0][0]
    t, b = d.prefix, binder()
    cpart = flow.concurrency_partition
    full = full_conditions(limits)
    scan = scan_size(claim.limit)
    mine_sql = "r.attempted_by[array_length(r.attempted_by, 1)] = {client}::text"
    window = "started_at > {now}::timestamptz - {period} * interval '1 millisecond'"
    sql = ["\n        WITH"]
    if flow.sequences:
        sql.append(_heads_sql(d, b, claim.queue).lstrip(",") + ",")
    # The fast path (fast_ok_sql): the first min(limit, scan) available jobs, and the running
    # jobs and recent starts of their partitions only.
    sql.append(f"""
        fast AS ({_candidates_sql(d, b, intent, limits, min(claim.limit, scan), leave_out_full=False)}
        ),
        fast_keys AS MATERIALIZED (
            SELECT coalesce(jsonb_object_agg(ckey, true), '{{}}') AS c,
                   coalesce(jsonb_object_agg(rkey, true), '{{}}') AS r
            FROM fast
        ),""")
    running_rows = "" if not full else f"""
                    SELECT {partition_sql(cpart, 'r')}, 0, 1,
                           CASE WHEN {mine_sql.format(client=b.p(claim.client_id))} THEN 1 ELSE 0 END
                    FROM {t}river_job r
                    WHERE r.state = 'running' AND r.queue = {b.p(claim.queue)}::text
                      AND (SELECT c FROM fast_keys) ? {partition_sql(cpart, 'r')}"""
    starts_rows = "" if not rate else f"""
                    SELECT partition_key, 0, 1 FROM {t}river_py_job_start
                    WHERE queue = {b.p(claim.queue)}::text
                      AND {window.format(now=b.p(now), period=b.p(limits.rate_period_ms))}
                      AND (SELECT r FROM fast_keys) ? partition_key"""
    sql.append(fast_ok_sql(limits, running_rows, starts_rows))
    # The full rule, run only when the fast path fails: rule step 1 for every partition, each
    # count once per claim as JSON objects keyed by partition (see _candidates_sql);
    # full_keys: the partitions that take no job (step 2).
    sql.append(f""",
        running AS (
            SELECT {partition_sql(cpart, 'r')} AS pkey, count(*) AS n,
                   count(*) FILTER (WHERE {mine_sql.format(client=b.p(claim.client_id))}) AS mine
            FROM {t}river_job r
            WHERE r.state = 'running' AND r.queue = {b.p(claim.queue)}::text
            GROUP BY 1
        ),
        counts AS MATERIALIZED (
            SELECT coalesce(jsonb_object_agg(pkey, n), '{{}}') AS n,
                   coalesce(jsonb_object_agg(pkey, mine) FILTER (WHERE mine > 0), '{{}}') AS mine,
                   coalesce(jsonb_object_agg(pkey, true)
                            FILTER (WHERE {' OR '.join(full) or 'false'}), '{{}}') AS full_keys
            FROM running
        )""")
    if rate:
        sql.append(f""",
        recent AS (
            SELECT partition_key AS rkey, count(*) AS n FROM {t}river_py_job_start
            WHERE queue = {b.p(claim.queue)}::text
              AND {window.format(now=b.p(now), period=b.p(limits.rate_period_ms))}
            GROUP BY 1
        ),
        rcounts AS MATERIALIZED (
            SELECT coalesce(jsonb_object_agg(rkey, n), '{{}}') AS n,
                   coalesce(jsonb_object_agg(rkey, true)
                            FILTER (WHERE n >= {int(limits.rate_allowed or 0)}), '{{}}') AS full_keys
            FROM recent
        )""")
    counted = {"n": _count("counts", "n", "c.ckey"), "mine": _count("counts", "mine", "c.ckey"),
               "starts": _count("rcounts", "n", "c.rkey") if rate else "0"}
    sql.append(f""",
        candidates AS ({_candidates_sql(d, b, intent, limits, scan)}
        ),{ranked_sql(counted)},{chosen_sql(limits, b.p(claim.limit) + "::integer")},
        updated AS (
            -- By primary key: the state compared as text so that no plan can look the ids up
            -- in the (state, queue, ...) index instead (stale statistics chose that: a second
            -- per claim), nor hash the whole table (the plain claim's plan on large batches).
            UPDATE {t}river_job j
            {claim_set_sql(b, claim, CLOCK)}
            WHERE j.id = ANY(ARRAY(SELECT id FROM chosen)) AND j.state::text = 'available'
            RETURNING j.*, {partition_sql(flow.rate_partition, 'j')} AS py_rkey
        )""")
    if rate:
        keep_ms = start_retention(limits.rate_period or timedelta(0)) // timedelta(milliseconds=1)
        sql.append(f""",
        pruned AS (
            DELETE FROM {t}river_py_job_start
            WHERE queue = {b.p(claim.queue)}::text
              AND started_at <= {b.p(now)}::timestamptz
                                - {b.p(keep_ms)} * interval '1 millisecond'
        ),
        started AS (
            INSERT INTO {t}river_py_job_start (queue, partition_key, started_at, job_id)
            SELECT {b.p(claim.queue)}::text, py_rkey, {b.p(now)}::timestamptz, id FROM updated
        )""")
    sql.append(f"""
        SELECT {pg_job_columns('updated')} FROM updated""")
    rows = yield Statement("".join(sql), tuple(b.params), binary=True)
    return job_rows(rows)


def _table_exists(d: Any) -> Plan[bool]:
    return table_exists(d, "river_py_queue_limit")


def _set_queue_limits(d: Any, intent: SetQueueLimits) -> Plan[None]:
    if not (yield from _table_exists(d)):
        raise missing_line(intent.queue)
    lim, b = intent.limits, binder()
    cpart, rpart = partitions_json(intent)
    yield Statement(f"""
        INSERT INTO {d.prefix}river_py_queue_limit AS l
            (queue, global_limit, local_limit, rate_allowed, rate_period_ms,
             concurrency_partition, rate_partition, updated_at)
        VALUES ({b.p(intent.queue)}, {b.p(lim.global_limit)}::integer, {b.p(lim.local_limit)}::integer,
                {b.p(lim.rate_allowed)}::integer, {b.p(lim.rate_period_ms)}::bigint,
                {b.p(cpart)}::jsonb, {b.p(rpart)}::jsonb, now())
{UPSERT_SET}
    """, tuple(b.params), fetch=False)
    return None


def _list_queue_limits(d: Any, intent: ListQueueLimits) -> Plan[list[QueueLimitRow]]:
    columns = ("concurrency_partition::text", "rate_partition::text")
    return list_limits_plan(d.prefix, columns, _table_exists(d), lambda value: value)


def _busiest(d: Any, intent: BusiestPartitions) -> Plan[list[PartitionUsage]]:
    return busiest_plan(d.prefix, "%s", partition_sql(intent.partition, "r"), intent)


def _update_queue_limits(d: Any, intent: UpdateQueueLimits) -> Plan[None]:
    return update_limits_plan(d.prefix, "%s", "now()", intent, _table_exists(d))


def _flow_status(d: Any, intent: GetFlowStatus) -> Plan[list[QueueFlowStatus]]:
    return flow_status_plan(d, intent, _list_queue_limits, _busiest, "%s")


PLANNERS: dict[type, Planner] = {
    ClaimLimitedJobs: _claim_limited,
    SetQueueLimits: _set_queue_limits,
    ListQueueLimits: _list_queue_limits,
    BusiestPartitions: _busiest,
    UpdateQueueLimits: _update_queue_limits,
    GetFlowStatus: _flow_status,
}
