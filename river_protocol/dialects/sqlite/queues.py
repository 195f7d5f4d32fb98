"""SQLite plans for ``river_queue`` rows: upsert by producers, pause and resume,
listing and removal (docs/protocol.md §13).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import json_text
from river_protocol.dialects.rows import SQLITE_QUEUE_COLUMNS, queue_row, sqlite_now
from river_protocol.dialects.sqlite.fragments import binder, json_list, limit_param
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
        VALUES ({b.p(intent.name)}, {sqlite_now(b, intent.now)},
                jsonb({b.p(json_text(intent.metadata or b"{}"))}), NULL, {sqlite_now(b, intent.now)})
        ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at
        RETURNING {SQLITE_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return queue_row(rows[0])


def _get_queue(d: Any, intent: GetQueue) -> Plan[QueueRow | None]:
    rows = yield Statement(
        f"SELECT {SQLITE_QUEUE_COLUMNS} FROM {d.prefix}river_queue WHERE name = ?", (intent.name,)
    )
    return queue_row(rows[0]) if rows else None


def _list_queues(d: Any, intent: ListQueues) -> Plan[list[QueueRow]]:
    b = binder()
    where = ["true"]
    if intent.after_name is not None:
        where.append(f"name > {b.p(intent.after_name)}")
    if intent.name_contains:
        where.append(f"instr(lower(name), lower({b.p(intent.name_contains)})) > 0")
    if intent.exclude:
        where.append(f"name NOT IN (SELECT value FROM json_each({b.p(json_list(intent.exclude))}))")
    sql = f"""
        SELECT {SQLITE_QUEUE_COLUMNS} FROM {d.prefix}river_queue
        WHERE {" AND ".join(where)} ORDER BY name LIMIT {limit_param(b, intent.limit)}
    """
    rows = yield Statement(sql, tuple(b.params))
    return [queue_row(r) for r in rows]


def _pause_or_resume(d: Any, name: str, now: datetime | None, pause: bool) -> Plan[int]:
    b = binder()
    if pause:
        assignments = (
            f"paused_at = coalesce(paused_at, {sqlite_now(b, now)}),"
            f" updated_at = CASE WHEN paused_at IS NULL THEN {sqlite_now(b, now)} ELSE updated_at END"
        )
    else:
        assignments = (
            "paused_at = NULL, updated_at = CASE WHEN paused_at IS NOT NULL"
            f" THEN {sqlite_now(b, now)} ELSE updated_at END"
        )
    target = "true" if name == "*" else f"name = {b.p(name)}"
    sql = f"UPDATE {d.prefix}river_queue SET {assignments} WHERE {target} RETURNING 1"
    count = len((yield Statement(sql, tuple(b.params))))
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
    # Each member is copied as its JSON text (->), so numbers keep their exact digits.
    if intent.metadata is None:
        metadata = "metadata"
    else:
        given = json_text(intent.metadata)
        metadata = (
            "jsonb((SELECT coalesce(json_group_object(m.key, json(m.doc -> m.fullkey)), '{}') FROM ("
            " SELECT kept.key, kept.fullkey, river_queue.metadata AS doc"
            " FROM json_each(river_queue.metadata) AS kept WHERE substr(kept.key, 1, 6) = 'river:'"
            f" UNION ALL SELECT new.key, new.fullkey, {b.p(given)} AS doc"
            f" FROM json_each({b.p(given)}) AS new) AS m))"
        )
    sql = f"""
        UPDATE {d.prefix}river_queue SET metadata = {metadata}, updated_at = {sqlite_now(b, None)}
        WHERE name = {b.p(intent.name)} RETURNING {SQLITE_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise QueueNotFoundError(f"queue {intent.name!r} not found")
    return queue_row(rows[0])


def _delete_queue(d: Any, intent: DeleteQueue) -> Plan[QueueRow]:
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_queue WHERE name = ? RETURNING {SQLITE_QUEUE_COLUMNS}",
        (intent.name,),
    )
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
