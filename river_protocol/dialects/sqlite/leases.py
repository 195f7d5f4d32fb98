"""SQLite plans for ``river_py_lease`` (the python migration line): take or renew a lease,
give it up, and read it (for operators). Times are River's canonical UTC text from SQLite's
clock, compared as strings.
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.rows import SQLITE_DB_NOW, lease_read
from river_protocol.dialects.sqlite.fragments import table_exists
from river_protocol.intents import GetLease, HoldLease, Intent, LeaseRead, ReleaseLease, Statement


def _table_exists(d: Any) -> Plan[bool]:
    return table_exists(d, "river_py_lease")


def _hold_lease(d: Any, intent: HoldLease) -> Plan[bool | None]:
    if not (yield from _table_exists(d)):
        return None
    ttl = f"{intent.ttl.total_seconds():.3f} seconds"
    # SQLite writes one transaction at a time: the check and the take are one statement.
    rows = yield Statement(f"""
        INSERT INTO {d.prefix}river_py_lease AS l (name, holder, held_since, expires_at)
        VALUES (?, ?, {SQLITE_DB_NOW}, datetime('now', 'subsec', ?))
        ON CONFLICT (name) DO UPDATE
        SET holder = excluded.holder, expires_at = excluded.expires_at,
            held_since = CASE WHEN l.holder = excluded.holder THEN l.held_since ELSE excluded.held_since END
        WHERE l.holder = excluded.holder OR l.expires_at < {SQLITE_DB_NOW}
        RETURNING holder
    """, (intent.name, intent.holder, ttl))
    return bool(rows)


def _release_lease(d: Any, intent: ReleaseLease) -> Plan[bool]:
    if not (yield from _table_exists(d)):
        return False
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_py_lease WHERE name = ? AND holder = ? RETURNING 1",
        (intent.name, intent.holder),
    )
    return bool(rows)


def _get_lease(d: Any, intent: GetLease) -> Plan[LeaseRead]:
    rows = yield Statement(
        f"SELECT EXISTS (SELECT 1 FROM {d.prefix}sqlite_master"
        f" WHERE type = 'table' AND name = 'river_py_lease'), {SQLITE_DB_NOW}")
    exists, read_at = bool(rows[0][0]), rows[0][1]
    if not exists:
        return lease_read(intent.name, read_at, None, table_exists=False)
    rows = yield Statement(
        f"SELECT holder, held_since, expires_at FROM {d.prefix}river_py_lease WHERE name = ?", (intent.name,))
    return lease_read(intent.name, read_at, rows[0] if rows else None)


PLANNERS: dict[type[Intent], Planner] = {
    HoldLease: _hold_lease,
    ReleaseLease: _release_lease,
    GetLease: _get_lease,
}
