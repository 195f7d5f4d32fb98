"""Postgres plans for the ``river_leader`` row: elect, reelect, resign (announced
on the leadership channel in the same statement) and read (docs/protocol.md §10).
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.postgres.fragments import binder, channel_sql, now_sql
from river_protocol.dialects.rows import LEADER_COLUMNS, leader_row
from river_protocol.intents import (
    GetLeader,
    Intent,
    LeaderElect,
    LeaderReelect,
    LeaderResign,
    LeaderRow,
    Statement,
)


def _leader_elect(d: Any, intent: LeaderElect) -> Plan[LeaderRow | None]:
    b = binder()
    yield Statement(
        f"DELETE FROM {d.prefix}river_leader WHERE expires_at < {now_sql(b, intent.now)}",
        tuple(b.params),
        fetch=False,
    )
    b = binder()
    sql = f"""
        INSERT INTO {d.prefix}river_leader (leader_id, elected_at, expires_at)
        VALUES ({b.p(intent.leader_id)}::text, {now_sql(b, intent.now)},
                {now_sql(b, intent.now)} + make_interval(secs => {b.p(intent.ttl.total_seconds())}))
        ON CONFLICT (name) DO NOTHING
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_reelect(d: Any, intent: LeaderReelect) -> Plan[LeaderRow | None]:
    b = binder()
    sql = f"""
        UPDATE {d.prefix}river_leader
        SET expires_at = {now_sql(b, intent.now)} + make_interval(secs => {b.p(intent.ttl.total_seconds())})
        WHERE elected_at = {b.p(intent.elected_at)}::timestamptz
          AND expires_at >= {now_sql(b, intent.now)}
          AND leader_id = {b.p(intent.leader_id)}::text
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_resign(d: Any, intent: LeaderResign) -> Plan[bool]:
    b = binder()
    sql = f"""
        WITH held AS (
            SELECT name, leader_id FROM {d.prefix}river_leader
            WHERE elected_at = {b.p(intent.elected_at)}::timestamptz
              AND leader_id = {b.p(intent.leader_id)}::text
            FOR UPDATE
        ),
        announced AS (
            SELECT name, pg_notify({channel_sql(d, b, "river_leadership")},
                                   json_build_object('leader_id', leader_id,
                                                     'action', 'resigned')::text)
            FROM held
        ),
        deleted AS (
            DELETE FROM {d.prefix}river_leader l USING announced a WHERE l.name = a.name RETURNING 1
        )
        SELECT count(*) FROM deleted
    """
    rows = yield Statement(sql, tuple(b.params))
    return int(rows[0][0]) > 0


def _get_leader(d: Any, intent: GetLeader) -> Plan[LeaderRow | None]:
    rows = yield Statement(f"SELECT {LEADER_COLUMNS} FROM {d.prefix}river_leader")
    return leader_row(rows[0]) if rows else None


PLANNERS: dict[type[Intent], Planner] = {
    LeaderElect: _leader_elect,
    LeaderReelect: _leader_reelect,
    LeaderResign: _leader_resign,
    GetLeader: _get_leader,
}
