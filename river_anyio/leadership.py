"""Leadership: the elector, and the leader-only services while this client leads.

Every rule lives in ``river_protocol.leadership`` (when to start and stop
services, start retries, request_resign) and in the machines; this module only
runs them. The ``Leadership`` machine runs on one ``MachineRunner`` (a task in
the client's nursery on the async clients, a thread on the threaded one); when
it says ``start_services`` each maintenance service and the periodic enqueuer
get a runner of their own (fresh machines per term). ``stop_services`` is acted
on inside the output hook, i.e. before the runner executes the resign that may
come in the same output, so a new leader never overlaps our services: on the
async clients a service still running a statement after ``SERVICE_STOP_WAIT``
is cancelled (the executor interrupts the statement and rolls it back); a
thread cannot be, so there the overlap is at most a statement that was already
running.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from river_anyio.database import AsyncDatabase
from river_anyio.runner import MachineRunner
from river_anyio.sweeper import SweeperDriver
from river_db.leader_base import ELECTOR_STOP_WAIT, SERVICE_STOP_WAIT, LeaderBase
from river_protocol.client_core import ClientCore
from river_protocol.leadership import LeadershipOutput, PeriodicJob, ServicesStarted
from river_protocol.leadership import Start as ElectorStart
from river_protocol.machines import maintenance as mnt
from river_protocol.machines import periodic as periodic_machine
from river_protocol.machines.base import Stop

if True:  # ASYNC
    import anyio
    import anyio.abc
else:
    import threading

    from river_anyio.runner import utcnow

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
        # Not a leader service: it runs on every client that works jobs, leader or not
        # (river_protocol.machines.workflow_sweeper), started and stopped with this driver.
        self.sweeper = SweeperDriver(core)
        if True:  # ASYNC
            self._db: AsyncDatabase | None = database
            self._nursery: anyio.abc.TaskGroup | None = None
            self._leading_changed = anyio.Event()
        else:
            self._db = database
            self._lock = threading.Lock()  # the registry and the service runners
            self._guard = self._lock
            self._leading = threading.Condition()

    # ---------------------------------------------------------------- lifecycle

    if True:  # ASYNC
        async def wait_leader(self, value: bool = True) -> None:
            """Wait until this client's leadership equals ``value`` (bound it with ``anyio.fail_after``)."""
            while self.is_leader != value:
                await self._leading_changed.wait()

        async def start(self, nursery: anyio.abc.TaskGroup, database: AsyncDatabase) -> None:
            self._db = database
            self._nursery = nursery
            await self.sweeper.start(nursery, database)
            if not self.enabled:
                return
            self._machine = self._core.make_leadership()
            self._runner = MachineRunner(self._machine, database, name="elector", on_output=self._on_output)
            await nursery.start(self._runner.run, ElectorStart())
    else:
        def wait_leader(self, value: bool = True, timeout: float | None = None) -> bool:
            """Block until this client's leadership equals ``value`` (or the timeout passes)."""
            with self._leading:
                return self._leading.wait_for(lambda: self.is_leader == value, timeout)

        def start(self) -> None:
            self.sweeper.start(self._db)
            if not self.enabled:
                return
            self._machine = self._core.make_leadership()
            self._runner = MachineRunner(self._machine, self._db, name="elector", on_output=self._on_output)
            self._runner.start(ElectorStart())

    async def stop(self, timeout: float = ELECTOR_STOP_WAIT) -> None:
        """Step down (services first, then the resign) and end the elector."""
        runner = self._runner
        if runner is not None and not runner.done.is_set():
            runner.post(Stop())
            if True:  # ASYNC
                with anyio.move_on_after(timeout):
                    await runner.done.wait()
                stopped = runner.done.is_set()
            else:
                stopped = runner.done.wait(timeout)
            if not stopped:
                log.warning("river: the elector did not stop within %.0f s", timeout)
        await self.close()

    async def close(self) -> None:
        """End every task or thread this driver started (after ``stop``, or when a start failed)."""
        await self.sweeper.stop()
        await self._stop_services()
        if self._runner is not None:
            self._runner.finish()
            if True:  # ASYNC
                if not self._runner.done.is_set():
                    self._runner.cancel()
                    if self._runner.started:
                        await self._runner.done.wait()
            else:
                self._runner.join(ELECTOR_STOP_WAIT)
        self._notify_leading()

    # ---------------------------------------------------------------- the elector's output

    async def _on_output(self, out: LeadershipOutput) -> None:
        # Run by the elector before this output's intents: stopping here precedes the resign.
        if out.stop_services:
            await self._stop_services()
        self._report(out)
        if out.start_services is not None:
            error = await self._start_services()
            assert self._runner is not None
            self._runner.post(ServicesStarted(out.start_services, error), urgent=True)
        self._settle(out, self._notify_leading)

    def _notify_leading(self) -> None:
        if True:  # ASYNC
            self._leading_changed.set()
            self._leading_changed = anyio.Event()
        else:
            with self._leading:
                self._leading.notify_all()

    # ---------------------------------------------------------------- services

    async def _start_services(self) -> BaseException | None:
        assert self._db is not None
        try:
            machines = self._core.make_maintenance_services()
            if True:  # ASYNC
                assert self._nursery is not None
                for name, machine in machines.items():
                    runner = MachineRunner(machine, self._db, name=f"maintenance-{name}",
                                           on_output=self._service_hook(name))
                    self._services[name] = runner
                    await self._nursery.start(runner.run, mnt.Start())
                enqueuer = self._core.make_periodic_enqueuer(self._registry.start_term())
                self._enqueuer = MachineRunner(enqueuer, self._enqueuer_database(self._db),
                                               name="periodic-enqueuer", on_output=self._on_periodic_output)
                await self._nursery.start(self._enqueuer.run, periodic_machine.Start())
            else:
                with self._lock:
                    for name, machine in machines.items():
                        runner = MachineRunner(machine, self._db, name=f"maintenance-{name}",
                                               on_output=self._service_hook(name))
                        self._services[name] = runner
                        runner.start(mnt.Start())
                    enqueuer = self._core.make_periodic_enqueuer(self._registry.start_term())
                    self._enqueuer = MachineRunner(
                        enqueuer, self._enqueuer_database(self._db), name="periodic-enqueuer",
                        on_output=self._on_periodic_output)
                    self._enqueuer.start(periodic_machine.Start())
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
        if True:  # ASYNC
            with anyio.move_on_after(SERVICE_STOP_WAIT):
                for runner in runners:
                    await runner.done.wait()
            for runner in runners:
                if not runner.done.is_set():
                    log.warning("river: %s is still running a statement after leadership ended; "
                                "cancelling it", runner.name)
                    runner.cancel()
                    if runner.started:
                        await runner.done.wait()
        else:
            deadline = utcnow().timestamp() + SERVICE_STOP_WAIT
            for runner in runners:
                if not runner.done.wait(max(deadline - utcnow().timestamp(), 0.0)):
                    log.warning("river: %s is still running a statement after leadership ended", runner.name)
