"""PeriodicJob definitions (no client): schedules, ids and options are checked when defined.

Periodic jobs running in a client (both drivers) are in ``behaviour/test_periodic.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from river_protocol.cron import EverySchedule, IntervalSchedule
from river_protocol.errors import CronParseError, ValidationError
from river_sync import PeriodicJob

FAST = timedelta(milliseconds=200)
HOUR = timedelta(hours=1)


def test_periodic_job_definition() -> None:
    assert isinstance(PeriodicJob("@every 2s", lambda: None).schedule, EverySchedule)
    assert PeriodicJob(FAST, lambda: None).schedule == IntervalSchedule(FAST)
    custom = IntervalSchedule(HOUR)
    assert PeriodicJob(custom, lambda: None).schedule is custom
    with pytest.raises(CronParseError):
        PeriodicJob("every minute", lambda: None)
    with pytest.raises(ValidationError, match="positive"):
        PeriodicJob(timedelta(0), lambda: None)
    with pytest.raises(ValidationError, match="should match regex"):
        PeriodicJob(FAST, lambda: None, id="has space")
    with pytest.raises(ValidationError, match="under 128"):
        PeriodicJob(FAST, lambda: None, id="x" * 128)
    with pytest.raises(ValidationError, match="InsertOpts"):
        PeriodicJob(FAST, lambda: None, opts={"queue": "q"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="callable"):
        PeriodicJob(FAST, "nope")  # type: ignore[arg-type]
