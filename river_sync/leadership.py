"""Threads for leadership: the elector, and the leader-only services while this client leads.

Every rule lives in ``river_protocol.leadership`` (when to start and stop
services, start retries, request_resign) and in the machines; this module only
runs them. The ``Leadership`` machine runs on one ``MachineRunner``; when it
says ``start_services`` each maintenance service and the periodic enqueuer get
a runner of their own (fresh machines per term); ``stop_services`` is acted on
inside the output hook, i.e. before the runner executes the resign that may
come in the same output, so a new leader never overlaps our services by more
than a statement that was already running.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from river_db.periodic_jobs import PeriodicJobs
from river_protocol.client_core import ClientCore
from river_protocol.leadership import (
    Leadership,
    LeadershipOutput,
    PeriodicJob,
    PeriodicRegistry,
    ServicesStarted,
)
from river_protocol.leadership import Start as ElectorStart
from river_protocol.machines import maintenance as mnt
from river_protocol.machines import periodic as periodic_machine
from river_protocol.machines.base import Event, Stop
from river_protocol.machines.elector import LeadershipNotification
from river_protocol.machines.notifications import TOPIC_LEADERSHIP, parse_leadership
from river_sync.database import Database
from river_sync.runner import MachineRunner, utcnow

log = logging.getLogger(__name__)

SERVICE_STOP_WAIT = 10.0  # seconds to wait for a service's statement in flight when leadership ends
ELECTOR_STOP_WAIT = 20.0  # the resign gets up to 3 attempts (1 + 2 + 3 s) plus back-off


class LeaderDriver:
    """Runs the elector (clients with queues and leader election) and, while leading, the services."""

    def __init__(
        self, core: ClientCore, database: Database, periodic_jobs: Sequence[PeriodicJob] = ()
    ) -> None:
        self._core = core
        self._db = database
        self._lock = threading.Lock()  # the registry and the service runners
        self._registry = PeriodicRegistry(core.periodic_definition)
        self._registry.add_many(tuple(periodic_jobs))
        self._machine: Leadership | None = None
        self._runner: MachineRunner | None = None
        self._services: dict[str, MachineRunner] = {}
        self._enqueuer: MachineRunner | None = None
        self._leading = threading.Condition()
        self.terms = 0  # terms won by this client (for logs and tests)
        self.periodic_jobs = PeriodicJobs(self)

    # ---------------------------------------------------------------- lifecycle

    @property
    def enabled(self) -> bool:
        return self._core.runs_elector

    @property
    def is_leader(self) -> bool:
        return self._machine is not None and self._machine.is_leader

    def wait_leader(self, value: bool = True, timeout: float | None = None) -> bool:
        """Block until this client's leadership equals ``value`` (or the timeout passes)."""
        with self._leading:
            return self._leading.wait_for(lambda: self.is_leader == value, timeout)

    def start(self) -> None:
        if not self.enabled:
            return
        self._machine = self._core.make_leadership()
        self._runner = MachineRunner(self._machine, self._db, name="elector", on_output=self._on_output)
        self._runner.start(ElectorStart())

    def on_notification(self, topic: str, payload: str) -> None:
        if topic != TOPIC_LEADERSHIP or self._runner is None:
            return
        message = parse_leadership(payload)
        if message is not None:
            self._runner.post(LeadershipNotification(message))

    def stop(self, timeout: float = ELECTOR_STOP_WAIT) -> None:
        """Step down (services first, then the resign) and end the elector's thread."""
        runner = self._runner
        if runner is not None and not runner.done.is_set():
            runner.post(Stop())
            if not runner.done.wait(timeout):
                log.warning("river: the elector did not stop within %.0f s", timeout)
        self.close()

    def close(self) -> None:
        """End every thread this driver started (after ``stop``, or when a start failed)."""
        self._stop_services()
        if self._runner is not None:
            self._runner.finish()
            self._runner.join(ELECTOR_STOP_WAIT)
        self._notify_leading()

    # ---------------------------------------------------------------- the elector's output

    def _on_output(self, out: LeadershipOutput) -> None:
        # Runs on the elector's thread before this output's intents: stopping here precedes the resign.
        if out.stop_services:
            self._stop_services()
        if out.lost_leadership:
            log.info("river: %s lost leadership", self._core.config.client_id)
        if out.start_error is not None:
            log.error("river: maintenance services failed to start: %s", out.start_error)
        if out.resign_requested:
            log.error("river: maintenance services failed to start repeatedly; requesting resignation")
        if out.became_leader:
            self.terms += 1
            log.info("river: %s became leader", self._core.config.client_id)
        if out.start_services is not None:
            error = self._start_services()
            assert self._runner is not None
            self._runner.post(ServicesStarted(out.start_services, error), urgent=True)
        if out.stopped and self._runner is not None:
            self._runner.finish()
        if out.became_leader or out.lost_leadership or out.stopped:
            self._notify_leading()

    def _notify_leading(self) -> None:
        with self._leading:
            self._leading.notify_all()

    # ---------------------------------------------------------------- services

    def _start_services(self) -> BaseException | None:
        try:
            machines = self._core.make_maintenance_services()
            with self._lock:
                for name, machine in machines.items():
                    runner = MachineRunner(machine, self._db, name=f"maintenance-{name}",
                                           on_output=self._service_hook(name))
                    self._services[name] = runner
                    runner.start(mnt.Start())
                enqueuer = self._core.make_periodic_enqueuer(self._registry.start_term())
                self._enqueuer = MachineRunner(enqueuer, self._db, name="periodic-enqueuer",
                                               on_output=self._on_periodic_output)
                self._enqueuer.start(periodic_machine.Start())
        except Exception as exc:  # the machine undoes the partial start and retries
            return exc
        return None

    def _stop_services(self) -> None:
        with self._lock:
            runners = list(self._services.values())
            if self._enqueuer is not None:
                runners.append(self._enqueuer)
            self._services, self._enqueuer = {}, None
            self._registry.end_term()
        for runner in runners:
            runner.post(Stop(), urgent=True)
            runner.finish()
        deadline = utcnow().timestamp() + SERVICE_STOP_WAIT
        for runner in runners:
            if not runner.done.wait(max(deadline - utcnow().timestamp(), 0.0)):
                log.warning("river: %s is still running a statement after leadership ended", runner.name)

    def _service_hook(self, name: str) -> Any:
        def hook(out: mnt.MaintenanceOutput) -> None:
            for run in out.runs:
                if run.error is not None:
                    log.warning("river: %s run failed: %s", name, run.error)
                else:
                    log.debug("river: %s ran %d batch(es)", name, run.batches)

        return hook

    def _on_periodic_output(self, out: periodic_machine.PeriodicOutput) -> None:
        for periodic_id, error in out.constructor_errors:
            log.error("river: periodic job %r could not be built: %s", periodic_id or "(no id)", error)

    # ---------------------------------------------------------------- periodic jobs

    def add_periodic(self, jobs: tuple[PeriodicJob, ...]) -> list[int]:
        with self._lock:
            handles, event = self._registry.add_many(jobs)
            self._post_enqueuer(event)
        return list(handles)

    def remove_periodic(self, *, handle: int | None = None, periodic_id: str | None = None) -> bool:
        with self._lock:
            if handle is not None:
                found, event = self._registry.remove(handle)
            else:
                assert periodic_id is not None
                found, event = self._registry.remove_by_id(periodic_id)
            self._post_enqueuer(event)
        return found

    def periodic_handles(self) -> tuple[tuple[int, PeriodicJob], ...]:
        with self._lock:
            return self._registry.jobs

    def _post_enqueuer(self, event: Event | None) -> None:
        if event is not None and self._enqueuer is not None:
            self._enqueuer.post(event)
