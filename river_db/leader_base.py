"""What both drivers' ``LeaderDriver`` do alike: the periodic registry, reports and routing.

A driver's ``LeaderDriver`` runs the elector and, while leading, the services,
on threads (``river_sync``) or tasks (``river_anyio``); starting and stopping
those runners is where they differ. Registering periodic jobs, reading the
elector's output for what to log, routing leadership notifications and
reporting service runs does not wait and lives here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from river_db.insert_middleware import InsertMiddlewareDatabase
from river_db.periodic_jobs import PeriodicJobs
from river_protocol.client_core import ClientCore
from river_protocol.leadership import Leadership, LeadershipOutput, PeriodicJob, PeriodicRegistry
from river_protocol.machines import maintenance as mnt
from river_protocol.machines import periodic as periodic_machine
from river_protocol.machines.base import Event
from river_protocol.machines.elector import LeadershipNotification
from river_protocol.machines.notifications import TOPIC_LEADERSHIP, parse_leadership

SERVICE_STOP_WAIT = 10.0  # seconds a service may finish its statement when leadership ends
ELECTOR_STOP_WAIT = 20.0  # the resign gets up to 3 attempts (1 + 2 + 3 s) plus back-off


class LeaderBase:
    """The shared half of a ``LeaderDriver``; ``_guard`` covers the registry and the runners."""

    _log: ClassVar[logging.Logger]

    def __init__(self, core: ClientCore, periodic_jobs: Sequence[PeriodicJob] = ()) -> None:
        self._core = core
        self._guard: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        self._registry = PeriodicRegistry(core.periodic_definition)
        self._registry.add_many(tuple(periodic_jobs))
        self._machine: Leadership | None = None
        self._runner: Any = None
        self._services: dict[str, Any] = {}
        self._enqueuer: Any = None
        self.terms = 0  # terms won by this client (for logs and tests)
        self.periodic_jobs = PeriodicJobs(self)
        # The client's insert middleware (it sets them): periodic inserts pass through them too.
        self.insert_middleware: tuple[Callable[..., Any], ...] = ()

    @property
    def enabled(self) -> bool:
        return self._core.runs_elector

    @property
    def is_leader(self) -> bool:
        return self._machine is not None and self._machine.is_leader

    def on_notification(self, topic: str, payload: str) -> None:
        if topic != TOPIC_LEADERSHIP or self._runner is None:
            return
        message = parse_leadership(payload)
        if message is not None:
            self._runner.post(LeadershipNotification(message))

    # ---------------------------------------------------------------- the elector's output

    def _report(self, out: LeadershipOutput) -> None:
        """Log what the output says happened, and count a won term."""
        client_id = self._core.config.client_id
        if out.lost_leadership:
            self._log.info("river: %s lost leadership", client_id)
        if out.start_error is not None:
            self._log.error("river: maintenance services failed to start: %s", out.start_error)
        if out.resign_requested:
            self._log.error("river: maintenance services failed to start repeatedly; requesting resignation")
        if out.became_leader:
            self.terms += 1
            self._log.info("river: %s became leader", client_id)

    def _settle(self, out: LeadershipOutput, notify_leading: Callable[[], None]) -> None:
        """After the driver acted on ``out``: end a stopped elector, wake leadership waiters."""
        if out.stopped and self._runner is not None:
            self._runner.finish()
        if out.became_leader or out.lost_leadership or out.stopped:
            notify_leading()

    def _take_runners(self) -> list[Any]:
        """The services' and enqueuer's runners, handed over for stopping; the term ends."""
        with self._guard:
            runners = list(self._services.values())
            if self._enqueuer is not None:
                runners.append(self._enqueuer)
            self._services, self._enqueuer = {}, None
            self._registry.end_term()
        return runners

    def _service_hook(self, name: str) -> Callable[[mnt.MaintenanceOutput], None]:
        def hook(out: mnt.MaintenanceOutput) -> None:
            for run in out.runs:
                if run.error is not None:
                    self._log.warning("river: %s run failed: %s", name, run.error)
                else:
                    self._log.debug("river: %s ran %d batch(es)", name, run.batches)

        return hook

    def _enqueuer_database(self, database: Any) -> Any:
        """``database`` as the periodic enqueuer's runner uses it (a stand-in with its ``run`` and
        ``closed``): its inserts pass through the client's insert middleware, as the client's own do."""
        return InsertMiddlewareDatabase(database, self.insert_middleware)

    def _on_periodic_output(self, out: periodic_machine.PeriodicOutput) -> None:
        for periodic_id, error in out.constructor_errors:
            self._log.error("river: periodic job %r could not be built: %s", periodic_id or "(no id)", error)

    # ---------------------------------------------------------------- periodic jobs (PeriodicDriver)

    def add_periodic(self, jobs: tuple[PeriodicJob, ...]) -> list[int]:
        with self._guard:
            handles, event = self._registry.add_many(jobs)
            self._post_enqueuer(event)
        return list(handles)

    def remove_periodic(self, *, handle: int | None = None, periodic_id: str | None = None) -> bool:
        with self._guard:
            if handle is not None:
                found, event = self._registry.remove(handle)
            else:
                assert periodic_id is not None
                found, event = self._registry.remove_by_id(periodic_id)
            self._post_enqueuer(event)
        return found

    def periodic_handles(self) -> tuple[tuple[int, PeriodicJob], ...]:
        with self._guard:
            return self._registry.jobs

    def _post_enqueuer(self, event: Event | None) -> None:
        if event is not None and self._enqueuer is not None:
            self._enqueuer.post(event)
