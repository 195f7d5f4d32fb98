"""The run table both clients keep: which runs are current, and the timeout / stuck accounting."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest

from river_db.client_support import ClientStats
from river_db.job_runs import JobRun, RunTable
from river_db.testing.builder import build_job
from river_protocol.client_core import JobPlan
from river_protocol.work import CancelCause

LOG = logging.getLogger("tests.job_runs")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Args:
    kind: ClassVar[str] = "runs"


class Token:
    def __init__(self) -> None:
        self.cause: CancelCause | None = None

    def cancel(self, cause: CancelCause) -> bool:
        if self.cause is not None:
            return False
        self.cause = cause
        return True


def run(job_id: int) -> JobRun:
    job = build_job(Args(), id=job_id)
    plan = JobPlan(job, None, Args(), timedelta(seconds=1), None, True)
    return JobRun("default", plan, Token(), NOW)


def test_add_get_forget_and_a_later_attempt_of_the_same_job() -> None:
    table = RunTable(LOG)
    first = run(1)
    table.add(first)
    assert table.get(1) is first and len(table) == 1 and list(table) == [first]
    again = run(1)  # the same job claimed again after its slot was given back
    table.add(again)
    assert table.forget(first) is False  # a stale forget must not drop the newer run
    assert table.get(1) is again and not table.is_current(first)
    assert table.forget(again) is True  # True: no run is left
    assert len(table) == 0 and table.get(1) is None
    assert table.forget(again) is True
    other = run(2)
    table.add(other)
    table.add(run(3))
    assert table.forget(other) is False and len(table) == 1


def test_timeout_sets_the_token_and_counts_once(caplog: pytest.LogCaptureFixture) -> None:
    table = RunTable(LOG)
    r = run(1)
    table.add(r)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert table.timeout_reached(r) is True
        assert table.timeout_reached(r) is True  # still watched, not counted twice
    assert r.token.cause is CancelCause.TIMEOUT and table.timed_out == 1
    assert [rec.name for rec in caplog.records] == [LOG.name]
    assert "job 1 (runs) exceeded its timeout of 0:00:01" in caplog.records[0].getMessage()


def test_a_run_cancelled_first_is_not_timed_out_but_may_be_stuck() -> None:
    table = RunTable(LOG)
    r = run(1)
    table.add(r)
    r.token.cancel(CancelCause.REMOTE_CANCEL)
    assert table.timeout_reached(r) is True
    assert table.timed_out == 0 and r.token.cause is CancelCause.REMOTE_CANCEL
    assert table.stuck_reached(r) is True
    assert table.stats() == ClientStats(running=1, timed_out=0, stuck=1, stuck_now=1)


def test_stuck_is_counted_once_and_stuck_now_drops_when_it_returns(caplog: pytest.LogCaptureFixture) -> None:
    table = RunTable(LOG)
    r, other = run(1), run(2)
    table.add(r)
    table.add(other)
    table.timeout_reached(r)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert table.stuck_reached(r) is True
        assert table.stuck_reached(r) is False
    assert len(caplog.records) == 1 and "job 1 (runs) is stuck" in caplog.records[0].getMessage()
    assert table.stats() == ClientStats(running=2, timed_out=1, stuck=1, stuck_now=1)
    table.forget(r)
    assert table.stats() == ClientStats(running=1, timed_out=1, stuck=1, stuck_now=0)


def test_a_finished_run_is_neither_timed_out_nor_stuck() -> None:
    table = RunTable(LOG)
    r = run(1)
    assert table.timeout_reached(r) is False and r.token.cause is None
    assert table.stuck_reached(r) is False
    assert table.stats() == ClientStats()
