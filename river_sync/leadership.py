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

from river_db.leader_base import ELECTOR_STOP_WAIT, SERVICE_STOP_WAIT, LeaderBase
from river_protocol.client_core import ClientCore
from river_protocol.leadership import LeadershipOutput, PeriodicJob, ServicesStarted
from river_protocol.leadership import Start as ElectorStart
from river_protocol.machines import maintenance as mnt
from river_protocol.machines import periodic as periodic_machine
from river_protocol.machines.base import Stop
from river_sync.database import Database
from river_sync.runner import MachineRunner, utcnow

log = logging.getLogger(__name__)

__all__ = ["ELECTOR_STOP_WAIT", "SERVICE_STOP_WAIT", "LeaderDriver"]


class LeaderDriver(LeaderBase):
    """Runs the elector (clients with queues and leader election) and, while leading, the services."""

    _log = log
    _runner: MachineRunner | None
    _services: dict[str, MachineRunner]
    _enqueuer: MachineRunner | None

    def __init__(
        self, core: ClientCore, database: Database, periodic_jobs: Sequence[PeriodicJob] = ()
    ) -> None:
        super().__init__(core, periodic_jobs)
        self._db = database
        self._lock = threading.Lock()  # the registry and the service runners
        self._guard = self._lock
        self._leading = threading.Condition()

    # ---------------------------------------------------------------- lifecycle

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
        self._report(out)
        if out.start_services is not None:
            error = self._start_services()
            assert self._runner is not None
            self._runner.post(ServicesStarted(out.start_services, error), urgent=True)
        self._settle(out, self._notify_leading)

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
                self._enqueuer = MachineRunner(enqueuer, self._enqueuer_database(self._db),
                                               name="periodic-enqueuer", on_output=self._on_periodic_output)
                self._enqueuer.start(periodic_machine.Start())
        except Exception as exc:  # the machine undoes the partial start and retries
            return exc
        return None

    def _stop_services(self) -> None:
        runners = self._take_runners()
        for runner in runners:
            # Behind what is queued, not ahead: the enqueuer may hold a periodic-job change,
            # which its machine would refuse once stopped (the registry keeps it for next term).
            runner.post(Stop())
            runner.finish()
        deadline = utcnow().timestamp() + SERVICE_STOP_WAIT
        for runner in runners:
            if not runner.done.wait(max(deadline - utcnow().timestamp(), 0.0)):
                log.warning("river: %s is still running a statement after leadership ended", runner.name)
