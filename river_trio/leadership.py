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

import trio

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
from river_trio.database import AsyncDatabase
from river_trio.runner import MachineRunner

log = logging.getLogger(__name__)

SERVICE_STOP_WAIT = 10.0  # seconds a service may finish its statement when leadership ends
ELECTOR_STOP_WAIT = 20.0  # the resign gets up to 3 attempts (1 + 2 + 3 s) plus back-off


class LeaderDriver:
    """Runs the elector (clients with queues and leader election) and, while leading, the services."""

    def __init__(
        self, core: ClientCore, database: Any, periodic_jobs: Sequence[PeriodicJob] = ()
    ) -> None:
        self._core = core
        self._db: AsyncDatabase | None = database
        self._registry = PeriodicRegistry(core.periodic_definition)
        self._registry.add_many(tuple(periodic_jobs))
        self._machine: Leadership | None = None
        self._runner: MachineRunner | None = None
        self._nursery: trio.Nursery | None = None
        self._services: dict[str, MachineRunner] = {}
        self._enqueuer: MachineRunner | None = None
        self._leading_changed = trio.Event()
        self.terms = 0
        self.periodic_jobs = PeriodicJobs(self)

    # ---------------------------------------------------------------- lifecycle

    @property
    def enabled(self) -> bool:
        return self._core.runs_elector

    @property
    def is_leader(self) -> bool:
        return self._machine is not None and self._machine.is_leader

    async def wait_leader(self, value: bool = True) -> None:
        """Wait until this client's leadership equals ``value`` (bound it with ``trio.fail_after``)."""
        while self.is_leader != value:
            await self._leading_changed.wait()

    async def start(self, nursery: trio.Nursery, database: AsyncDatabase) -> None:
        self._db = database
        self._nursery = nursery
        if not self.enabled:
            return
        self._machine = self._core.make_leadership()
        self._runner = MachineRunner(self._machine, database, name="elector", on_output=self._on_output)
        await nursery.start(self._runner.run, ElectorStart())

    def on_notification(self, topic: str, payload: str) -> None:
        if topic != TOPIC_LEADERSHIP or self._runner is None:
            return
        message = parse_leadership(payload)
        if message is not None:
            self._runner.post(LeadershipNotification(message))

    async def stop(self, timeout: float = ELECTOR_STOP_WAIT) -> None:
        """Step down (services first, then the resign) and end the elector's task."""
        runner = self._runner
        if runner is not None and not runner.done.is_set():
            runner.post(Stop())
            with trio.move_on_after(timeout):
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
            error = await self._start_services()
            assert self._runner is not None
            self._runner.post(ServicesStarted(out.start_services, error), urgent=True)
        if out.stopped and self._runner is not None:
            self._runner.finish()
        if out.became_leader or out.lost_leadership or out.stopped:
            self._notify_leading()

    def _notify_leading(self) -> None:
        self._leading_changed.set()
        self._leading_changed = trio.Event()

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
            self._enqueuer = MachineRunner(enqueuer, self._db, name="periodic-enqueuer",
                                           on_output=self._on_periodic_output)
            await self._nursery.start(self._enqueuer.run, periodic_machine.Start())
        except Exception as exc:  # the machine undoes the partial start and retries
            return exc
        return None

    async def _stop_services(self) -> None:
        runners = list(self._services.values())
        if self._enqueuer is not None:
            runners.append(self._enqueuer)
        self._services, self._enqueuer = {}, None
        self._registry.end_term()
        for runner in runners:
            runner.post(Stop(), urgent=True)
            runner.finish()
        with trio.move_on_after(SERVICE_STOP_WAIT):
            for runner in runners:
                await runner.done.wait()
        for runner in runners:
            if not runner.done.is_set():
                log.warning("river: %s is still running a statement after leadership ended; cancelling it",
                            runner.name)
                runner.cancel()
                if runner.started:
                    await runner.done.wait()

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
        handles, event = self._registry.add_many(jobs)
        self._post_enqueuer(event)
        return list(handles)

    def remove_periodic(self, *, handle: int | None = None, periodic_id: str | None = None) -> bool:
        if handle is not None:
            found, event = self._registry.remove(handle)
        else:
            assert periodic_id is not None
            found, event = self._registry.remove_by_id(periodic_id)
        self._post_enqueuer(event)
        return found

    def periodic_handles(self) -> tuple[tuple[int, PeriodicJob], ...]:
        return self._registry.jobs

    def _post_enqueuer(self, event: Event | None) -> None:
        if event is not None and self._enqueuer is not None:
            self._enqueuer.post(event)
