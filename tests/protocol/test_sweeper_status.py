"""SweeperStatus: what client.workflows.sweeper() and `river workflows sweeper` say, from the
lease row, the database's clock and River's leader."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from river_protocol.intents import GetLeader, GetLease, LeaderRow, LeaseRead, LeaseRow
from river_protocol.machines.workflow_sweeper import LEASE_NAME
from river_protocol.sweeper_status import sweeper_status, sweeper_status_intents

NOW = datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
GO = LeaderRow(leader_id="go-1", elected_at=NOW - timedelta(minutes=5),
               expires_at=NOW + timedelta(seconds=10))


def _lease(holder: str, *, expires_in: timedelta) -> LeaseRead:
    row = LeaseRow(name=LEASE_NAME, holder=holder, held_since=NOW - timedelta(minutes=2),
                   expires_at=NOW + expires_in)
    return LeaseRead(read_at=NOW, table_exists=True, row=row)


def test_the_reads_are_the_sweepers_lease_and_rivers_leader() -> None:
    assert sweeper_status_intents() == (GetLease("workflow_sweeper"), GetLeader())


def test_a_held_lease_names_its_holder_and_its_times() -> None:
    status = sweeper_status(_lease("py-7", expires_in=timedelta(seconds=1.5)), GO)
    assert status.line_applied and status.held and status.sweeper == status.holder == "py-7"
    assert status.held_since == NOW - timedelta(minutes=2) and status.river_leader == "go-1"
    assert status.describe() == ("py-7 sweeps workflows: lease taken 2026-12-06T03:58:00.000Z, "
                                 "renewed until 2026-12-06T04:00:01.500Z (in 1.5 s)")


def test_a_lapsed_lease_is_not_held_and_says_since_when() -> None:
    # Expiry is counted by the database's clock at the read, never this process's.
    status = sweeper_status(_lease("py-7", expires_in=-timedelta(seconds=3)), None)
    assert not status.held and status.sweeper is None and status.holder == "py-7"
    assert status.describe() == (
        "the workflow sweeper lease of py-7 (taken 2026-12-06T03:58:00.000Z) lapsed 3.0 s ago, at "
        "2026-12-06T03:59:57.000Z; the next Python client to check takes it over")
    assert not sweeper_status(_lease("py-7", expires_in=timedelta(0)), None).held


def test_no_row_means_nobody_sweeps_by_the_lease() -> None:
    status = sweeper_status(LeaseRead(read_at=NOW, table_exists=True, row=None), GO)
    assert status.line_applied and status.holder is None and not status.held
    assert status.describe().startswith("nobody holds the workflow sweeper lease")


def test_without_the_python_line_the_answer_names_the_command_and_rivers_leader() -> None:
    missing = LeaseRead(read_at=NOW, table_exists=False, row=None)
    status = sweeper_status(missing, GO)
    assert not status.line_applied and status.holder is None and not status.held
    assert "`river migrate-up --line python`" in status.describe()
    assert status.describe().endswith("(River's leader is go-1)")
    # A leader row past its expiry leads nobody.
    lapsed = LeaderRow(leader_id="go-1", elected_at=GO.elected_at, expires_at=NOW - timedelta(seconds=1))
    status = sweeper_status(missing, lapsed)
    assert status.river_leader is None and status.describe().endswith("(no client leads River)")
