"""Postgres plans for ``river_queue`` rows: upsert by producers, pause and resume,
listing and removal (docs/protocol.md §13).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import json_text
from river_protocol.dialects.postgres.fragments import binder, now_sql
from river_protocol.dialects.rows import PG_QUEUE_COLUMNS, queue_row
from river_protocol.errors import QueueNotFoundError
from river_protocol.intents import (
    DeleteQueue,
    GetQueue,
    Intent,
    ListQueues,
    PauseQueue,
    QueueRow,
    ResumeQueue,
    Statement,
    UpdateQueue,
    UpsertQueue,
)


def _upsert_queue(d: Any, intent: UpsertQueue) -> Plan[QueueRow]:
    b = binder()
    sql = f"""
        INSERT INTO {d.prefix}river_queue (name, created_at, metadata, paused_at, updated_at)
        VALUES ({b.p(intent.name)}::text, {now_sql(b, intent.now)},
                {b.p(json_text(intent.metadata or b"{}"))}::jsonb, NULL, {now_sql(b, intent.now)})
        ON CONFLICT (name) DO UPDATE SET updated_at = EXCLUDED.updated_at
        RETURNING {PG_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return queue_row(rows[0])


def _get_queue(d: Any, intent: GetQueue) -> Plan[QueueRow | None]:
    b = binder()
    sql = f"SELECT {PG_QUEUE_COLUMNS} FROM {d.prefix}river_queue WHERE name = {b.p(intent.name)}::text"
    rows = yield Statement(sql, tuple(b.params))
    return queue_row(rows[0]) if rows else None


def _list_queues(d: Any, intent: ListQueues) -> Plan[list[QueueRow]]:
    b = binder()
    where = ["true"]
    if intent.after_name is not None:
        where.append(f"name > {b.p(intent.after_name)}::text")
    if intent.name_contains:
        where.append(f"strpos(lower(name), lower({b.p(intent.name_contains)}::text)) > 0")
    if intent.exclude:
        where.append(f"NOT (name = ANY({b.p(list(intent.exclude))}::text[]))")
    sql = f"""
        SELECT {PG_QUEUE_COLUMNS} FROM {d.prefix}river_queue
        WHERE {" AND ".join(where)} ORDER BY name LIMIT {b.p(intent.limit)}::bigint
    """
    rows = yield Statement(sql, tuple(b.params))
    return [queue_row(r) for r in rows]


def _pause_or_resume(d: Any, name: str, now: datetime | None, pause: bool) -> Plan[int]:
    b = binder()
    if pause:
        assignments = (
            f"paused_at = coalesce(paused_at, {now_sql(b, now)}),"
            f" updated_at = CASE WHEN paused_at IS NULL THEN {now_sql(b, now)} ELSE updated_at END"
        )
    else:
        assignments = (
            f"paused_at = NULL,"
            f" updated_at = CASE WHEN paused_at IS NOT NULL THEN {now_sql(b, now)} ELSE updated_at END"
        )
    target = "true" if name == "*" else f"name = {b.p(name)}::text"
    sql = f"""
        WITH changed AS (
            UPDATE {d.prefix}river_queue SET {assignments} WHERE {target} RETURNING 1
        )
        SELECT count(*) FROM changed
    """
    rows = yield Statement(sql, tuple(b.params))
    count = int(rows[0][0])
    if count == 0 and name != "*":
        raise QueueNotFoundError(f"queue {name!r} not found")
    return count


def _pause_queue(d: Any, intent: PauseQueue) -> Plan[int]:
    return (yield from _pause_or_resume(d, intent.name, intent.now, pause=True))


def _resume_queue(d: Any, intent: ResumeQueue) -> Plan[int]:
    return (yield from _pause_or_resume(d, intent.name, intent.now, pause=False))


def _update_queue(d: Any, intent: UpdateQueue) -> Plan[QueueRow]:
    b = binder()
    # River's own keys (under "river:") stay through a replacement; the new metadata has none.
    metadata = "metadata" if intent.metadata is None else (
        "(SELECT coalesce(jsonb_object_agg(kept.key, kept.value), '{}'::jsonb)"
        " FROM jsonb_each(metadata) AS kept WHERE left(kept.key, 6) = 'river:')"
        f" || {b.p(json_text(intent.metadata))}::jsonb"
    )
    sql = f"""
        UPDATE {d.prefix}river_queue SET metadata = {metadata}, updated_at = now()
        WHERE name = {b.p(intent.name)}::text RETURNING {PG_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise QueueNotFoundError(f"queue {intent.name!r} not found")
    return queue_row(rows[0])


def _delete_queue(d: Any, intent: DeleteQueue) -> Plan[QueueRow]:
    b = binder()
    sql = (
        f"DELETE FROM {d.prefix}river_queue WHERE name = {b.p(intent.name)}::text"
        f" RETURNING {PG_QUEUE_COLUMNS}"
    )
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise QueueNotFoundError(f"queue {intent.name!r} not found")
    return queue_row(rows[0])


PLANNERS: dict[type[Intent], Planner] = {
    UpsertQueue: _upsert_queue,
    GetQueue: _get_queue,
    ListQueues: _list_queues,
    PauseQueue: _pause_queue,
    ResumeQueue: _resume_queue,
    UpdateQueue: _update_queue,
    DeleteQueue: _delete_queue,
}
