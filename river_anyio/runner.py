"""One task (in river_sync, one thread) driving one river_protocol machine (the contract in
machines/base.py).

The runner waits for an event or the machine's next deadline, calls
``handle(event, now)``, gives the output to ``on_output`` (the client's hook for
effects such as jobs to start; here a plain or async one), then runs each output
intent through the ``AsyncDatabase`` and feeds the answer back as
``IntentSucceeded``/``IntentFailed``. Intents run one at a time in the runner, so
a machine never sees two answers at once and every intent is answered exactly once.

Urgent events (``post(event, urgent=True)``) are handled before any queued
event and before the next intent answer is fed back. The client posts
``JobFinished`` that way: a job's outcome may be committed, and the job
reclaimed by a claim already under way, before a plain queued event would be
seen; the producer must learn the slot is free before it sees the reclaim.

Time: ``utcnow()`` is ``river_anyio._backend``'s. Under an event loop it is wall
time derived from the loop's clock (a wall/loop base pair captured once per run),
so under trio a ``trio.testing.MockClock`` drives every timer of every machine.
Statement timeouts (``timeout_for``) are reported, not enforced mid-flight: a
blocking DB-API call can't be interrupted from a thread, and under an autojumping
MockClock a deadline on a statement would fire whenever the loop waits for a thread.

A machine that breaks its contract (``ProtocolError``) or any other bug ends the
runner with that exception: a task's reaches the client's nursery; a thread's is
logged and kept in ``error``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from river_anyio import _backend
from river_anyio._backend import utcnow
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

if True:  # ASYNC
    import inspect

    import anyio
    import anyio.abc

    from river_anyio._backend import loop_deadline
else:
    import threading

log = logging.getLogger(__name__)

__all__ = ["MachineRunner", "utcnow"]
if True:  # ASYNC
    __all__ += ["loop_deadline"]  # river_trio.runner's trio_deadline


class MachineRunner:
    """Drives ``machine`` (in the task ``run``, or on the thread ``start`` starts) until
    ``finish()`` or a fatal error."""

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
        # Posting appends without a lock (deque appends are atomic, and only the runner pops).
        self._events: deque[Event] = deque()
        self._urgent: deque[Event] = deque()
        self._finishing = False
        if True:  # ASYNC
            self._wake = anyio.Event()  # the loop's own Event class once run() starts
            self._woken = False  # _wake is set already: posts skip the call (two posts per job)
            self._new_event: Callable[[], Any] = anyio.Event
            self._new_scope: Callable[..., Any] = anyio.CancelScope
            self.scope = anyio.CancelScope()
        else:
            # The lock and a notify are needed only while the thread sleeps.
            self._cond = threading.Condition(threading.Lock())
            self._sleeping = False
            self._thread: threading.Thread | None = None
            self.error: BaseException | None = None
        self.done = _backend.Event()
        self.started = False

    # -- control (any task or thread; never blocks) ---------------------------

    if True:  # ASYNC
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
    else:
        def start(self, *initial: Event) -> None:
            # Ahead of anything posted before the start: a machine's first event is its Start.
            with self._cond:
                self._events.extendleft(reversed(initial))
            self.started = True
            self._thread = threading.Thread(target=self._run, name=f"river-{self.name}", daemon=True)
            self._thread.start()

        def post(self, event: Event, *, urgent: bool = False) -> None:
            (self._urgent if urgent else self._events).append(event)
            # Read after the append: a runner that set _sleeping later checks the queues after that.
            if self._sleeping:
                with self._cond:
                    self._cond.notify()

        def finish(self) -> None:
            """End the loop once the queued events are handled (the machine should be stopped by then)."""
            with self._cond:
                self._finishing = True
                self._cond.notify()

        def join(self, timeout: float | None = None) -> bool:
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join(timeout)
                return not self._thread.is_alive()
            return True

    # -- the loop ---------------------------------------------------------

    if True:  # ASYNC
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
    else:
        def _run(self) -> None:
            try:
                while True:
                    event = self._next_event()
                    if event is None:
                        return
                    self._dispatch(event)
            except BaseException as exc:
                # A ProtocolError here is a bug; the client notices through `error` and `done`.
                self.error = exc
                log.exception("%s: machine runner stopped by an error", self.name)
            finally:
                self.done.set()

        def _next_event(self) -> Event | None:
            if not self._events and not self._urgent:
                with self._cond:
                    self._sleeping = True
                    try:
                        while not self._events and not self._urgent:
                            if self._finishing:
                                return None
                            deadline = self.machine.next_deadline()
                            if deadline is None:
                                self._cond.wait()
                                continue
                            wait = (deadline - utcnow()).total_seconds()
                            if wait <= 0:
                                return Tick()
                            self._cond.wait(wait)
                    finally:
                        self._sleeping = False
            return take_event(self.machine, self._urgent if self._urgent else self._events)

    async def _dispatch(self, event: Event) -> None:
        answers: deque[Event] = deque()
        current: Event | None = event
        while current is not None:
            output: Output = self.machine.handle(current, utcnow())
            if self._on_output is not None:
                if True:  # ASYNC
                    result = self._on_output(output)
                    if inspect.isawaitable(result):
                        await result
                else:
                    self._on_output(output)
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
