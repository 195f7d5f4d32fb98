"""The running jobs of one client and what happens to a run that outlives its timeout.

Shared by both clients: ``river_sync`` runs every worker in a thread and
``river_anyio`` runs sync workers in threads, and a thread cannot be killed.
At a run's job timeout its token is set; a worker that ignores it keeps its
thread and its queue slot until it returns. If it is still running at
``ClientCore.stuck_after(timeout)`` (Go: timeout + 10 s) it is *stuck*: logged
once more and counted. The drivers only arrange to be called at those two
moments; whether a run is still there, what is counted and what is logged is
decided here, once.

Not thread-safe by itself: ``river_sync`` calls it under its client lock,
``river_anyio`` from its event loop's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from river_db.client_support import ClientStats
from river_protocol.client_core import JobPlan
from river_protocol.work import CancelCause


@dataclass(eq=False, slots=True, weakref_slot=True)
class JobRun:
    """One attempt of one job in this client, from its claim until its outcome is handed on."""

    queue: str
    plan: JobPlan
    token: Any  # the driver's CancellationToken
    started_at: datetime
    ctx: Any = None  # the driver's WorkContext, once the worker is called
    stuck: bool = False
    thread: Any = None  # the thread running it, where it runs in one
    deadline_slot: int | None = None  # its deadline bucket (sync watchdog) while it has a deadline


class RunTable:
    """The client's runs by job id, with the counters ``client.stats()`` reports."""

    __slots__ = ("_log", "_runs", "stuck", "timed_out")

    def __init__(self, log: logging.Logger) -> None:
        self._log = log  # the driver's, so its log settings cover these warnings
        self._runs: dict[int, JobRun] = {}
        self.timed_out = 0  # runs whose token was set by their job timeout
        self.stuck = 0  # runs still going at stuck_after(timeout)

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[JobRun]:
        return iter(list(self._runs.values()))

    def get(self, job_id: int) -> JobRun | None:
        return self._runs.get(job_id)

    def add(self, run: JobRun) -> None:
        self._runs[run.plan.job.id] = run

    def forget(self, run: JobRun) -> bool:
        """Drop ``run`` if it is still the current run of its job; True when no run is left
        (the caller's ``not table``, without a call of ``__len__``)."""
        runs, job_id = self._runs, run.plan.job.id
        if runs.get(job_id) is run:
            del runs[job_id]
        return not runs

    def is_current(self, run: JobRun) -> bool:
        """False once the run has finished (a later attempt of the same job may have taken its id)."""
        return self._runs.get(run.plan.job.id) is run

    def stats(self) -> ClientStats:
        return ClientStats(
            running=len(self._runs), timed_out=self.timed_out, stuck=self.stuck,
            # A copy first: a health check reads this from another thread than an async client's.
            stuck_now=sum(1 for r in list(self._runs.values()) if r.stuck),
        )

    def timeout_reached(self, run: JobRun) -> bool:
        """The run's job timeout has passed: set its token. True when the stuck check should follow.

        The first cause wins: a run already cancelled for another reason is not
        counted as timed out, but it is still watched for being stuck.
        """
        if not self.is_current(run):
            return False
        if run.token.cancel(CancelCause.TIMEOUT):
            self.timed_out += 1
            self._log.warning("river: job %d (%s) exceeded its timeout of %s; its token is set",
                              run.plan.job.id, run.plan.job.kind, run.plan.timeout)
        return True

    def stuck_reached(self, run: JobRun) -> bool:
        """``stuck_after(timeout)`` has passed: True (and logged, counted) if the run is stuck."""
        if not self.is_current(run) or run.stuck:
            return False
        run.stuck = True
        self.stuck += 1
        self._log.warning("river: job %d (%s) is stuck: still running well past its timeout; a thread can't "
                          "be killed, so it keeps its queue slot until its worker returns",
                          run.plan.job.id, run.plan.job.kind)
        return True

