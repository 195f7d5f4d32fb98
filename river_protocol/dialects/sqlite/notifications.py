"""SQLite plans for notifications: an outbox table that listeners poll
(docs/protocol.md §12.5), since SQLite has no LISTEN/NOTIFY.
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.rows import NOTIFICATION_COLUMNS, notification_row
from river_protocol.dialects.sqlite.fragments import LIMIT_PARAM, json_list
from river_protocol.intents import (
    FetchNotifications,
    Intent,
    MaxNotificationId,
    NotificationRow,
    Notify,
    Statement,
)


def _notify(d: Any, intent: Notify) -> Plan[None]:
    if not intent.payloads:
        return None
    # The outbox stores the bare topic (§12.5); the schema is the database itself.
    yield Statement(
        f"INSERT INTO {d.prefix}river_notification (topic, payload)"
        " SELECT ?, value FROM json_each(?)",
        (intent.topic, json_list(intent.payloads)),
        fetch=False,
    )
    return None


def _fetch_notifications(d: Any, intent: FetchNotifications) -> Plan[list[NotificationRow]]:
    rows = yield Statement(
        f"SELECT {NOTIFICATION_COLUMNS} FROM {d.prefix}river_notification"
        f" WHERE id > ? ORDER BY id LIMIT {LIMIT_PARAM}",
        (intent.after_id, intent.limit),
    )
    return [notification_row(r) for r in rows]


def _max_notification_id(d: Any, intent: MaxNotificationId) -> Plan[int]:
    rows = yield Statement(f"SELECT coalesce(max(id), 0) FROM {d.prefix}river_notification")
    return int(rows[0][0])


PLANNERS: dict[type[Intent], Planner] = {
    Notify: _notify,
    FetchNotifications: _fetch_notifications,
    MaxNotificationId: _max_notification_id,
}
