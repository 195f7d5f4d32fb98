"""``river_protocol.frozen.quick_init``: the same instances as the dataclass's own ``__init__``, faster."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_db.events import Event
from river_protocol.client_core import JobPlan
from river_protocol.frozen import quick_init
from river_protocol.intents import SetStateUpdate
from river_protocol.machines.completer import Completion, Submit
from river_protocol.machines.producer import JobFinished
from river_protocol.states import JobState
from river_protocol.work import Finish


class Base:
    __slots__ = ()


def _shape(decorate: bool) -> Any:
    @dataclass(frozen=True, slots=True)
    class Shape(Base):
        a: int
        b: str = "b"
        c: list[int] = field(default_factory=list)
        d: int = field(default=4, init=False)
        e: float = field(default=1.5, kw_only=True)
        seen: tuple[int, ...] = field(default=(), init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "seen", (self.a, self.d))

    return quick_init(Shape) if decorate else Shape


Plain, Quick = _shape(False), _shape(True)


@pytest.mark.parametrize("kwargs", [
    {"a": 1}, {"a": 2, "b": "x"}, {"a": 3, "c": [1, 2]}, {"a": 4, "b": "y", "c": [], "e": 2.5},
])
def test_same_fields_defaults_factories_and_post_init(kwargs: dict[str, Any]) -> None:
    plain, quick = Plain(**kwargs), Quick(**kwargs)
    assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
    assert repr(quick).replace("Shape", "") == repr(plain).replace("Shape", "")
    assert quick.seen == (kwargs["a"], 4)


def test_positional_arguments_and_the_signature_match() -> None:
    assert dataclasses.astuple(Quick(7, "z", [9], e=0.5)) == dataclasses.astuple(Plain(7, "z", [9], e=0.5))
    assert str(inspect.signature(Quick)) == str(inspect.signature(Plain))
    with pytest.raises(TypeError):
        Quick(1, "b", [], 2.0)  # e is keyword-only
    with pytest.raises(TypeError):
        Quick()


def test_a_default_factory_gives_each_instance_its_own_value() -> None:
    first, second = Quick(1), Quick(2)
    first.c.append(1)
    assert second.c == []


def test_instances_stay_frozen_and_hashable() -> None:
    quick = quick_init(dataclass(frozen=True, slots=True)(type("P", (), {"__annotations__": {"x": "int"}})))
    item = quick(x=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.x = 2
    assert hash(item) == hash(quick(x=1)) and item == quick(x=1)


def test_refuses_what_it_does_not_handle() -> None:
    @dataclass(slots=True)
    class Mutable:
        x: int

    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        x: int
        y: InitVar[int] = 0

    for cls in (Mutable, NoSlots, WithInitVar):
        with pytest.raises(TypeError):
            quick_init(cls)


@pytest.mark.parametrize("cls", [SetStateUpdate, Submit, Completion, JobFinished, Finish, JobPlan, Event])
def test_the_hot_classes_take_their_fields_as_parameters(cls: type) -> None:
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    assert list(inspect.signature(cls).parameters) == names


@given(st.integers(min_value=1), st.sampled_from(list(JobState)),
       st.one_of(st.none(), st.integers(0, 100)), st.one_of(st.none(), st.binary(max_size=8)),
       st.booleans(), st.binary(max_size=8))
def test_set_state_update_keeps_every_value(id_: int, state: Any, attempt: int | None, error: bytes | None,
                                            merge: bool, updates: bytes) -> None:
    update = SetStateUpdate(id_, state, attempt=attempt, error=error, metadata_do_merge=merge,
                            metadata_updates=updates)
    assert (update.id, update.state, update.attempt, update.error, update.finalized_at,
            update.scheduled_at, update.metadata_do_merge, update.metadata_updates) == (
        id_, state, attempt, error, None, None, merge, updates)
