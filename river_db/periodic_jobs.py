"""``client.periodic_jobs``: the facade both drivers' clients hand out (it does no I/O)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from river_protocol.errors import ValidationError
from river_protocol.leadership import PeriodicJob


class PeriodicDriver(Protocol):
    """The registry side of either driver's ``LeaderDriver``."""

    def add_periodic(self, jobs: tuple[PeriodicJob, ...]) -> list[int]: ...

    def remove_periodic(self, *, handle: int | None = None, periodic_id: str | None = None) -> bool: ...

    def periodic_handles(self) -> tuple[tuple[int, PeriodicJob], ...]: ...


class PeriodicJobs:
    """``client.periodic_jobs``: add or remove periodic jobs at any time (Go's PeriodicJobBundle).

    Only the leader enqueues; definitions added while this client follows
    take effect when it wins. Handles are this client's own. No I/O, so the
    trio client has the very same plain methods.
    """

    def __init__(self, driver: PeriodicDriver) -> None:
        self._driver = driver

    def add(self, job: PeriodicJob) -> int:
        return self.add_many((job,))[0]

    def add_many(self, jobs: Iterable[PeriodicJob]) -> list[int]:
        given = tuple(jobs)
        for job in given:
            if not isinstance(job, PeriodicJob):
                raise ValidationError(f"expected a PeriodicJob, got {type(job).__name__}")
        return self._driver.add_periodic(given)

    def remove(self, handle: int) -> bool:
        """True when the handle was registered."""
        return self._driver.remove_periodic(handle=handle)

    def remove_by_id(self, periodic_id: str) -> bool:
        return self._driver.remove_periodic(periodic_id=periodic_id)

    def clear(self) -> None:
        for handle, _ in self._driver.periodic_handles():
            self.remove(handle)

    def __len__(self) -> int:
        return len(self._driver.periodic_handles())
