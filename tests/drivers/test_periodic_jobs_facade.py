"""``client.periodic_jobs``: the facade both drivers share (river_sync.leadership.PeriodicJobs)."""

from __future__ import annotations

import pytest

from river_db.periodic_jobs import PeriodicJobs
from river_protocol.errors import ValidationError
from river_protocol.leadership import PeriodicJob


class FakeDriver:
    def __init__(self) -> None:
        self.jobs: dict[int, PeriodicJob] = {}

    def add_periodic(self, jobs: tuple[PeriodicJob, ...]) -> list[int]:
        start = len(self.jobs)
        self.jobs.update({start + i: job for i, job in enumerate(jobs)})
        return list(range(start, start + len(jobs)))

    def remove_periodic(self, *, handle: int | None = None, periodic_id: str | None = None) -> bool:
        return self.jobs.pop(handle, None) is not None if handle is not None else False

    def periodic_handles(self) -> tuple[tuple[int, PeriodicJob], ...]:
        return tuple(self.jobs.items())


def test_add_checks_every_item_before_registering() -> None:
    driver = FakeDriver()
    facade = PeriodicJobs(driver)
    with pytest.raises(ValidationError, match="expected a PeriodicJob, got str"):
        facade.add_many(["not a job"])  # type: ignore[list-item]
    assert len(facade) == 0


def test_clear_removes_every_handle() -> None:
    driver = FakeDriver()
    facade = PeriodicJobs(driver)
    driver.jobs = {0: object(), 1: object()}  # type: ignore[dict-item]
    facade.clear()
    assert len(facade) == 0
