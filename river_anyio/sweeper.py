"""The workflow sweeper's runner: one machine (``river_protocol.machines.workflow_sweeper``)
on every client that works jobs, whoever leads River and whether this client takes part in
River's elections or not. The machine decides everything (the lease, when to sweep, its
fallback without the python line); this module starts it, logs what it reports, and stops it
(the stop gives the lease up, so another client takes it at its next check).
"""

from __future__ import annotations

import logging
from typing import Any

from river_anyio.database import AsyncDatabase
from river_anyio.runner import MachineRunner
from river_db.leader_base import SERVICE_STOP_WAIT
from river_protocol.client_core import ClientCore
from river_protocol.machines import maintenance as mnt
from river_protocol.machines.base import Stop
from river_protocol.machines.workflow_sweeper import SweeperOutput

if True:  # ASYNC
    import anyio
    import anyio.abc

log = logging.getLogger(__name__)

__all__ = ["SweeperDriver"]


class SweeperDriver:
    """Starts and stops the workflow sweeper of one client."""

    def __init__(self, core: ClientCore) -> None:
        self._core = core
        self._runner: MachineRunner | None = None
        self.sweeping = False  # whether this client is the sweeper now (for tests and logs)

    @property
    def enabled(self) -> bool:
        return self._core.runs_workflow_sweeper

    if True:  # ASYNC
        async def start(self, nursery: anyio.abc.TaskGroup, database: AsyncDatabase) -> None:
            if not self.enabled or self._runner is not None:
                return
            self._runner = MachineRunner(self._core.make_workflow_sweeper(), database,
                                         name="workflow-sweeper", on_output=self._on_output)
            await nursery.start(self._runner.run, mnt.Start())
    else:
        def start(self, database: AsyncDatabase) -> None:
            if not self.enabled or self._runner is not None:
                return
            self._runner = MachineRunner(self._core.make_workflow_sweeper(), database,
                                         name="workflow-sweeper", on_output=self._on_output)
            self._runner.start(mnt.Start())

    async def stop(self) -> None:
        """Stop the sweeper; its lease, if it holds it, is given up on the way."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        runner.post(Stop())
        runner.finish()
        if True:  # ASYNC
            with anyio.move_on_after(SERVICE_STOP_WAIT):
                await runner.done.wait()
            if not runner.done.is_set():
                log.warning("river: %s is still running a statement at stop; cancelling it", runner.name)
                runner.cancel()
                if runner.started:
                    await runner.done.wait()
        else:
            if not runner.done.wait(SERVICE_STOP_WAIT):
                log.warning("river: %s is still running a statement at stop", runner.name)
        self.sweeping = False

    def _on_output(self, out: Any) -> None:
        assert isinstance(out, SweeperOutput)
        if out.sweeping != self.sweeping:
            self.sweeping = out.sweeping
            log.info("river: %s %s the workflow sweeper", self._core.config.client_id,
                     "is now" if out.sweeping else "is no longer")
        for notice in out.notices:
            # Info, not warning: every client without the python line says it once, and most
            # of them run no workflows; docs/guides/workflows.md says when it matters.
            log.info("%s", notice)
        for run in out.runs:
            if run.error is not None:
                log.warning("river: workflow_sweeper run failed: %s", run.error)
