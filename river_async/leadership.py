"""Tasks for leadership: the elector, and the leader-only services while this client leads.

Every rule lives in ``river_protocol.leadership`` and the machines; this
module only runs them, as ``river_sync.leadership`` does with threads. The
``Leadership`` machine runs on one ``MachineRunner`` task; when it says
``start_services`` each maintenance service and the periodic enqueuer get a
runner task of their own (fresh machines per term) in the client's nursery.
``stop_services`` is awaited inside the output hook, i.e. before the runner
executes the resign that may come in the same output: a service still running
a statement after ``SERVICE_STOP_WAIT`` is cancelled (the executor interrupts
the statement and rolls it back), so a new leader never overlaps our services.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.abc

from river_async.database import AsyncDatabase
from river_async.runner import MachineRunner
from river_db.leader_base import ELECTOR_STOP_WAIT, SERVICE_STOP_WAIT, LeaderBase
from river_protocol.client_core import ClientCore
from river_protocol.leadership import LeadershipOutput, PeriodicJob, ServicesStarted
from river_protocol.leadership import Start as ElectorStart
from river_protocol.machines import maintenance as mnt
from river_protocol.machines import periodic as periodic_machine
from river_protocol.machines.base import Stop

log = logging.getLogger(__name__)

__all__ = ["ELECTOR_STOP_WAIT", "SERVICE_STOP_WAIT", "LeaderDriver"]


class LeaderDriver(LeaderBase):
    """Runs the elector (clients with queues and leader election) and, while leading, the services."""

    _log = log
    _runner: MachineRunner | None
    _services: dict[str, MachineRunner]
    _enqueuer: MachineRunner | None

    def __init__(
        self, core: ClientCore, database: Any, periodic_jobs: Sequence[PeriodicJob] = ()
    ) -> None:
        super().__init__(core, periodic_jobs)
        self._db: AsyncDatabase | None = database
        self._nursery: anyio.abc.TaskGroup | None = None
        self._leading_changed = anyio.Event()

    # ---------------------------------------------------------------- lifecycle

    async def wait_leader(self, value: bool = True) -> None:
        """Wait until this client's leadership equals ``value`` (bound it with ``anyio.fail_after``)."""
        while self.is_leader != value:
            await self._leading_changed.wait()

    async def start(self, nursery: anyio.abc.TaskGroup, database: AsyncDatabase) -> None:
        self._db = database
        self._nursery = nursery
        if not self.enabled:
            return
        self._machine = self._core.make_leadership()
        self._runner = MachineRunner(self._machine, database, name="elector", on_output=self._on_output)
        await nursery.start(self._runner.run, ElectorStart())

    async def stop(self, timeout: float = ELECTOR_STOP_WAIT) -> None:
        """Step down (services first, then the resign) and end the elector's task."""
        runner = self._runner
        if runner is not None and not runner.done.is_set():
            runner.post(Stop())
            with anyio.move_on_after(timeout):
                await runner.done.wait()
            if not runner.done.is_set():
                log.warning("river: the elector did not stop within %.0f s", timeout)
        await self.close()

    async def close(self) -> None:
        """End every task this driver started."""
        await self._stop_services()
        if self._runner is not None:
            self._runner.finish()
            if not self._runner.done.is_set():
                self._runner.cancel()
                if self._runner.started:
                    await self._runner.done.wait()
        self._notify_leading()

    # ---------------------------------------------------------------- the elector's output

    async def _on_output(self, out: LeadershipOutput) -> None:
        # Awaited before this output's intents run: stopping here precedes the resign.
        if out.stop_services:
            await self._stop_services()
        self._report(out)
        if out.start_services is not None:
            error = await self._start_services()
            assert self._runner is not None
            self._runner.post(ServicesStarted(out.start_services, error), urgent=True)
        self._settle(out, self._notify_leading)

    def _notify_leading(self) -> None:
        self._leading_changed.set()
        self._leading_changed = anyio.Event()

    # ---------------------------------------------------------------- services

    async def _start_services(self) -> BaseException | None:
        assert self._nursery is not None and self._db is not None
        try:
            machines = self._core.make_maintenance_services()
            for name, machine in machines.items():
                runner = MachineRunner(machine, self._db, name=f"maintenance-{name}",
                                       on_output=self._service_hook(name))
                self._services[name] = runner
                await self._nursery.start(runner.run, mnt.Start())
            enqueuer = self._core.make_periodic_enqueuer(self._registry.start_term())
            self._enqueuer = MachineRunner(enqueuer, self._enqueuer_database(self._db),
                                           name="periodic-enqueuer", on_output=self._on_periodic_output)
            await self._nursery.start(self._enqueuer.run, periodic_machine.Start())
        except Exception as exc:  # the machine undoes the partial start and retries
            return exc
        return None

    async def _stop_services(self) -> None:
        runners = self._take_runners()
        for runner in runners:
            # Behind what is queued, not ahead: the enqueuer may hold a periodic-job change,
            # which its machine would refuse once stopped (the registry keeps it for next term).
            runner.post(Stop())
            runner.finish()
        with anyio.move_on_after(SERVICE_STOP_WAIT):
            for runner in runners:
                await runner.done.wait()
        for runner in runners:
            if not runner.done.is_set():
                log.warning("river: %s is still running a statement after leadership ended; cancelling it",
                            runner.name)
                runner.cancel()
                if runner.started:
                    await runner.done.wait()
