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

A machine holds a table ``(state, event key) -> handler name``; the event key
is the event's type, or for intent results ``(IntentSucceeded, IntentType)``.
Anything missing from the table raises ``ProtocolError``: nothing guesses.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
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

    @property
    def timed_out(self) -> bool:
        return isinstance(self.error, TimeoutError)


EventKey = type[Event] | tuple[type[Event], type[Intent]]
Table = Mapping[tuple[enum.Enum, EventKey], str]


def event_key(event: Event) -> EventKey:
    if isinstance(event, IntentSucceeded | IntentFailed):
        return (type(event), type(event.intent))
    return type(event)


def _key_name(key: EventKey) -> str:
    if isinstance(key, tuple):
        return f"{key[0].__name__}({key[1].__name__})"
    return key.__name__


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

    Subclasses set ``TABLE`` and ``state`` and implement ``_output``; a
    handler records effects through ``_emit`` and timers through ``_timers``.
    """

    TABLE: ClassVar[Table]
    state: enum.Enum

    def __init__(self) -> None:
        self._timers: dict[str, datetime] = {}
        self._in_flight: dict[int, tuple[Intent, timedelta | None]] = {}
        self._emitted: list[Intent] = []

    # -- driver-facing -------------------------------------------------

    def handle(self, event: Event, now: datetime) -> Any:
        require_aware(now)
        key = event_key(event)
        if (self.state, key) not in self.TABLE:
            raise ProtocolError(
                f"{type(self).__name__}: {_key_name(key)} is illegal in state {self.state.value!r}"
            )
        if isinstance(event, IntentSucceeded | IntentFailed):
            self._settle(event.intent)
        self._emitted = []
        self._before(now)
        name = self.TABLE.get((self.state, key))
        if name is None:
            raise ProtocolError(f"{type(self).__name__}: {_key_name(key)} is illegal after a deadline passed")
        getattr(self, name)(event, now)
        return self._output(tuple(self._emitted), self.next_deadline())

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

    def _before(self, now: datetime) -> None:
        """Rules that hold whatever the event (e.g. a deadline that passed); may change state.

        The event was already checked against the table in the state it arrived in, and is
        then dispatched from the state this hook leaves, which must accept it too.
        """

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
