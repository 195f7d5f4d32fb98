"""The lease intents refuse what ``river_py_lease``'s constraints would refuse, with a
``ValidationError`` at construction rather than a database error when run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from river_protocol.errors import ValidationError
from river_protocol.intents import LEASE_TEXT_MAX_LEN, HoldLease, ReleaseLease

OK = timedelta(seconds=30)


def test_a_good_lease_is_built_as_given() -> None:
    longest = "n" * LEASE_TEXT_MAX_LEN
    assert HoldLease(longest, longest, timedelta(microseconds=1)).name == longest
    assert ReleaseLease("sweeper", "client-1") == ReleaseLease(name="sweeper", holder="client-1")


def _hold_named(name: Any) -> Any:
    return HoldLease(name, "me", OK)


def _release_named(name: Any) -> Any:
    return ReleaseLease(name, "me")


def _hold_by(holder: Any) -> Any:
    return HoldLease("sweeper", holder, OK)


def _release_by(holder: Any) -> Any:
    return ReleaseLease("sweeper", holder)


@pytest.mark.parametrize("make", [_hold_named, _release_named])
def test_the_name_must_be_1_to_127_characters(make: Callable[[Any], Any]) -> None:
    with pytest.raises(ValidationError, match=r"^lease name cannot be empty$"):
        make("")
    with pytest.raises(ValidationError, match=r"^lease name cannot be longer than 127 characters"):
        make("n" * 128)
    with pytest.raises(ValidationError, match=r"^lease name must be a string, got int$"):
        make(1)


@pytest.mark.parametrize("make", [_hold_by, _release_by])
def test_the_holder_must_be_1_to_127_characters(make: Callable[[Any], Any]) -> None:
    with pytest.raises(ValidationError, match=r"^lease holder cannot be empty$"):
        make("")
    with pytest.raises(ValidationError, match=r"^lease holder cannot be longer than 127 characters"):
        make("h" * 128)
    with pytest.raises(ValidationError, match=r"^lease holder must be a string, got NoneType$"):
        make(None)


@pytest.mark.parametrize("ttl", [timedelta(0), timedelta(seconds=-1)])
def test_the_ttl_must_be_positive(ttl: timedelta) -> None:
    with pytest.raises(ValidationError, match=r"^lease ttl must be positive, got "):
        HoldLease("sweeper", "me", ttl)


def test_the_ttl_must_be_a_timedelta() -> None:
    with pytest.raises(ValidationError, match=r"^lease ttl must be a timedelta, got int$"):
        HoldLease("sweeper", "me", 30)  # type: ignore[arg-type]
