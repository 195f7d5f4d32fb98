"""The batch completer (docs/protocol.md §8.2): set-state requests in, batched statements out.

Requests are keyed by job id (a newer request replaces a pending older one).
One statement is in flight at a time. A sub-batch that failed for a reason a
retry can cure (``river_protocol.transient``) is retried with back-off and,
after the last attempt, put back behind any newer requests, for as long as the
client runs; a stopping completer keeps retrying for ``COMPLETER_STOP_GRACE``.
A refused statement is split into single updates, so one bad update never holds
back the others. An update is never lost silently: each one ends as a
completion, a missing row (job deleted meanwhile), or an explicit ``dropped``
entry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from river_protocol.constants import (
    COMPLETER_BACKLOG_SIGNAL,
    COMPLETER_BACKOFF_UNIT,
    COMPLETER_BACKPRESSURE_HIGH,
    COMPLETER_BACKPRESSURE_LOW,
    COMPLETER_FLUSH_EVERY_NTH_TICK,
    COMPLETER_FLUSH_THRESHOLD,
    COMPLETER_MAX_ATTEMPTS,
    COMPLETER_STOP_GRACE,
    COMPLETER_SUB_BATCH_MAX,
    COMPLETER_TICK,
    HOT_STATEMENT_TIMEOUT,
)
from river_protocol.errors import ProtocolError
from river_protocol.frozen import quick_init
from river_protocol.intents import Intent, SetStateIfRunning, SetStateUpdate
from river_protocol.job import JobRow
from river_protocol.machines.base import (
    Batches,
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Rng,
    Stop,
    Table,
    Tick,
    exponential_backoff,
    to,
)
from river_protocol.states import JobState


class CompleterState(enum.Enum):
    RUNNING = "running"
    STOPPING = "stopping"  # final flush under way; no new submissions
    STOPPED = "stopped"


class CompletionReason(enum.Enum):
    """Why the executor asked for the state change; names the job event (Go's JobSetStateReason)."""

    CANCELLED = "job_cancelled"
    COMPLETED = "job_completed"
    FAILED = "job_failed"
    INTERRUPTED = "job_interrupted"
    SNOOZED = "job_snoozed"


@quick_init
@dataclass(frozen=True, slots=True)
class Submit(Event):
    update: SetStateUpdate
    reason: CompletionReason
    context: Any = None  # opaque to the machine (stats, a waiter...), handed back with the outcome


@dataclass(frozen=True, slots=True)
class Submits(Event):
    """Consecutive ``Submit`` events as one (``take_event`` merges them)."""

    submits: tuple[Submit, ...]

    @classmethod
    def of(cls, events: tuple[Submit, ...]) -> Submits:
        return cls(events)


# Set-state overrides a retry or snooze of a job someone tried to cancel (§8.1).
_CANCEL_OVERRIDES = frozenset({JobState.RETRYABLE, JobState.SCHEDULED})


def persisted_reason(
    update: SetStateUpdate, reason: CompletionReason, row: JobRow
) -> CompletionReason | None:
    """What the stored row says happened, or None when the update changed nothing but metadata.

    The statement answers with the current row whether or not it was still running, so the
    requested reason alone can claim an outcome the database never recorded: a job rescued
    meanwhile, or a retry turned into a cancellation. A row in the requested state bears the
    request out (``available`` needs the reason to tell a retry, a snooze and an interrupt
    apart); a cancelled row where a retry or snooze was asked is the cancel override; any
    other state was set by someone else, and this client's outcome was not persisted.
    """
    if row.state is update.state:
        return reason
    if row.state is JobState.CANCELLED and update.state in _CANCEL_OVERRIDES:
        return CompletionReason.CANCELLED
    return None


@quick_init
@dataclass(frozen=True, slots=True)
class Completion:
    job: JobRow  # the row as stored after the statement
    reason: CompletionReason  # what the executor asked for
    context: Any = None
    persisted: CompletionReason | None = None  # what the row bears out (persisted_reason)


@dataclass(frozen=True, slots=True)
class Dropped:
    update: SetStateUpdate
    reason: CompletionReason
    error: BaseException
    context: Any = None


@dataclass(frozen=True, slots=True)
class CompleterOutput(Output):
    completions: tuple[Completion, ...] = ()
    missing: tuple[Submit, ...] = ()  # persisted nowhere: the job row no longer exists
    dropped: tuple[Dropped, ...] = ()
    accepting: bool = True  # False = back-pressure: the driver should hold submissions
    stopped: bool = False


_S = CompleterState
_OK, _FAIL = IntentSucceeded, IntentFailed
_STMT = SetStateIfRunning


@dataclass(slots=True)
class _Batch:
    requests: dict[int, Submit]
    attempt: int = 1


class Completer(Machine):
    INITIAL: ClassVar[CompleterState] = _S.RUNNING
    BATCHES: ClassVar[Batches] = {Submit: Submits.of}
    state: CompleterState

    TABLE: ClassVar[Table] = {
        (_S.RUNNING, Submit): to(_S.RUNNING, via="_on_submit"),
        (_S.RUNNING, Submits): to(_S.RUNNING, via="_on_submits"),
        (_S.RUNNING, Tick): to(_S.RUNNING, via="_on_tick"),
        (_S.RUNNING, (_OK, _STMT)): to(_S.RUNNING, via="_on_done"),
        (_S.RUNNING, (_FAIL, _STMT)): to(_S.RUNNING, via="_on_failed"),
        # Conditional from here on: whichever event leaves nothing pending or in flight stops it.
        (_S.RUNNING, Stop): to(_S.STOPPING, _S.STOPPED, via="_on_stop"),
        (_S.STOPPING, Tick): to(_S.STOPPING, _S.STOPPED, via="_on_tick"),
        (_S.STOPPING, (_OK, _STMT)): to(_S.STOPPING, _S.STOPPED, via="_on_done"),
        (_S.STOPPING, (_FAIL, _STMT)): to(_S.STOPPING, _S.STOPPED, via="_on_failed"),
        (_S.STOPPING, Stop): to(_S.STOPPING, via="_ignore"),
        (_S.STOPPED, Tick): to(_S.STOPPED, via="_ignore"),
        (_S.STOPPED, Stop): to(_S.STOPPED, via="_ignore"),
    }

    def __init__(
        self,
        rng: Rng,
        *,
        sub_batch_max: int = COMPLETER_SUB_BATCH_MAX,
        backpressure_high: int = COMPLETER_BACKPRESSURE_HIGH,
        backpressure_low: int = COMPLETER_BACKPRESSURE_LOW,
        flush_when_idle: bool = False,
        backoff_unit: timedelta = COMPLETER_BACKOFF_UNIT,
    ) -> None:
        """``backoff_unit`` scales the retry back-off (1 s, 2 s, 4 s at the default); only
        tests shorten it, so retry paths run in a fraction of the time with the same steps.

        ``flush_when_idle`` turns Go's timed batching into group commit: requests are sent
        as soon as no statement is in flight (on a tick due at once, after the driver has
        handed over the events it holds), and requests arriving meanwhile form the next
        batch. Rows end up exactly the same; only when they are written changes (low latency
        at low load, batches as large as the load makes them at high load)."""
        super().__init__()
        self._rng = rng
        self._sub_batch_max = sub_batch_max
        self._high, self._low = backpressure_high, backpressure_low
        self._pending: dict[int, Submit] = {}
        self._flush_queue: list[_Batch] = []  # sub-batches of the flush under way
        self._current: _Batch | None = None  # in flight, or waiting for its retry timer
        self._statement: SetStateIfRunning | None = None
        self._ticks = 0
        self._tick_started = False
        self._backpressure = False
        self._completions: list[Completion] = []
        self._missing: list[Submit] = []
        self._dropped: list[Dropped] = []
        self._stopped_now = False
        self._flush_when_idle = flush_when_idle
        self._backoff_scale = backoff_unit / COMPLETER_BACKOFF_UNIT
        self._stop_deadline: datetime | None = None  # retries of transient failures end here

    # ---------------------------------------------------------------- views

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    @property
    def outstanding_ids(self) -> frozenset[int]:
        """Every job id with an update not yet settled (pending, queued or in flight)."""
        ids = set(self._pending)
        for batch in self._flush_queue:
            ids.update(batch.requests)
        if self._current is not None:
            ids.update(self._current.requests)
        return frozenset(ids)

    @property
    def accepting(self) -> bool:
        return self.state is _S.RUNNING and not self._backpressure

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> CompleterOutput:
        out = CompleterOutput(
            intents=intents,
            next_deadline=deadline,
            completions=tuple(self._completions),
            missing=tuple(self._missing),
            dropped=tuple(self._dropped),
            accepting=self.accepting,
            stopped=self._stopped_now,
        )
        self._completions, self._missing, self._dropped, self._stopped_now = [], [], [], False
        return out

    # ---------------------------------------------------------------- events

    def _on_submit(self, event: Submit, now: datetime) -> None:
        self._pending[event.update.id] = event
        if not self._tick_started:
            self._tick_started = True
            self._timers["tick"] = now
        self._update_backpressure()
        if self._idle():
            if len(self._pending) >= COMPLETER_BACKLOG_SIGNAL:
                self._start_flush(now)
            elif self._flush_when_idle:
                # Due at once, but as a timer: the driver hands over every event it already
                # holds before it ticks, so submissions queued behind this one join the batch.
                self._timers["flush"] = now

    def _on_submits(self, event: Submits, now: datetime) -> None:
        # ``_on_submit`` for each, in order, with its per-request checks done once where one
        # answer serves the whole run: pending only grows until a flush empties it, so the
        # back-pressure flag after the run is what each step would have left; only a submit
        # that finds the completer idle can start a flush or ask for one.
        if not self._tick_started:
            self._tick_started = True
            self._timers["tick"] = now
        pending = self._pending
        idle = self._idle()
        for submit in event.submits:
            pending[submit.update.id] = submit
            if idle:
                if len(pending) >= COMPLETER_BACKLOG_SIGNAL:
                    self._start_flush(now)
                    pending = self._pending
                    idle = self._idle()
                elif self._flush_when_idle:
                    self._timers["flush"] = now
        self._update_backpressure()

    def _on_tick(self, event: Tick, now: datetime) -> None:
        if self._due("retry", now):
            self._send_current()
        if self._due("flush", now) and self._idle() and self._pending:
            self._start_flush(now)
        if not self._due("tick", now):
            return
        tick, self._ticks = self._ticks, self._ticks + 1
        if self.state is _S.RUNNING:
            self._timers["tick"] = now + COMPLETER_TICK
        if not self._idle() or not self._pending:
            return
        if (
            self.state is _S.STOPPING
            or self._backpressure
            or len(self._pending) >= COMPLETER_FLUSH_THRESHOLD
            or tick % COMPLETER_FLUSH_EVERY_NTH_TICK == 0
        ):
            self._start_flush(now)

    def _on_stop(self, event: Stop, now: datetime) -> None:
        self._enter(_S.STOPPING)
        self._stop_deadline = now + COMPLETER_STOP_GRACE
        self._timers.pop("tick", None)
        if self._idle():
            self._start_flush(now)
        self._maybe_stopped()

    def _on_done(self, event: IntentSucceeded, now: datetime) -> None:
        batch = self._take_current(event.intent)
        # The batch is settled by this answer: each row takes its request out, so what is left
        # is missing, and a row whose request is gone was not in the batch or came twice.
        requests = batch.requests
        completions = self._completions
        for row in event.result or ():
            if not isinstance(row, JobRow):
                raise ProtocolError(f"set-state results must be JobRow values, got {type(row).__name__}")
            request = requests.pop(row.id, None)
            if request is None:
                raise ProtocolError(f"set-state returned job {row.id}: not in the batch, or twice")
            persisted = persisted_reason(request.update, request.reason, row)
            completions.append(Completion(row, request.reason, request.context, persisted))
        self._missing.extend(requests.values())
        self._next(now)

    def _on_failed(self, event: IntentFailed, now: datetime) -> None:
        """The retry rule. Fatal (the database handle is gone): drop. A refused statement
        (not ``transient``): a batch is split so one bad update cannot hold back the others,
        and a lone update gets ``COMPLETER_MAX_ATTEMPTS`` before it is dropped. A transient
        failure (an outage, a lost connection, a serialization failure; see
        ``river_protocol.transient``) is retried with back-off for as long as the client
        runs, and once stopping until ``COMPLETER_STOP_GRACE`` after the stop."""
        batch = self._take_current(event.intent)
        if event.fatal:
            self._drop(batch, event.error)
        elif not event.transient and len(batch.requests) > 1:
            self._flush_queue[:0] = [_Batch({job_id: r}) for job_id, r in batch.requests.items()]
        elif batch.attempt < COMPLETER_MAX_ATTEMPTS or (
            event.transient and self._stop_deadline is not None and now < self._stop_deadline
        ):
            self._retry_later(batch, now)
            return
        elif not event.transient or self.state is _S.STOPPING:
            # Nothing would cure it, or nothing runs again after the stop: report it.
            self._drop(batch, event.error)
        else:
            for job_id, request in batch.requests.items():
                self._pending.setdefault(job_id, request)
            for queued in self._flush_queue:
                for job_id, request in queued.requests.items():
                    self._pending.setdefault(job_id, request)
            self._flush_queue.clear()
        self._next(now)

    def _retry_later(self, batch: _Batch, now: datetime) -> None:
        wait = exponential_backoff(batch.attempt, COMPLETER_MAX_ATTEMPTS, self._rng) * self._backoff_scale
        self._timers["retry"] = now + wait
        batch.attempt += 1
        self._current = batch

    # ---------------------------------------------------------------- flushing

    def _idle(self) -> bool:
        return self._current is None and not self._flush_queue

    def _start_flush(self, now: datetime) -> None:
        requests = list(self._pending.items())
        self._pending = {}
        for start in range(0, len(requests), self._sub_batch_max):
            self._flush_queue.append(_Batch(dict(requests[start:start + self._sub_batch_max])))
        self._update_backpressure()
        self._next(now)

    def _next(self, now: datetime) -> None:
        if self._current is None and self._flush_queue:
            self._current = self._flush_queue.pop(0)
            self._send_current()
            return
        if self._current is None and self._pending and (
            len(self._pending) >= COMPLETER_FLUSH_THRESHOLD or self.state is _S.STOPPING
        ):
            self._start_flush(now)
            return
        if self._current is None and self._pending and self._flush_when_idle:
            self._timers["flush"] = now
        self._update_backpressure()
        self._maybe_stopped()

    def _send_current(self) -> None:
        assert self._current is not None
        statement = SetStateIfRunning(updates=tuple(r.update for r in self._current.requests.values()))
        self._statement = statement
        self._emit(statement, HOT_STATEMENT_TIMEOUT)

    def _take_current(self, intent: Intent) -> _Batch:
        if self._current is None or intent is not self._statement:
            raise ProtocolError("set-state result does not answer the statement in flight")
        batch, self._current, self._statement = self._current, None, None
        return batch

    def _drop(self, batch: _Batch, error: BaseException) -> None:
        self._dropped.extend(Dropped(r.update, r.reason, error, r.context) for r in batch.requests.values())

    def _update_backpressure(self) -> None:
        size = len(self._pending)
        if size >= self._high:
            self._backpressure = True
        elif size < self._low:
            self._backpressure = False

    def _maybe_stopped(self) -> None:
        if self.state is _S.STOPPING and self._idle() and not self._pending:
            self._enter(_S.STOPPED)
            self._timers.clear()
            self._stopped_now = True
