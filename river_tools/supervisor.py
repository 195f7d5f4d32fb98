"""``river work --processes N``: N worker processes under one supervisor.

A Python client is bound by the GIL, so one process uses one core however many
threads it runs. The supervisor starts N ordinary ``river work`` children, each
building its own client (so each has its own client id, its own pool and its
own producers) from the same ``MODULE:ATTR`` and flags, and then only watches:

- the first SIGINT/SIGTERM is passed on to every child, each of which stops
  fetching and lets its running jobs finish; a second one is passed on again,
  and each child cancels its running jobs (``river work``'s own two-step stop);
- a child that exits while no stop was asked for is started again after a
  back-off (1 s, doubling up to 30 s; a child that ran for a minute starts from
  1 s again). Jobs it was running stay ``running`` in the database until
  River's rescuer, run by whichever client leads, makes them retryable: the
  supervisor never touches rows, as Go River does not either;
- a child that exits with the usage-error status (2) would fail the same way
  every time, so the supervisor stops the others and exits 2.

The supervisor itself holds no database connection.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

log = logging.getLogger("river.work")

EXIT_USAGE = 2
POLL_INTERVAL = 0.05  # seconds between looks at the children (waitpid has no timeout)
CHILD_INDEX_ENV = "RIVER_WORK_PROCESS"


def _stop_with_parent() -> None:
    """In the child, before exec: on Linux, a SIGTERM (a soft stop) when the supervisor dies.

    Without it a supervisor killed with SIGKILL would leave its workers running unsupervised.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How long to wait before starting a child that died again."""

    initial: float = 1.0
    maximum: float = 30.0
    reset_after: float = 60.0  # a child that lived this long counts as healthy again

    def delay(self, failures: int) -> float:
        """Seconds before the restart that follows ``failures`` consecutive early deaths (>= 1)."""
        if failures < 1:
            raise ValueError(f"failures must be at least 1, got {failures}")
        return float(min(self.maximum, self.initial * 2 ** (failures - 1)))


@dataclass(slots=True)
class _Child:
    index: int
    proc: Any = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float | None = None
    restarts: int = 0
    exit_codes: list[int] = field(default_factory=list)


class Supervisor:
    """Runs ``argv`` (a ``river work`` command line without ``--processes``) ``processes`` times."""

    def __init__(
        self,
        argv: Sequence[str],
        processes: int,
        *,
        policy: RestartPolicy = RestartPolicy(),
        popen: Callable[..., Any] = subprocess.Popen,
        clock: Callable[[], float] = time.monotonic,
        env: dict[str, str] | None = None,
    ) -> None:
        if processes < 1:
            raise ValueError(f"processes must be at least 1, got {processes}")
        self.argv = list(argv)
        self.policy = policy
        self._popen = popen
        self._clock = clock
        self._env = dict(os.environ if env is None else env)
        self.children = [_Child(index=i) for i in range(processes)]
        self.signals_received = 0
        self._usage_error = False

    # ---------------------------------------------------------------- steps (driven by run, or by tests)

    def start_child(self, child: _Child) -> None:
        env = {**self._env, CHILD_INDEX_ENV: str(child.index)}
        child.proc = self._popen(self.argv, env=env, stdin=subprocess.DEVNULL,
                                 preexec_fn=_stop_with_parent)
        child.started_at = self._clock()
        child.restart_at = None
        log.info("worker process %d started (pid %d)", child.index, child.proc.pid)

    def start_all(self) -> None:
        for child in self.children:
            self.start_child(child)

    def on_signal(self) -> None:
        """One stop signal: pass it on to every live child (the second one makes them cancel jobs)."""
        self.signals_received += 1
        if self.signals_received > 2:
            log.warning("still waiting for worker processes to stop")
            return
        first = self.signals_received == 1
        what = "stopping after running jobs finish" if first else "cancelling running jobs"
        log.warning("signal received: %s in %d worker processes", what, len(self.live()))
        for child in self.live():
            child.proc.send_signal(signal.SIGTERM)
        for child in self.children:
            child.restart_at = None  # no restarts once a stop was asked for

    def live(self) -> list[_Child]:
        return [c for c in self.children if c.proc is not None and c.proc.poll() is None]

    @property
    def stopping(self) -> bool:
        return self.signals_received > 0 or self._usage_error

    def check(self) -> None:
        """Notice exited children and start those whose back-off is over."""
        now = self._clock()
        for child in self.children:
            if child.proc is not None:
                code = child.proc.poll()
                if code is None:
                    continue
                child.proc = None
                child.exit_codes.append(code)
                self._exited(child, code, now)
            elif child.restart_at is not None and now >= child.restart_at and not self.stopping:
                child.restarts += 1
                self.start_child(child)

    def _exited(self, child: _Child, code: int, now: float) -> None:
        if self.stopping:
            log.info("worker process %d exited with status %d", child.index, code)
            return
        if code == EXIT_USAGE:
            log.error("worker process %d exited with a usage error; stopping the others", child.index)
            self._usage_error = True
            for other in self.live():
                other.proc.send_signal(signal.SIGTERM)
            return
        lived = now - child.started_at
        child.failures = 1 if lived >= self.policy.reset_after else child.failures + 1
        delay = self.policy.delay(child.failures)
        child.restart_at = now + delay
        log.warning("worker process %d exited with status %d after %.1f s; restarting in %.1f s "
                    "(its running jobs are left to River's rescuer)", child.index, code, lived, delay)

    @property
    def done(self) -> bool:
        return self.stopping and all(c.proc is None for c in self.children)

    def exit_status(self) -> int:
        return EXIT_USAGE if self._usage_error else 0

    # ---------------------------------------------------------------- the loop

    def run(self) -> int:
        """Start the children and supervise them until a stop; must run on the main thread."""
        pending: list[int] = []

        def handler(signum: int, frame: FrameType | None) -> None:
            pending.append(signum)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start_all()
            while not self.done:
                while pending:
                    pending.pop(0)
                    self.on_signal()
                self.check()
                time.sleep(POLL_INTERVAL)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
            for child in self.live():  # only reached on an exception in the loop itself
                child.proc.kill()
        return self.exit_status()
