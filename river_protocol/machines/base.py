"""What every machine shares: events, outputs, the dispatch table, timers, jitter.

The driver contract, identical for every machine:

1. Call ``machine.handle(event, now)``; it returns an ``Output``.
2. Execute each of ``output.intents`` (in order, unless the machine says
   otherwise) and answer *every* intent exactly once, with
   ``IntentSucceeded(intent, result)`` or ``IntentFailed(intent, error)``,
   passing back the very same intent object. ``machine.timeout_for(intent)``
   tells how long the statement may take; report an overrun as
   ``IntentFailed(intent, TimeoutError(...))``. Report a closed pool or a
   shutdown cancellation with ``fatal=True`` (nothing will retry it).
3. Call ``handle(Tick(), now)`` no later than ``output.next_deadline``
   (``None``: no timer pending). Early or extra ticks are harmless.
4. Take queued events with ``take_event``: a run of events of one type that
   the machine lists in ``BATCHES`` arrives as one batch event, so a
   thousand finished jobs cost one ``handle`` call, not a thousand.

A machine holds one table, ``(state, event key) -> Transition``, in the style
of h11's ``EVENT_TRIGGERED_TRANSITIONS``: every transition the machine makes is
a row, next state included, so the diagram can be read (and drawn, see
``mermaid``) from the data. The event key is the event's type, or for intent
results ``(IntentSucceeded, IntentType)`` (or ``IntentFailed``); a row keyed
``(IntentSucceeded, Intent)`` takes the results of any intent the state has no
own row for. Anything missing from the table raises ``ProtocolError``: nothing
guesses.

A row with one next state is entered by the machine before its handler runs.
A row with several is a conditional: the handler picks one with ``_enter``,
and the machine refuses any state the row does not list.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol

from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import Intent


class Rng(Protocol):
    """The only randomness machines use: ``random.Random`` fits."""

    def random(self) -> float: ...


# ---------------------------------------------------------------- events


class Event:
    """Base of machine events; concrete events are frozen dataclasses."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Tick(Event):
    """A timer may have expired; the machine looks at ``now`` to decide."""


@dataclass(frozen=True, slots=True)
class Stop(Event):
    """Begin an orderly shutdown."""


@dataclass(frozen=True, slots=True)
class IntentSucceeded(Event):
    intent: Intent
    result: Any = None


@dataclass(frozen=True, slots=True)
class IntentFailed(Event):
    intent: Intent
    error: BaseException
    fatal: bool = False  # pool closed / shutdown: retrying cannot help
    # False: the statement itself was refused (``river_protocol.transient``); sent again
    # unchanged it fails again.
    transient: bool = True

    @property
    def timed_out(self) -> bool:
        return isinstance(self.error, TimeoutError)


class DeadlineEvent(Event):
    """An event a machine raises itself when a deadline has passed (h11's state-triggered
    transitions, kept in the same table). Drivers never send one."""

    __slots__ = ()


EventKey = type[Event] | tuple[type[Event], type[Intent]]


@dataclass(frozen=True, slots=True)
class Transition:
    """One table row: the handler and the states the machine may be in after it."""

    handler: str
    targets: tuple[enum.Enum, ...]

    @property
    def conditional(self) -> bool:
        return len(self.targets) > 1


def to(*targets: enum.Enum, via: str) -> Transition:
    """The row ``state --event--> target(s)``; several targets make the handler choose."""
    if not targets:
        raise ValidationError(f"transition via {via!r} needs at least one next state")
    return Transition(via, tuple(dict.fromkeys(targets)))


Table = Mapping[tuple[enum.Enum, EventKey], Transition]
Batches = Mapping[type[Event], Callable[[tuple[Any, ...]], Event]]  # see ``take_event``


def event_key(event: Event) -> EventKey:
    if isinstance(event, (IntentSucceeded, IntentFailed)):
        return (type(event), type(event.intent))
    return type(event)


def take_event(machine: Machine, queue: deque[Event]) -> Event:
    """Pop the next event of ``queue``; a run of same-type events behind it that the machine
    batches (``BATCHES``) is popped with it and comes back as one batch event, in order."""
    event = queue.popleft()
    if not queue:
        return event
    kind = type(event)
    merge = machine.BATCHES.get(kind)
    if merge is None or type(queue[0]) is not kind:
        return event
    run = [event]
    while queue and type(queue[0]) is kind:
        run.append(queue.popleft())
    return merge(tuple(run))


def key_name(key: EventKey) -> str:
    """How an event key reads in errors and diagrams: ``Tick``, ``IntentSucceeded(ClaimJobs)``."""
    if isinstance(key, tuple):
        return f"{key[0].__name__}({key[1].__name__})"
    return key.__name__


def lookup(table: Table, state: enum.Enum, key: EventKey) -> Transition | None:
    """The row for ``key`` in ``state``; a result falls back to its ``(kind, Intent)`` row."""
    row = table.get((state, key))
    if row is None and isinstance(key, tuple):
        row = table.get((state, (key[0], Intent)))
    return row


def mermaid(table: Table, initial: enum.Enum | None = None, *, loops: bool = True) -> str:
    """The table as a Mermaid ``stateDiagram-v2`` (pure text, arrows in table order).

    A conditional row draws one arrow per next state it allows. Rows that keep the
    state and only ignore the event are left out, and with ``loops=False`` every
    arrow back to the same state.
    """
    lines = ["stateDiagram-v2"]
    if initial is not None:
        lines.append(f"    [*] --> {initial.value}")
    edges: dict[tuple[str, str], list[str]] = {}
    for (state, key), row in table.items():
        if row.handler == "_ignore" and row.targets == (state,):
            continue
        for target in row.targets:
            if target is state and not loops:
                continue
            labels = edges.setdefault((str(state.value), str(target.value)), [])
            if key_name(key) not in labels:
                labels.append(key_name(key))
    for (source, dest), labels in edges.items():
        lines.append(f"    {source} --> {dest}: {', '.join(labels)}")
    return "\n".join(lines) + "\n"


def table_problems(machine: type[Machine]) -> list[str]:
    """What is wrong with ``machine``'s table (empty when nothing is).

    Every handler named must exist; every state named, source or target, must be a
    member of the initial state's enum; every event must be a small immutable value
    (a frozen dataclass ``Event``), results keyed as ``(IntentSucceeded|IntentFailed,
    Intent type)``; every state must be reachable from ``INITIAL`` and accept ``Stop``.
    """
    name = machine.__name__
    initial = getattr(machine, "INITIAL", None)
    table = getattr(machine, "TABLE", None)
    if not isinstance(initial, enum.Enum) or not isinstance(table, Mapping) or not table:
        return [f"{name}: needs an INITIAL state and a non-empty TABLE"]
    kind = type(initial)
    problems: list[str] = []

    def check_event(event_type: object, where: str) -> None:
        if not (isinstance(event_type, type) and issubclass(event_type, Event)):
            problems.append(f"{where}: {event_type!r} is not an Event type")
            return
        params = getattr(event_type, "__dataclass_params__", None)
        if params is None or not params.frozen:
            problems.append(f"{where}: {event_type.__name__} is not a frozen dataclass")

    for (state, key), row in table.items():
        where = f"{name} row ({getattr(state, 'value', state)!r}, {_safe_key_name(key)})"
        if not isinstance(state, kind):
            problems.append(f"{where}: {state!r} is not a {kind.__name__}")
        if isinstance(key, tuple):
            result, intent = key
            if result not in (IntentSucceeded, IntentFailed):
                problems.append(f"{where}: results are keyed by IntentSucceeded or IntentFailed")
            if not (isinstance(intent, type) and issubclass(intent, Intent)):
                problems.append(f"{where}: {intent!r} is not an Intent type")
        else:
            if key in (IntentSucceeded, IntentFailed):
                problems.append(f"{where}: a result needs its intent type in the key")
            check_event(key, where)
        if not isinstance(row, Transition):
            problems.append(f"{where}: {row!r} is not a Transition")
            continue
        if not callable(getattr(machine, row.handler, None)):
            problems.append(f"{where}: handler {row.handler} does not exist")
        problems.extend(f"{where}: next state {t!r} is not a {kind.__name__}"
                        for t in row.targets if not isinstance(t, kind))

    reached, frontier = {initial}, [initial]
    while frontier:
        state = frontier.pop()
        for (source, _), row in table.items():
            if source is state and isinstance(row, Transition):
                fresh = [t for t in row.targets if t not in reached]
                reached.update(fresh)
                frontier.extend(fresh)
    for state in kind:
        if state not in reached:
            problems.append(f"{name}: state {state.value!r} cannot be reached from {initial.value!r}")
        if (state, Stop) not in table:
            problems.append(f"{name}: state {state.value!r} has no row for Stop")
    return problems


def _safe_key_name(key: object) -> str:
    if isinstance(key, tuple) and all(isinstance(k, type) for k in key):
        return key_name(key)
    return key.__name__ if isinstance(key, type) else repr(key)


# ---------------------------------------------------------------- output


@dataclass(frozen=True, slots=True)
class Output:
    """Effects of one ``handle`` call. Machines extend this with their own fields."""

    intents: tuple[Intent, ...] = ()
    next_deadline: datetime | None = None


# ---------------------------------------------------------------- jitter helpers


def uniform(rng: Rng, low: timedelta, high: timedelta) -> timedelta:
    """A duration in [low, high) (Go's randutil.DurationBetween)."""
    if high < low:
        raise ValidationError(f"empty interval [{low}, {high})")
    return low + (high - low) * rng.random()


def exponential_backoff(attempt: int, reset_after: int, rng: Rng) -> timedelta:
    """Service back-off: 2^((attempt-1) mod reset_after) seconds, ±10 % (attempt counts from 1)."""
    if attempt < 1 or reset_after < 1:
        raise ValidationError(f"backoff needs attempt >= 1 and reset_after >= 1, got {attempt}/{reset_after}")
    seconds = float(2 ** ((attempt - 1) % reset_after))
    seconds += seconds * (rng.random() * 0.2 - 0.1)
    return timedelta(seconds=seconds)


def require_aware(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValidationError(f"naive datetime {now!r}: machines need timezone-aware times")


# ---------------------------------------------------------------- the machine skeleton


class Machine:
    """Table-driven dispatch, in-flight intent tracking and named timers.

    Subclasses set ``TABLE`` and ``INITIAL`` and implement ``_output``; a
    handler records effects through ``_emit``, timers through ``_timers``, and
    in a conditional row its choice of next state through ``_enter``.
    """

    TABLE: ClassVar[Table]
    INITIAL: ClassVar[enum.Enum]
    # Event type -> how a run of them becomes one event the table takes (see ``take_event``).
    BATCHES: ClassVar[Batches] = {}
    state: enum.Enum

    def __init__(self) -> None:
        self.state = self.INITIAL
        self._timers: dict[str, datetime] = {}
        self._in_flight: dict[int, tuple[Intent, timedelta | None]] = {}
        self._emitted: list[Intent] = []
        self._row: Transition | None = None  # the row being run, for ``_enter``

    # -- driver-facing -------------------------------------------------

    def handle(self, event: Event, now: datetime) -> Any:
        require_aware(now)
        if isinstance(event, DeadlineEvent):
            raise ProtocolError(f"{type(self).__name__}: {type(event).__name__} is the machine's own")
        self._row_for(event, "")
        if isinstance(event, (IntentSucceeded, IntentFailed)):
            self._settle(event.intent)
        self._emitted = []
        for due in self._deadline_events(now):
            self._run(due, self._row_for(due, ""), now)
        self._run(event, self._row_for(event, " after a deadline passed"), now)
        return self._output(tuple(self._emitted), self.next_deadline())

    def accepts(self, event: Event) -> bool:
        """Whether the table has a row for ``event`` in the current state."""
        return lookup(self.TABLE, self.state, event_key(event)) is not None

    def timeout_for(self, intent: Intent) -> timedelta | None:
        entry = self._in_flight.get(id(intent))
        if entry is None or entry[0] is not intent:
            raise ProtocolError(f"{type(self).__name__}: {type(intent).__name__} is not in flight")
        return entry[1]

    def next_deadline(self) -> datetime | None:
        return min(self._timers.values(), default=None)

    @property
    def in_flight(self) -> tuple[Intent, ...]:
        return tuple(intent for intent, _ in self._in_flight.values())

    # -- for subclasses ------------------------------------------------

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> Any:
        raise NotImplementedError

    def _deadline_events(self, now: datetime) -> tuple[DeadlineEvent, ...]:
        """Events due whatever arrives (e.g. a trust window that ran out), run through the
        table first. The driver's event was already checked in the state it arrived in, and
        is then dispatched from the state these leave, which must accept it too."""
        return ()

    def _row_for(self, event: Event, when: str) -> Transition:
        key = event_key(event)
        row = lookup(self.TABLE, self.state, key)
        if row is None:
            raise ProtocolError(
                f"{type(self).__name__}: {key_name(key)} is illegal in state {self.state.value!r}{when}"
            )
        return row

    def _run(self, event: Event, row: Transition, now: datetime) -> None:
        source = self.state
        self._row = row
        try:
            if not row.conditional:
                self.state = row.targets[0]
            getattr(self, row.handler)(event, now)
        finally:
            self._row = None
        if self.state not in row.targets:
            raise ProtocolError(
                f"{type(self).__name__}: {row.handler} left state {self.state.value!r} after"
                f" {key_name(event_key(event))} in {source.value!r}; the table allows"
                f" {', '.join(repr(t.value) for t in row.targets)}"
            )

    def _enter(self, state: enum.Enum) -> None:
        """A conditional row's choice of next state; refused unless the row lists it."""
        if self._row is None or state not in self._row.targets:
            allowed = "none (no row is running)" if self._row is None else ", ".join(
                repr(t.value) for t in self._row.targets)
            raise ProtocolError(
                f"{type(self).__name__}: cannot enter {state.value!r} from {self.state.value!r};"
                f" the table allows {allowed}"
            )
        self.state = state

    def _emit(self, intent: Intent, timeout: timedelta | None = None) -> None:
        self._in_flight[id(intent)] = (intent, timeout)
        self._emitted.append(intent)

    def _settle(self, intent: Intent) -> None:
        entry = self._in_flight.get(id(intent))
        if entry is None or entry[0] is not intent:
            raise ProtocolError(
                f"{type(self).__name__}: result for a {type(intent).__name__} not in flight"
            )
        del self._in_flight[id(intent)]

    def _due(self, name: str, now: datetime) -> bool:
        """True (and the timer cleared) when timer ``name`` has expired."""
        at = self._timers.get(name)
        if at is None or at > now:
            return False
        del self._timers[name]
        return True

    def _flight_of(self, kind: type[Intent]) -> Intent | None:
        for intent, _ in self._in_flight.values():
            if isinstance(intent, kind):
                return intent
        return None

    def _ignore(self, event: Event, now: datetime) -> None:
        """Handler for events a state accepts without effect (late results, stray ticks)."""
