"""Postgres plans for notifications: ``pg_notify`` on ``<schema>.<topic>``
(docs/protocol.md §12). The outbox intents belong to SQLite only and are refused here.
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.postgres.fragments import binder, channel_sql
from river_protocol.errors import ValidationError
from river_protocol.intents import FetchNotifications, Intent, MaxNotificationId, Notify, Statement


def _notify(d: Any, intent: Notify) -> Plan[None]:
    if not intent.payloads:
        return None
    b = binder()
    sql = f"""
        SELECT pg_notify({channel_sql(d, b, intent.topic)}, payload)
        FROM unnest({b.p(list(intent.payloads))}::text[]) AS payload
    """
    yield Statement(sql, tuple(b.params))
    return None


def _outbox_only(d: Any, intent: FetchNotifications | MaxNotificationId) -> Plan[Any]:
    raise ValidationError(
        f"{type(intent).__name__} reads the SQLite notification outbox; "
        "Postgres delivers notifications with LISTEN/NOTIFY"
    )
    yield  # pragma: no cover - makes this a generator


PLANNERS: dict[type[Intent], Planner] = {
    Notify: _notify,
    FetchNotifications: _outbox_only,
    MaxNotificationId: _outbox_only,
}
