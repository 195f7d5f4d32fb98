"""One thread driving one river_protocol machine (the contract in machines/base.py).

The thread waits for an event or the machine's next deadline, calls
``handle(event, now)``, gives the output to ``on_output`` (the client's hook for
effects such as jobs to start), then runs each output intent through the
``Database`` and feeds the answer back as ``IntentSucceeded``/``IntentFailed``.
Intents run one at a time on this thread, so a machine never sees two answers
at once and every intent is answered exactly once.

Urgent events (``post(event, urgent=True)``) are handled before any queued
event and before the next intent answer is fed back. The client posts
``JobFinished`` that way: a job's outcome may be committed, and the job
reclaimed by a claim already under way, before a plain queued event would be
seen; the producer must learn the slot is free before it sees the reclaim.

Statement timeouts: ``timeout_for(intent)`` is reported, not enforced mid-flight
(a blocking DB-API call can't be interrupted from here); an intent that took
longer is still answered with its real result.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from river_db.failures import intent_failed
from river_protocol.machines.base import (
    Event,
    IntentSucceeded,
    Machine,
    Output,
    Tick,
    take_event,
)
from river_sync.database import Database

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


class MachineRunner:
    """Drives ``machine`` on its own thread until ``finish()`` or a fatal error."""

    def __init__(
        self,
        machine: Machine,
        database: Database,
        *,
        name: str,
        on_output: Callable[[Any], None] | None = None,
        readonly: Callable[[Any], bool] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.machine = machine
        self.name = name
        self._db = database
        self._on_output = on_output
        self._readonly = readonly
        self._clock = clock
        # Posting appends without the lock (deque appends are atomic, and only this runner's
        # thread pops); the lock and a notify are needed only while the thread sleeps.
        self._events: deque[Event] = deque()
        self._urgent: deque[Event] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._sleeping = False
        self._finishing = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.started = False

    # -- control (any thread) -------------------------------------------

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
                        wait = (deadline - self._clock()).total_seconds()
                        if wait <= 0:
                            return Tick()
                        self._cond.wait(wait)
                finally:
                    self._sleeping = False
        return take_event(self.machine, self._urgent if self._urgent else self._events)

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

    def _take_urgent(self) -> Event | None:
        return take_event(self.machine, self._urgent) if self._urgent else None

    def _dispatch(self, event: Event) -> None:
        answers: deque[Event] = deque()
        current: Event | None = event
        while current is not None:
            output: Output = self.machine.handle(current, self._clock())
            if self._on_output is not None:
                self._on_output(output)
            for intent in output.intents:
                answers.append(self._execute(intent))
            current = self._take_urgent()
            if current is None and answers:
                current = answers.popleft()

    def _execute(self, intent: Any) -> Event:
        readonly = self._readonly is not None and self._readonly(intent)
        try:
            result = self._db.run(intent, readonly=readonly)
        except BaseException as exc:
            if not isinstance(exc, Exception):
                raise
            log.debug("%s: %s failed: %s", self.name, type(intent).__name__, exc)
            return intent_failed(intent, exc, closed=self._db.closed)
        return IntentSucceeded(intent, result)
