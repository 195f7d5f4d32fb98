"""The machines' tables: sound for every machine, next states enforced at run time."""

from __future__ import annotations

import enum
import importlib
import pkgutil
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest

import river_protocol
from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import GetQueue, Intent, LeaderElect, LeaderRow, Notify
from river_protocol.machines.base import (
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Stop,
    Table,
    Tick,
    Transition,
    lookup,
    mermaid,
    table_problems,
    to,
)
from river_protocol.machines.elector import Elector, ElectorState, Start, TrustExpired

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def river_machines() -> list[type[Machine]]:
    for module in pkgutil.walk_packages(river_protocol.__path__, prefix="river_protocol."):
        if not module.name.startswith("river_protocol.testing"):
            importlib.import_module(module.name)
    found: list[type[Machine]] = []
    pending = list(Machine.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("river_protocol."):
            found.append(cls)
    return found


def test_every_machine_in_river_protocol_has_a_sound_table() -> None:
    machines = river_machines()
    names = {m.__name__ for m in machines}
    assert {"Producer", "Completer", "Elector", "MaintenanceService", "PeriodicEnqueuer",
            "Leadership"} <= names
    for machine in machines:
        assert table_problems(machine) == [], machine.__name__


# ---------------------------------------------------------------- a small machine to break


class Light(enum.Enum):
    OFF = "off"
    ON = "on"
    BROKEN = "broken"


class Other(enum.Enum):
    X = "x"


@dataclass(frozen=True, slots=True)
class Flip(Event):
    pass


class Mutable(Event):  # not a dataclass: not a small immutable value
    pass


class Lamp(Machine):
    INITIAL: ClassVar[Light] = Light.OFF
    state: Light
    TABLE: ClassVar[Table] = {
        (Light.OFF, Flip): to(Light.ON, via="_on_flip"),
        (Light.ON, Flip): to(Light.OFF, Light.BROKEN, via="_on_flip_back"),
        (Light.BROKEN, Flip): to(Light.BROKEN, via="_ignore"),
        **{(s, Stop): to(s, via="_ignore") for s in Light},
        **{(s, (IntentSucceeded, Intent)): to(s, via="_ignore") for s in Light},
        (Light.ON, (IntentSucceeded, Notify)): to(Light.ON, via="_on_notified"),
    }

    def __init__(self, choice: Light | None = None, assign: Light | None = None) -> None:
        super().__init__()
        self.choice, self.assign = choice, assign
        self.seen: list[enum.Enum] = []

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> Output:
        return Output(intents, deadline)

    def _on_flip(self, event: Flip, now: datetime) -> None:
        self.seen.append(self.state)
        self._emit(Notify(topic="t", payloads=()))

    def _on_flip_back(self, event: Flip, now: datetime) -> None:
        if self.choice is not None:
            self._enter(self.choice)
        if self.assign is not None:
            self.state = self.assign

    def _on_notified(self, event: IntentSucceeded, now: datetime) -> None:
        self.seen.append(self.state)


def test_lamp_table_is_sound() -> None:
    assert table_problems(Lamp) == []


def test_a_single_next_state_is_entered_before_the_handler_runs() -> None:
    lamp = Lamp()
    lamp.handle(Flip(), T0)
    assert lamp.state is Light.ON and lamp.seen == [Light.ON]


def test_a_conditional_handler_chooses_among_the_listed_states() -> None:
    for choice in (Light.OFF, Light.BROKEN):
        lamp = Lamp(choice=choice)
        lamp.handle(Flip(), T0)
        lamp.handle(Flip(), T0)
        assert lamp.state is choice


def test_a_conditional_handler_choosing_an_unlisted_state_raises() -> None:
    lamp = Lamp(choice=Light.ON)
    lamp.handle(Flip(), T0)
    with pytest.raises(ProtocolError, match="cannot enter 'on' from 'on'; the table allows 'off', 'broken'"):
        lamp.handle(Flip(), T0)


def test_a_handler_that_does_not_choose_is_refused() -> None:
    lamp = Lamp()  # the conditional row does not list "on", where it was left
    lamp.handle(Flip(), T0)
    with pytest.raises(ProtocolError, match="_on_flip_back left state 'on'"):
        lamp.handle(Flip(), T0)


def test_a_handler_assigning_an_unlisted_state_directly_is_refused() -> None:
    lamp = Lamp(choice=Light.OFF, assign=Light.ON)
    lamp.handle(Flip(), T0)
    with pytest.raises(ProtocolError, match="left state 'on'"):
        lamp.handle(Flip(), T0)


def test_enter_outside_a_row_raises() -> None:
    with pytest.raises(ProtocolError, match="no row is running"):
        Lamp()._enter(Light.ON)


def test_an_event_missing_from_the_table_raises_and_accepts_tells() -> None:
    lamp = Lamp()
    assert lamp.accepts(Flip()) and not lamp.accepts(Tick())
    with pytest.raises(ProtocolError, match="Tick is illegal in state 'off'"):
        lamp.handle(Tick(), T0)


def test_a_result_prefers_its_own_row_then_the_any_intent_row() -> None:
    lamp = Lamp()
    out = lamp.handle(Flip(), T0)
    lamp.handle(IntentSucceeded(out.intents[0]), T0)
    assert lamp.seen == [Light.ON, Light.ON]  # the Notify row ran its handler
    row = lookup(Lamp.TABLE, Light.ON, (IntentSucceeded, GetQueue))
    assert row == Transition("_ignore", (Light.ON,))
    assert lookup(Lamp.TABLE, Light.ON, (IntentFailed, GetQueue)) is None


def test_to_needs_a_next_state_and_drops_repeats() -> None:
    with pytest.raises(ValidationError):
        to(via="_x")
    assert to(Light.ON, Light.ON, Light.OFF, via="_x").targets == (Light.ON, Light.OFF)
    assert not to(Light.ON, via="_x").conditional and to(Light.ON, Light.OFF, via="_x").conditional


def test_table_problems_names_every_kind_of_broken_row() -> None:
    class Broken(Machine):
        INITIAL: ClassVar[Light] = Light.OFF
        TABLE: ClassVar[Table] = {
            (Light.OFF, Flip): to(Light.OFF, via="_missing"),
            (Other.X, Flip): to(Light.OFF, via="_ignore"),
            (Light.OFF, Tick): to(Other.X, via="_ignore"),
            (Light.OFF, Mutable): to(Light.OFF, via="_ignore"),
            (Light.OFF, IntentSucceeded): to(Light.OFF, via="_ignore"),
            (Light.OFF, (Stop, Notify)): to(Light.OFF, via="_ignore"),
            (Light.OFF, (IntentFailed, Flip)): to(Light.OFF, via="_ignore"),  # type: ignore[dict-item]
            (Light.OFF, int): to(Light.OFF, via="_ignore"),  # type: ignore[dict-item]
            (Light.OFF, Stop): "_ignore",  # type: ignore[dict-item]
        }

    problems = "\n".join(table_problems(Broken))
    for expected in (
        "handler _missing does not exist",
        "('x', Flip): <Other.X: 'x'> is not a Light",
        "('off', Tick): next state <Other.X: 'x'> is not a Light",
        "Mutable is not a frozen dataclass",
        "a result needs its intent type in the key",
        "results are keyed by IntentSucceeded or IntentFailed",
        "is not an Intent type",
        "<class 'int'> is not an Event type",
        "'_ignore' is not a Transition",
        "state 'on' cannot be reached from 'off'",
        "state 'broken' has no row for Stop",
    ):
        assert expected in problems, expected
    empty = type("Empty", (Machine,), {})
    assert table_problems(empty) == ["Empty: needs an INITIAL state and a non-empty TABLE"]


# ---------------------------------------------------------------- deadline events


def test_a_driver_may_not_send_a_deadline_event() -> None:
    elector = Elector("a", random.Random(0))
    elector.handle(Start(), T0)
    with pytest.raises(ProtocolError, match="TrustExpired is the machine's own"):
        elector.handle(TrustExpired(), T0)


def test_trust_running_out_goes_through_the_table_before_the_event() -> None:
    elector = Elector("a", random.Random(0))
    elector.handle(Start(), T0)
    elect = elector.handle(Tick(), T0).intents[0]
    assert isinstance(elect, LeaderElect)
    row = LeaderRow(leader_id="a", elected_at=T0, expires_at=T0 + timedelta(seconds=15))
    assert elector.handle(IntentSucceeded(elect, row), T0).became_leader
    assert elector.term is not None
    out = elector.handle(Tick(), elector.term.trust_until)
    assert out.lost_leadership and elector.state is ElectorState.RESIGNING
    assert [type(i).__name__ for i in out.intents] == ["LeaderResign"]


# ---------------------------------------------------------------- diagrams


def test_mermaid_draws_state_changes_and_skips_pure_ignores() -> None:
    assert mermaid(Lamp.TABLE, Light.OFF) == (
        "stateDiagram-v2\n"
        "    [*] --> off\n"
        "    off --> on: Flip\n"
        "    on --> off: Flip\n"
        "    on --> broken: Flip\n"
        "    on --> on: IntentSucceeded(Notify)\n"
    )
    assert "on --> on" not in mermaid(Lamp.TABLE, loops=False)
    assert mermaid({}) == "stateDiagram-v2\n"
