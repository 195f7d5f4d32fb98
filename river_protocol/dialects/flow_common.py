"""What both dialects' flow-control plans share: the limits row, the partition JSON, and the
conditions of the rule (river_protocol.flow_control) that read the same in either SQL."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from river_protocol.dialects.base import Plan
from river_protocol.errors import MigrationError
from river_protocol.flow_control import PartitionConfig, QueueLimits
from river_protocol.flow_intents import (
    MIGRATE_HINT,
    BusiestPartitions,
    GetFlowStatus,
    ListQueueLimits,
    PartitionUsage,
    QueueFlowStatus,
    QueueLimitRow,
    SetQueueLimits,
    UpdateQueueLimits,
)
from river_protocol.intents import Statement

LIMIT_COLUMNS = "global_limit, local_limit, rate_allowed, rate_period_ms"
ORDER = "priority, scheduled_at, id"
ORDER_C = "c.priority, c.scheduled_at, c.id"
UPSERT_SET = """
        ON CONFLICT (queue) DO UPDATE SET
            global_limit = excluded.global_limit, local_limit = excluded.local_limit,
            rate_allowed = excluded.rate_allowed, rate_period_ms = excluded.rate_period_ms,
            concurrency_partition = excluded.concurrency_partition,
            rate_partition = excluded.rate_partition, updated_at = excluded.updated_at"""


def limits_from_row(row: tuple[Any, ...]) -> QueueLimits:
    """``LIMIT_COLUMNS`` of a ``river_py_queue_limit`` row."""
    period = None if row[3] is None else timedelta(milliseconds=int(row[3]))
    return QueueLimits(global_limit=row[0], local_limit=row[1], rate_allowed=row[2], rate_period=period)


def partition_from_json(value: Any) -> PartitionConfig:
    data = json.loads(value) if isinstance(value, str | bytes) else (value or {})
    return PartitionConfig(by_kind=bool(data.get("by_kind", False)), by_args=tuple(data.get("by_args", ())))


def partitions_json(intent: SetQueueLimits) -> tuple[str, str]:
    """The concurrency and rate partitions of ``intent`` as JSON text, for display."""
    return (json.dumps((intent.concurrency_partition or PartitionConfig()).as_json()),
            json.dumps((intent.rate_partition or PartitionConfig()).as_json()))


def missing_line(queue: str) -> MigrationError:
    return MigrationError(
        f"queue {queue!r} has flow control limits, which need this project's `python`"
        f" migration line: {MIGRATE_HINT}")


def full_conditions(limits: QueueLimits) -> list[str]:
    """When a partition of the ``running`` CTE takes no more jobs (rule step 2)."""
    out = [f"running.n >= {int(limits.global_limit)}"] if limits.global_limit is not None else []
    return out + ([f"running.mine >= {int(limits.local_limit)}"] if limits.local_limit is not None else [])


def take_conditions(limits: QueueLimits) -> str:
    """Which ranked candidates are taken (rule step 4), ``true`` with no limit at all."""
    take = [f"n + crn <= {int(limits.global_limit)}"] if limits.global_limit is not None else []
    take += [f"mine + crn <= {int(limits.local_limit)}"] if limits.local_limit is not None else []
    take += [f"starts + rrn <= {int(limits.rate_allowed)}"] if limits.rate_allowed is not None else []
    return " AND ".join(take) or "true"


def ranked_sql(counted: dict[str, str], joins: str = "") -> str:
    """The ``ranked`` CTE (rule step 3) over ``candidates c``: each one's ranks and its
    partitions' counts (``counted``: the dialect's expressions for n, mine and starts, reading
    the tables ``joins`` brings in, if any)."""
    return f"""
        ranked AS (
            SELECT c.id, c.priority, c.scheduled_at, c.rkey,
                   row_number() OVER (PARTITION BY c.ckey ORDER BY {ORDER_C}) AS crn,
                   row_number() OVER (PARTITION BY c.rkey ORDER BY {ORDER_C}) AS rrn,
                   {counted['n']} AS n, {counted['mine']} AS mine, {counted['starts']} AS starts
            FROM candidates c {joins}
        )"""


def fast_ok_sql(limits: QueueLimits, running_rows: str, starts_rows: str) -> str:
    """The ``fast_ok`` CTE: whether every row of ``fast`` (the first min(limit, scan) available
    jobs, before any full partition is left out) fits its partitions' limits with all the rows
    of ``fast`` ahead of it. Then none of those partitions is full, so ``fast`` is exactly the
    first candidates, each one's ranks are at most its partition's count in ``fast``, and the
    rule (flow_control's docstring) takes exactly ``fast``: the claim needs neither every
    partition's counts nor the full scan's ranks. The usual case while limits do not bind.

    ``running_rows``: the dialect's SELECT of (ckey, 0, 1, mine) per running job of a
    partition in ``fast``; ``starts_rows``: of (rkey, 0, 1) per recorded start of a rate
    partition in ``fast``. Added to ``fast``'s own rows and summed per partition, no join, so
    no plan that stale statistics could make quadratic. Both are rendered before this text
    and appear in it in that order, as their placeholders were bound."""
    checks = []
    over = [f"sum(cand) + sum(n) > {int(limits.global_limit)}"] if limits.global_limit is not None else []
    over += [f"sum(cand) + sum(mine) > {int(limits.local_limit)}"] if limits.local_limit is not None else []
    if over:
        checks.append(f"""NOT EXISTS (
                SELECT 1 FROM (
                    SELECT ckey, 1 AS cand, 0 AS n, 0 AS mine FROM fast
                    UNION ALL{running_rows}
                ) AS u
                GROUP BY ckey HAVING {' OR '.join(over)})""")
    if limits.rate_allowed is not None:
        checks.append(f"""NOT EXISTS (
                SELECT 1 FROM (
                    SELECT rkey, 1 AS cand, 0 AS n FROM fast
                    UNION ALL{starts_rows}
                ) AS u
                GROUP BY rkey HAVING sum(cand) + sum(n) > {int(limits.rate_allowed)})""")
    return f"""
        fast_ok AS (
            SELECT {' AND '.join(checks) or 'true'} AS ok
        )"""


def ranked_chosen_sql(limits: QueueLimits, limit: str, gate: str = "") -> str:
    """The ``chosen`` CTE of the full scan (rule step 4): the first ``limit`` ranked candidates
    that pass (``gate``: a condition on the whole branch, leading ``AND``)."""
    return f"""
        chosen AS (
            SELECT id, rkey FROM ranked
            WHERE {take_conditions(limits)}{gate}
            ORDER BY {ORDER}
            LIMIT {limit}
        )"""


def chosen_sql(limits: QueueLimits, limit: str) -> str:
    """The ``chosen`` CTE in one statement: ``fast`` when it all passes, else the first
    ``limit`` ranked candidates that pass. Each branch is gated by ``fast_ok`` alone, which
    Postgres checks before running the branch, so the ranked one (the scan of ``scan_size``
    candidates) runs only when the fast one fails."""
    slow = ranked_chosen_sql(limits, limit, " AND NOT (SELECT ok FROM fast_ok)").replace(
        "chosen AS (", "slow AS (", 1)
    return f"""{slow},
        chosen AS (
            SELECT id, rkey FROM fast WHERE (SELECT ok FROM fast_ok)
            UNION ALL
            SELECT id, rkey FROM slow
        )"""


def update_limits_plan(
    prefix: str, ph: str, now_sql: str, intent: UpdateQueueLimits, table_exists: Plan[bool],
) -> Plan[None]:
    """The numbers of ``intent.queue``'s row, its partitions kept (both dialects: ``ph`` is the
    placeholder, ``now_sql`` the database's clock). One upsert, so two changes racing on a queue
    with no row yet both succeed (an update, then an insert, let the second insert collide)."""
    if not (yield from table_exists):
        raise missing_line(intent.queue)
    lim = intent.limits
    numbers = (lim.global_limit, lim.local_limit, lim.rate_allowed, lim.rate_period_ms)
    yield Statement(
        f"INSERT INTO {prefix}river_py_queue_limit ({LIMIT_COLUMNS}, queue, updated_at)"
        f" VALUES ({', '.join([ph] * 5)}, {now_sql})"
        " ON CONFLICT (queue) DO UPDATE SET global_limit = excluded.global_limit,"
        " local_limit = excluded.local_limit, rate_allowed = excluded.rate_allowed,"
        " rate_period_ms = excluded.rate_period_ms, updated_at = excluded.updated_at",
        (*numbers, intent.queue), fetch=False)
    return None


def list_limits_plan(
    prefix: str, partition_columns: tuple[str, str], table_exists: Plan[bool], read_time: Any,
) -> Plan[list[QueueLimitRow]]:
    """Every ``river_py_queue_limit`` row (``[]`` without the table); ``partition_columns`` read
    the two partitions as JSON text, ``read_time`` turns a stored ``updated_at`` into a datetime."""
    if not (yield from table_exists):
        return []
    rows = yield Statement(
        f"SELECT queue, {LIMIT_COLUMNS}, {partition_columns[0]}, {partition_columns[1]}, updated_at"
        f" FROM {prefix}river_py_queue_limit ORDER BY queue")
    return [QueueLimitRow(r[0], limits_from_row(r[1:5]), partition_from_json(r[5]), partition_from_json(r[6]),
                          read_time(r[7])) for r in rows]


def busiest_plan(prefix: str, ph: str, key_sql: str, intent: BusiestPartitions) -> Plan[list[PartitionUsage]]:
    """The ``intent.top`` partitions (``key_sql``: the key of a row ``r``) with most running jobs."""
    rows = yield Statement(f"""
        SELECT {key_sql} AS pkey, count(*) AS n
        FROM {prefix}river_job r
        WHERE r.state = 'running' AND r.queue = {ph}
        GROUP BY 1 ORDER BY n DESC, pkey LIMIT {ph}
    """, (intent.queue, intent.top))
    return [PartitionUsage(str(r[0]), int(r[1])) for r in rows]


def flow_status_plan(
    d: Any, intent: GetFlowStatus, list_limits: Any, busiest: Any, ph: str,
) -> Plan[list[QueueFlowStatus]]:
    """``GetFlowStatus`` from the dialect's own ``ListQueueLimits`` and ``BusiestPartitions`` plans."""
    rows: list[QueueLimitRow] = yield from list_limits(d, ListQueueLimits())
    running = f"SELECT count(*) FROM {d.prefix}river_job WHERE state = 'running' AND queue = {ph}"
    out = []
    for row in rows:
        count = yield Statement(running, (row.queue,))
        top: list[PartitionUsage] = yield from busiest(
            d, BusiestPartitions(row.queue, row.concurrency_partition, intent.top))
        out.append(QueueFlowStatus(row.queue, row.limits, row.concurrency_partition, row.rate_partition,
                                   row.updated_at, int(count[0][0]), tuple(top)))
    return out
