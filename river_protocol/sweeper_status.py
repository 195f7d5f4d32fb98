"""Which client sweeps workflows now, for operators: ``client.workflows.sweeper()`` and
``river workflows sweeper`` read the workflow sweeper's lease (``river_py_lease``, the python
migration line; ``river_protocol.machines.workflow_sweeper``) and River's leader, and say it
here, the same way on every client and both databases.

The lease row records who took it and when, and when it lapses; every renewal moves the
lapse on, so a lease that has not lapsed at the database's now is being renewed. Without the
python line there is no lease: the sweep falls back to River's leader when it is a Python
client, which this read cannot tell from a Go client, so it names the leader and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from river_protocol.intents import GetLeader, GetLease, LeaderRow, LeaseRead
from river_protocol.machines.workflow_sweeper import LEASE_NAME


@dataclass(frozen=True, slots=True)
class SweeperStatus:
    """The workflow sweeper's lease as the database holds it (times are the database's)."""

    line_applied: bool  # False: no river_py_lease table (run `river migrate-up --line python`)
    holder: str | None  # the client id in the lease row, lapsed or not; None: no row
    held_since: datetime | None  # when that client took the lease (its renewals keep this)
    expires_at: datetime | None  # when it lapses unless renewed (each renewal moves it on)
    read_at: datetime  # the database's clock at the read, which expiry is counted by
    river_leader: str | None = None  # River's leader now (any language), None when none leads

    @property
    def held(self) -> bool:
        """Whether a client holds the lease now (a row that has not lapsed)."""
        return self.holder is not None and self.expires_at is not None and self.expires_at > self.read_at

    @property
    def sweeper(self) -> str | None:
        """The id of the client sweeping by the lease now; None when no lease is held."""
        return self.holder if self.held else None

    def describe(self) -> str:
        """One line for a person: who sweeps, since when, until when, or why nobody does."""
        leader = f"River's leader is {self.river_leader}" if self.river_leader else "no client leads River"
        if not self.line_applied:
            return ("no workflow sweeper lease: the python migration line is not applied (run "
                    "`river migrate-up --line python`); River's leader sweeps when it is a Python "
                    f"client ({leader})")
        if self.holder is None or self.held_since is None or self.expires_at is None:
            return ("nobody holds the workflow sweeper lease: no Python client that works jobs is "
                    "running, or the last one stopped; the next one to check takes it")
        taken = _at(self.held_since)
        if not self.held:
            return (f"the workflow sweeper lease of {self.holder} (taken {taken}) lapsed "
                    f"{_seconds(self.read_at - self.expires_at)} ago, at {_at(self.expires_at)}; "
                    "the next Python client to check takes it over")
        return (f"{self.holder} sweeps workflows: lease taken {taken}, renewed until "
                f"{_at(self.expires_at)} (in {_seconds(self.expires_at - self.read_at)})")


def sweeper_status_intents() -> tuple[GetLease, GetLeader]:
    """The reads behind ``SweeperStatus``, run in order in one executor."""
    return GetLease(LEASE_NAME), GetLeader()


def sweeper_status(lease: LeaseRead, leader: LeaderRow | None) -> SweeperStatus:
    """``SweeperStatus`` from the answers to ``sweeper_status_intents()``."""
    row = lease.row
    return SweeperStatus(
        line_applied=lease.table_exists,
        holder=row.holder if row is not None else None,
        held_since=row.held_since if row is not None else None,
        expires_at=row.expires_at if row is not None else None,
        read_at=lease.read_at,
        river_leader=leader.leader_id if leader is not None and leader.expires_at > lease.read_at else None,
    )


def _at(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _seconds(span: timedelta) -> str:
    return f"{span.total_seconds():.1f} s"


__all__ = ["SweeperStatus", "sweeper_status", "sweeper_status_intents"]
