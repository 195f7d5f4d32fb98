"""SQLite plans for flow control (river_protocol.flow_control, whose docstring states the rule).

The claim runs inside ``BEGIN IMMEDIATE``: it holds the database's write lock from its first
statement, so limited claims of every process are serialised and each reads what the one
before it committed. Start times are taken after the lock, so they are in claim order.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.flow_common import (
    ORDER,
    UPSERT_SET,
    busiest_plan,
    fast_ok_sql,
    flow_status_plan,
    full_conditions,
    limits_from_row,
    list_limits_plan,
    missing_line,
    partitions_json,
    ranked_chosen_sql,
    ranked_sql,
    update_limits_plan,
)
from river_protocol.dialects.rows import SQLITE_DB_NOW, Binder
from river_protocol.dialects.sqlite.fragments import (
    JOB_COLUMNS,
    binder,
    job_rows,
    json_list,
    sqlite_time,
    table_exists,
)
from river_protocol.dialects.sqlite.jobs import _claim_filters, claim_set_sql
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


def partition_sql(p: PartitionConfig, alias: str) -> str:
    """The partition key of a row of ``river_job`` as text (JSON array of the kind and args)."""
    parts = ([f"{alias}.kind"] if p.by_kind else []) + [f"{alias}.args -> '$.\"{a}\"'" for a in p.by_args]
    return f"json_array({', '.join(parts)})" if parts else "'[]'"


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _heads_sql(d: Any, b: Binder, queue: str) -> str:
    """The ``heads`` CTE: per sequence key, the first job (lowest id) not yet finished; only it
    may start. One pass over the queue's unfinished jobs, not one per candidate."""
    waits = ", ".join(f"'{s.value}'" for s in SEQUENCE_WAIT_STATES)
    return f""",
        heads AS (
            SELECT s.metadata ->> '$."{SEQUENCE_KEY}"' AS skey, min(s.id) AS head
            FROM {d.prefix}river_job s
            WHERE s.queue = {b.p(queue)} AND s.state IN ({waits})
              AND s.metadata ->> '$."{SEQUENCE_KEY}"' IS NOT NULL
            GROUP BY 1
        )"""


def _sequence_sql(d: Any) -> str:
    """A candidate of a sequence starts only as its head (an available job is unfinished, so it
    is its own sequence's head or behind it); one that says so also waits behind a discarded or
    cancelled job of its sequence."""
    return f"""
          AND (j.metadata ->> '$."{SEQUENCE_KEY}"' IS NULL OR j.id IN (SELECT head FROM heads))
          AND NOT (j.metadata ->> '$."{SEQUENCE_HALT}"' IS NOT NULL AND EXISTS (
              SELECT 1 FROM {d.prefix}river_job e
              WHERE e.queue = j.queue AND e.id < j.id AND e.state IN ('cancelled', 'discarded')
                AND e.metadata ->> '$."{SEQUENCE_KEY}"' = j.metadata ->> '$."{SEQUENCE_KEY}"'
                AND EXISTS (SELECT 1 FROM json_each(j.metadata -> '$."{SEQUENCE_HALT}"') h
                            WHERE h.value = e.state)))"""


def _candidates_sql(d: Any, b: Binder, intent: ClaimLimitedJobs, limits: QueueLimits, now: datetime,
                    size: int, leave_out_full: bool = True) -> str:
    """The first ``size`` candidates (rule step 2) in claim order, with their partition keys
    (``leave_out_full=False``: full partitions kept, for the fast path's check)."""
    claim, flow = intent.claim, intent.flow
    ckey, rkey = partition_sql(flow.concurrency_partition, "j"), partition_sql(flow.rate_partition, "j")
    full = full_conditions(limits) if leave_out_full else []
    sql = [f"""
            SELECT j.id, j.priority, j.scheduled_at, {ckey} AS ckey, {rkey} AS rkey
            FROM {d.prefix}river_job j
            WHERE state = 'available' AND queue = {b.p(claim.queue)} AND priority >= 0
              AND scheduled_at <= {b.p(sqlite_time(now))}{_claim_filters(b, claim)}"""]
    if full:
        sql.append(f"""
              AND {ckey} NOT IN (SELECT pkey FROM running WHERE {' OR '.join(full)})""")
    if leave_out_full and limits.rate_allowed is not None:
        sql.append(f"""
              AND {rkey} NOT IN (SELECT rkey FROM recent WHERE recent.n >= {int(limits.rate_allowed)})""")
    if flow.sequences:
        sql.append(_sequence_sql(d))
    sql.append(f"""
            ORDER BY {ORDER}
            LIMIT {b.p(size)}""")
    return "".join(sql)


def _claim_limited(d: Any, intent: ClaimLimitedJobs) -> Plan[list[JobRow]]:
    claim, flow = intent.claim, intent.flow
    if claim.limit <= 0:
        return []
    if claim.max_attempted_by < 1:
        raise ValidationError("max_attempted_by must be at least 1")
    t = d.prefix
    head = yield Statement(
        f"SELECT {SQLITE_DB_NOW}, l.queue, l.global_limit, l.local_limit, l.rate_allowed, l.rate_period_ms"
        f" FROM (SELECT 1) AS one LEFT JOIN {t}river_py_queue_limit l ON l.queue = ?", (claim.queue,))
    limits = limits_from_row(head[0][2:6]) if head[0][1] is not None else flow.limits
    now = claim.now or _time(head[0][0])
    rate = limits.rate_allowed is not None
    since = sqlite_time(now - limits.rate_period) if limits.rate_period is not None else None
    cpart, rkey = flow.concurrency_partition, flow.rate_partition
    mine_sql = "r.attempted_by ->> '$[#-1]' = {client}"

    def counts(b: Binder) -> str:
        """Rule step 1: the ``running`` (and ``recent``) CTEs, for every partition."""
        sql = [f""",
        running AS (
            SELECT {partition_sql(cpart, 'r')} AS pkey, count(*) AS n,
                   count(*) FILTER (WHERE {mine_sql.format(client=b.p(claim.client_id))}) AS mine
            FROM {t}river_job r
            WHERE r.state = 'running' AND r.queue = {b.p(claim.queue)}
            GROUP BY 1
        )"""]
        if rate:
            sql.append(f""",
        recent AS (
            SELECT partition_key AS rkey, count(*) AS n FROM {t}river_py_job_start
            WHERE queue = {b.p(claim.queue)} AND started_at > {b.p(since)}
            GROUP BY 1
        )""")
        return "".join(sql)

    def heads(b: Binder) -> str:
        return "WITH" + _heads_sql(d, b, claim.queue).lstrip(",") + "," if flow.sequences else "WITH"

    scan = scan_size(claim.limit)
    full = full_conditions(limits)
    # The fast path (fast_ok_sql) as a statement of its own: SQLite would build the ranks of
    # the full scan before reading a condition that makes them unneeded. Both statements run
    # under this transaction's write lock, so nothing changes between them.
    b = binder()
    sql = f"""
        {heads(b)}
        fast AS ({_candidates_sql(d, b, intent, limits, now, min(claim.limit, scan), leave_out_full=False)}
        ),"""
    running_rows = "" if not full else f"""
                    SELECT {partition_sql(cpart, 'r')}, 0, 1,
                           CASE WHEN {mine_sql.format(client=b.p(claim.client_id))} THEN 1 ELSE 0 END
                    FROM {t}river_job r
                    WHERE r.state = 'running' AND r.queue = {b.p(claim.queue)}
                      AND {partition_sql(cpart, 'r')} IN (SELECT ckey FROM fast)"""
    starts_rows = "" if not rate else f"""
                    SELECT partition_key, 0, 1 FROM {t}river_py_job_start
                    WHERE queue = {b.p(claim.queue)} AND started_at > {b.p(since)}
                      AND partition_key IN (SELECT rkey FROM fast)"""
    fast = yield Statement(f"""{sql}{fast_ok_sql(limits, running_rows, starts_rows)}
        SELECT (SELECT ok FROM fast_ok), (SELECT json_group_array(id) FROM fast)""", tuple(b.params))
    # SQLite's planner indexes a CTE it joins on the fly, so the full rule joins the counts.
    joins = ("LEFT JOIN running ON running.pkey = c.ckey"
             + (" LEFT JOIN recent ON recent.rkey = c.rkey" if rate else ""))
    counted = {"n": "coalesce(running.n, 0)", "mine": "coalesce(running.mine, 0)",
               "starts": "coalesce(recent.n, 0)" if rate else "0"}
    b = binder()  # placeholders in the order written: the WITH, the SET, then the WHERE
    sql = "" if fast[0][0] else f"""
        {heads(b)}{counts(b).lstrip(",")},
        candidates AS ({_candidates_sql(d, b, intent, limits, now, scan)}
        ),{ranked_sql(counted, joins)},{ranked_chosen_sql(limits, b.p(claim.limit))}"""
    sql += f"""
        UPDATE {t}river_job
        {claim_set_sql(b, claim)}"""
    chosen = f"SELECT value FROM json_each({b.p(fast[0][1])})" if fast[0][0] else "SELECT id FROM chosen"
    # By id (the unary + keeps SQLite from reading every available job in the state index).
    rows = job_rows((yield Statement(f"""{sql}
        WHERE id IN ({chosen}) AND +state = 'available'
        RETURNING {JOB_COLUMNS}""", tuple(b.params))))
    if rate and rows:
        horizon = sqlite_time(now - start_retention(limits.rate_period or timedelta(0)))
        yield Statement(f"DELETE FROM {t}river_py_job_start WHERE queue = ? AND started_at <= ?",
                        (claim.queue, horizon), fetch=False)
        yield Statement(
            f"INSERT INTO {t}river_py_job_start (queue, partition_key, started_at, job_id)"
            f" SELECT ?, {partition_sql(rkey, 'j')}, ?, j.id FROM {t}river_job j"
            " WHERE j.id IN (SELECT value FROM json_each(?))",
            (claim.queue, sqlite_time(now), json_list([r.id for r in rows])), fetch=False)
    return rows


def _table_exists(d: Any) -> Plan[bool]:
    return table_exists(d, "river_py_queue_limit")


def _set_queue_limits(d: Any, intent: SetQueueLimits) -> Plan[None]:
    if not (yield from _table_exists(d)):
        raise missing_line(intent.queue)
    lim = intent.limits
    cpart, rpart = partitions_json(intent)
    yield Statement(f"""
        INSERT INTO {d.prefix}river_py_queue_limit
            (queue, global_limit, local_limit, rate_allowed, rate_period_ms,
             concurrency_partition, rate_partition, updated_at)
        VALUES (?, ?, ?, ?, ?, jsonb(?), jsonb(?), {SQLITE_DB_NOW})
{UPSERT_SET}
    """, (intent.queue, lim.global_limit, lim.local_limit, lim.rate_allowed, lim.rate_period_ms,
          cpart, rpart), fetch=False)
    return None


def _list_queue_limits(d: Any, intent: ListQueueLimits) -> Plan[list[QueueLimitRow]]:
    columns = ("json(concurrency_partition)", "json(rate_partition)")
    return list_limits_plan(d.prefix, columns, _table_exists(d), _time)


def _busiest(d: Any, intent: BusiestPartitions) -> Plan[list[PartitionUsage]]:
    return busiest_plan(d.prefix, "?", partition_sql(intent.partition, "r"), intent)


def _update_queue_limits(d: Any, intent: UpdateQueueLimits) -> Plan[None]:
    return update_limits_plan(d.prefix, "?", SQLITE_DB_NOW, intent, _table_exists(d))


def _flow_status(d: Any, intent: GetFlowStatus) -> Plan[list[QueueFlowStatus]]:
    return flow_status_plan(d, intent, _list_queue_limits, _busiest, "?")


PLANNERS: dict[type, Planner] = {
    ClaimLimitedJobs: _claim_limited,
    SetQueueLimits: _set_queue_limits,
    ListQueueLimits: _list_queue_limits,
    BusiestPartitions: _busiest,
    UpdateQueueLimits: _update_queue_limits,
    GetFlowStatus: _flow_status,
}
