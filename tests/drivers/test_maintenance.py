"""MaintenanceConfig: validation, retention values, rescue_after following the job timeout.

The maintenance services running under a leader (both drivers) are in ``behaviour/test_maintenance.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import river_trio
from river_protocol.errors import ValidationError
from river_sync import Client, MaintenanceConfig, Migrator, Workers
from tests.drivers.leader_support import FAST_QUEUE
from tests.drivers.test_client_support import Task


def _workers() -> Workers:
    workers = Workers()
    workers.job(Task)(lambda args: None)
    return workers


@pytest.mark.parametrize(("field", "value"), [
    ("completed_retention", 5), ("cancelled_retention", "1h"), ("scheduler_interval", timedelta(0)),
    ("rescue_after", timedelta(seconds=-1)),
])
def test_maintenance_config_validation(field: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=field):
        MaintenanceConfig(**{field: value})


def test_maintenance_config_retention_values() -> None:
    config = MaintenanceConfig(completed_retention=None, cancelled_retention=-1,
                               discarded_retention=timedelta(minutes=3))
    assert config.retention("completed") < timedelta(0) and config.retention("cancelled") < timedelta(0)
    assert config.retention("discarded") == timedelta(minutes=3)
    assert MaintenanceConfig(reindexer_schedule="@daily").reindexer_schedule is not None


@pytest.mark.parametrize("driver", ["sync", "trio"])
def test_rescue_after_follows_the_job_timeout(tmp_path: Any, driver: str) -> None:
    path = str(tmp_path / "r.sqlite3")
    with Migrator(path) as migrator:  # a client opens no missing SQLite file
        migrator.migrate_up()

    def rescue_after(**kwargs: Any) -> timedelta:
        if driver == "trio":  # the constructor does no I/O
            return river_trio.Client(path, queues={"default": FAST_QUEUE}, workers=_workers(),
                                     **kwargs)._core.rescue_after()
        client = Client(path, queues={"default": FAST_QUEUE}, workers=_workers(), **kwargs)
        try:
            return client._core.rescue_after()
        finally:
            client.stop()

    assert rescue_after() == timedelta(hours=1)
    assert rescue_after(job_timeout=timedelta(minutes=5)) == timedelta(hours=1, minutes=5)
    assert rescue_after(maintenance=MaintenanceConfig(rescue_after=timedelta(seconds=7)),
                        job_timeout=timedelta(minutes=5)) == timedelta(seconds=7)
