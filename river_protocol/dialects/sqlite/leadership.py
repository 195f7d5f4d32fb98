"""SQLite plans for the ``river_leader`` row: elect, reelect, resign and read
(docs/protocol.md §10). Expiry is left to SQLite's datetime(), trimmed to canonical text.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.rows import LEADER_COLUMNS, Binder, leader_row, sqlite_now
from river_protocol.dialects.sqlite.fragments import binder
from river_protocol.golang.gotime import format_sqlite_time
from river_protocol.intents import (
    GetLeader,
    Intent,
    LeaderElect,
    LeaderReelect,
    LeaderResign,
    LeaderRow,
    Statement,
)


def _ttl(ttl: timedelta) -> str:
    return f"{ttl.total_seconds():.3f} seconds"


def _expiry(b: Binder, now: datetime | None, ttl: timedelta) -> str:
    return f"datetime({sqlite_now(b, now)}, 'subsec', {b.p(_ttl(ttl))})"


def _leader_elect(d: Any, intent: LeaderElect) -> Plan[LeaderRow | None]:
    b = binder()
    yield Statement(
        f"DELETE FROM {d.prefix}river_leader WHERE expires_at < {sqlite_now(b, intent.now)}",
        tuple(b.params),
        fetch=False,
    )
    b = binder()
    sql = f"""
        INSERT INTO {d.prefix}river_leader (leader_id, elected_at, expires_at)
        VALUES ({b.p(intent.leader_id)}, {sqlite_now(b, intent.now)},
                {_expiry(b, intent.now, intent.ttl)})
        ON CONFLICT (name) DO NOTHING
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_reelect(d: Any, intent: LeaderReelect) -> Plan[LeaderRow | None]:
    b = binder()
    elected_at = format_sqlite_time(intent.elected_at)
    # elected_at matches as an instant at millisecond precision, whatever its text form (§10.1).
    sql = f"""
        UPDATE {d.prefix}river_leader SET expires_at = {_expiry(b, intent.now, intent.ttl)}
        WHERE unixepoch(elected_at, 'subsec') = unixepoch({b.p(elected_at)}, 'subsec')
          AND expires_at >= {sqlite_now(b, intent.now)}
          AND leader_id = {b.p(intent.leader_id)}
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_resign(d: Any, intent: LeaderResign) -> Plan[bool]:
    rows = yield Statement(
        f"""
        DELETE FROM {d.prefix}river_leader
        WHERE unixepoch(elected_at, 'subsec') = unixepoch(?, 'subsec') AND leader_id = ?
        RETURNING 1
        """,
        (format_sqlite_time(intent.elected_at), intent.leader_id),
    )
    return bool(rows)


def _get_leader(d: Any, intent: GetLeader) -> Plan[LeaderRow | None]:
    rows = yield Statement(f"SELECT {LEADER_COLUMNS} FROM {d.prefix}river_leader")
    return leader_row(rows[0]) if rows else None


PLANNERS: dict[type[Intent], Planner] = {
    LeaderElect: _leader_elect,
    LeaderReelect: _leader_reelect,
    LeaderResign: _leader_resign,
    GetLeader: _get_leader,
}
