"""Postgres plans for ``river_py_lease`` (the python migration line): take or renew a lease,
give it up, and read it (for operators). Expiry is the database's clock, so clients on hosts
whose clocks differ agree.
"""

from __future__ import annotations

from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.postgres.fragments import binder, table_exists
from river_protocol.dialects.rows import lease_read
from river_protocol.intents import GetLease, HoldLease, Intent, LeaseRead, ReleaseLease, Statement


def _table_exists(d: Any) -> Plan[bool]:
    return table_exists(d, "river_py_lease")


def _hold_lease(d: Any, intent: HoldLease) -> Plan[bool | None]:
    if not (yield from _table_exists(d)):
        return None
    b = binder()
    # The conflict update runs only for its holder or over an expired lease; otherwise no row
    # comes back. Contenders queue on the row's lock, and each sees the winner's row.
    rows = yield Statement(f"""
        INSERT INTO {d.prefix}river_py_lease AS l (name, holder, held_since, expires_at)
        VALUES ({b.p(intent.name)}::text, {b.p(intent.holder)}::text, now(),
                now() + make_interval(secs => {b.p(intent.ttl.total_seconds())}))
        ON CONFLICT (name) DO UPDATE
        SET holder = excluded.holder, expires_at = excluded.expires_at,
            held_since = CASE WHEN l.holder = excluded.holder THEN l.held_since ELSE excluded.held_since END
        WHERE l.holder = excluded.holder OR l.expires_at < now()
        RETURNING l.holder
    """, tuple(b.params))
    return bool(rows)


def _release_lease(d: Any, intent: ReleaseLease) -> Plan[bool]:
    if not (yield from _table_exists(d)):
        return False
    b = binder()
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_py_lease WHERE name = {b.p(intent.name)}::text "
        f"AND holder = {b.p(intent.holder)}::text RETURNING 1",
        tuple(b.params),
    )
    return bool(rows)


def _get_lease(d: Any, intent: GetLease) -> Plan[LeaseRead]:
    rows = yield Statement("SELECT to_regclass(%s) IS NOT NULL, now()", (f"{d.prefix}river_py_lease",))
    exists, read_at = bool(rows[0][0]), rows[0][1]
    if not exists:
        return lease_read(intent.name, read_at, None, table_exists=False)
    rows = yield Statement(
        f"SELECT holder, held_since, expires_at FROM {d.prefix}river_py_lease WHERE name = %s::text",
        (intent.name,),
    )
    return lease_read(intent.name, read_at, rows[0] if rows else None)


PLANNERS: dict[type[Intent], Planner] = {
    HoldLease: _hold_lease,
    ReleaseLease: _release_lease,
    GetLease: _get_lease,
}
