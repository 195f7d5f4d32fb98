"""SQLite plans for ``river_py_lease`` (the python migration line): take or renew a lease,
and give it up. Times are River's canonical UTC text from SQLite's clock, compared as strings.
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.rows import SQLITE_DB_NOW
from river_protocol.intents import HoldLease, Intent, ReleaseLease, Statement


def _table_exists(d: Any) -> Plan[bool]:
    rows = yield Statement(
        f"SELECT EXISTS (SELECT 1 FROM {d.prefix}sqlite_master"
        " WHERE type = 'table' AND name = 'river_py_lease')")
    return bool(rows[0][0])


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


PLANNERS: dict[type[Intent], Planner] = {
    HoldLease: _hold_lease,
    ReleaseLease: _release_lease,
}
