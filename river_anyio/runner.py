"""One task driving one river_protocol machine (the contract in machines/base.py).

The task waits for an event or the machine's next deadline (a cancel scope's
deadline on the loop's clock), calls ``handle(event, now)``, gives the output to
``on_output`` (a plain or async hook: the client's effects, such as jobs to
start), then runs each output intent through the ``AsyncDatabase`` and feeds
the answer back as ``IntentSucceeded``/``IntentFailed``. Intents run one at a
time in this task, so a machine never sees two answers at once and every
intent is answered exactly once.

Urgent events (``post(event, urgent=True)``) are handled before any queued
event and before the next intent answer is fed back, for the same reason as in
``river_sync.runner``: a finished job's slot must be freed before the producer
can see the job reclaimed.

Time: ``utcnow()`` is wall time derived from the loop's clock (a wall/loop base
pair captured once per run, ``river_anyio._backend``), so under trio a
``trio.testing.MockClock`` drives every timer of every machine. Statement timeouts (``timeout_for``) are not
enforced here, as in the threaded driver: under an autojumping MockClock a
deadline on a statement would fire whenever the loop waits for a thread.

A machine that breaks its contract (``ProtocolError``) or any other bug ends
the task with that exception, which reaches the client's nursery.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

from river_anyio import _backend
from river_anyio._backend import loop_deadline, utcnow
from river_anyio.database import AsyncDatabase
from river_db.failures import intent_failed
from river_protocol.machines.base import (
    Event,
    IntentSucceeded,
    Machine,
    Output,
    Tick,
    take_event,
)

log = logging.getLogger(__name__)

__all__ = ["MachineRunner", "loop_deadline", "utcnow"]

class MachineRunner:
    """Drives ``machine`` in the task ``run`` until ``finish()`` or a fatal error."""

    def __init__(
        self,
        machine: Machine,
        database: AsyncDatabase,
        *,
        name: str,
        on_output: Callable[[Any], Any] | None = None,
        readonly: Callable[[Any], bool] | None = None,
    ) -> None:
        self.machine = machine
        self.name = name
        self._db = database
        self._on_output = on_output
        self._readonly = readonly
        self._events: deque[Event] = deque()
        self._urgent: deque[Event] = deque()
        self._wake = anyio.Event()  # the loop's own Event class once run() starts
        self._woken = False  # _wake is set already: posts skip the call (two posts per job)
        self._new_event: Callable[[], Any] = anyio.Event
        self._new_scope: Callable[..., Any] = anyio.CancelScope
        self._finishing = False
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.started = False

    # -- control (any task; never blocks) ----------------------------------

    def post(self, event: Event, *, urgent: bool = False) -> None:
        (self._urgent if urgent else self._events).append(event)
        if not self._woken:
            self._woken = True
            self._wake.set()

    def finish(self) -> None:
        """End the loop once the queued events are handled (the machine should be stopped by then)."""
        self._finishing = True
        self._wake.set()

    def cancel(self) -> None:
        """End the task now, cancelling a statement in flight (the executor rolls it back)."""
        self.scope.cancel()

    # -- the loop ---------------------------------------------------------

    async def run(
        self, *initial: Event, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        # Ahead of anything posted before the start: a machine's first event is its Start.
        self._events.extendleft(reversed(initial))
        self.started = True
        backend = _backend.current()
        self._new_event, self._new_scope = backend.Event, backend.CancelScope
        task_status.started()
        try:
            with self.scope:
                while True:
                    event = await self._next_event()
                    if event is None:
                        return
                    await self._dispatch(event)
        finally:
            self.done.set()

    async def _next_event(self) -> Event | None:
        while not self._events and not self._urgent:
            if self._finishing:
                return None
            deadline = self.machine.next_deadline()
            self._wake = self._new_event()
            self._woken = False
            if deadline is None:
                await self._wake.wait()
                continue
            with self._new_scope(deadline=loop_deadline(deadline)):
                await self._wake.wait()
            if not self._events and not self._urgent and deadline <= utcnow():
                return Tick()
        return take_event(self.machine, self._urgent if self._urgent else self._events)

    async def _dispatch(self, event: Event) -> None:
        answers: deque[Event] = deque()
        current: Event | None = event
        while current is not None:
            output: Output = self.machine.handle(current, utcnow())
            if self._on_output is not None:
                result = self._on_output(output)
                if inspect.isawaitable(result):
                    await result
            for intent in output.intents:
                answers.append(await self._execute(intent))
            current = take_event(self.machine, self._urgent) if self._urgent else None
            if current is None and answers:
                current = answers.popleft()

    async def _execute(self, intent: Any) -> Event:
        readonly = self._readonly is not None and self._readonly(intent)
        try:
            result = await self._db.run(intent, readonly=readonly)
        except Exception as exc:
            log.debug("%s: %s failed: %s", self.name, type(intent).__name__, exc)
            return intent_failed(intent, exc, closed=self._db.closed)
        return IntentSucceeded(intent, result)
