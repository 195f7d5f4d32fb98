"""Elector machine: elect/reelect timing, trust window, back-off, resign paths."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import LeaderElect, LeaderReelect, LeaderResign, LeaderRow
from river_protocol.machines.base import IntentFailed, IntentSucceeded, Stop, Tick
from river_protocol.machines.elector import (
    Elector,
    ElectorOutput,
    ElectorState,
    LeadershipNotification,
    Start,
)
from river_protocol.machines.notifications import LeadershipPayload

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class FixedRng:
    def __init__(self, value: float = 0.5) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def leader_row(seconds: float = 0, who: str = "me") -> LeaderRow:
    return LeaderRow(leader_id=who, elected_at=at(seconds), expires_at=at(seconds + 15))


def only(out: ElectorOutput, kind: type) -> object:
    (intent,) = out.intents
    assert isinstance(intent, kind)
    return intent


def elected(rng_value: float = 0.5) -> Elector:
    e = Elector("me", FixedRng(rng_value))
    assert e.handle(Start(), at(0)).next_deadline == at(0)
    elect = only(e.handle(Tick(), at(0)), LeaderElect)
    assert e.timeout_for(elect) == timedelta(seconds=5)  # type: ignore[arg-type]
    out = e.handle(IntentSucceeded(elect, leader_row()), at(0.1))  # type: ignore[arg-type]
    assert out.became_leader and e.is_leader
    assert e.term is not None and e.term.trust_until == at(14)
    return e


def test_not_elected_waits_five_to_six_seconds() -> None:
    e = Elector("me", FixedRng(0.5))
    e.handle(Start(), at(0))
    elect = only(e.handle(Tick(), at(0)), LeaderElect)
    out = e.handle(IntentSucceeded(elect, None), at(0.2))  # type: ignore[arg-type]
    assert not out.became_leader and out.next_deadline == at(5.7)
    assert e.handle(Tick(), at(5)).intents == ()
    only(e.handle(Tick(), at(5.7)), LeaderElect)


def test_resigned_notification_wakes_follower() -> None:
    e = Elector("me", FixedRng(0.5))
    e.handle(Start(), at(0))
    elect = only(e.handle(Tick(), at(0)), LeaderElect)
    e.handle(IntentSucceeded(elect, None), at(0))  # type: ignore[arg-type]
    out = e.handle(LeadershipNotification(LeadershipPayload("resigned", "other")), at(1))
    assert out.next_deadline == at(1.025)
    # Our own resignation echo does not wake us.
    e2 = Elector("me", FixedRng(0.5))
    e2.handle(Start(), at(0))
    elect = only(e2.handle(Tick(), at(0)), LeaderElect)
    e2.handle(IntentSucceeded(elect, None), at(0))  # type: ignore[arg-type]
    assert e2.handle(LeadershipNotification(LeadershipPayload("resigned", "me")), at(1)).next_deadline == at(
        5.5
    )


def test_elect_errors_back_off_exponentially_in_cycles_of_seven() -> None:
    e = Elector("me", FixedRng(0.5))  # jitter factor 1.0
    e.handle(Start(), at(0))
    now = at(0)
    waits = []
    for _ in range(8):
        elect = only(e.handle(Tick(), now), LeaderElect)
        out = e.handle(IntentFailed(elect, RuntimeError("db")), now)  # type: ignore[arg-type]
        assert out.next_deadline is not None
        waits.append((out.next_deadline - now).total_seconds())
        now = out.next_deadline
    assert waits == [1, 2, 4, 8, 16, 32, 64, 1]


def test_reelect_every_five_seconds_refreshes_trust() -> None:
    e = elected()
    assert e.handle(Tick(), at(4)).intents == ()
    reelect = only(e.handle(Tick(), at(5.1)), LeaderReelect)
    assert reelect == LeaderReelect(leader_id="me", elected_at=at(0), ttl=timedelta(seconds=15))  # type: ignore[comparison-overlap]
    assert e.timeout_for(reelect) == timedelta(seconds=5)  # type: ignore[arg-type]
    out = e.handle(IntentSucceeded(reelect, leader_row()), at(5.3))  # type: ignore[arg-type]
    assert e.term is not None and e.term.trust_until == at(19.1)
    assert out.next_deadline == at(10.3)


def test_reelect_no_row_loses_leadership_without_resign() -> None:
    e = elected()
    reelect = only(e.handle(Tick(), at(5.1)), LeaderReelect)
    out = e.handle(IntentSucceeded(reelect, None), at(5.1))  # type: ignore[arg-type]
    assert out.lost_leadership and out.intents == ()
    assert e.state is ElectorState.FOLLOWER and out.next_deadline == at(5.1)


def test_reelect_errors_back_off_capped_by_trust_then_step_down() -> None:
    e = elected()
    reelect = only(e.handle(Tick(), at(5.1)), LeaderReelect)
    out = e.handle(IntentFailed(reelect, RuntimeError("x")), at(10))  # type: ignore[arg-type]
    assert out.next_deadline == at(11)
    reelect = only(e.handle(Tick(), at(11)), LeaderReelect)
    assert e.timeout_for(reelect) == timedelta(seconds=3)  # type: ignore[arg-type]
    out = e.handle(IntentFailed(reelect, TimeoutError()), at(13))  # type: ignore[arg-type]
    assert out.next_deadline == at(14)  # 2 s back-off capped at the remaining 1 s
    out = e.handle(Tick(), at(14))
    assert out.lost_leadership
    resign = only(out, LeaderResign)
    assert resign == LeaderResign(leader_id="me", elected_at=at(0))  # type: ignore[comparison-overlap]


def test_trust_timer_steps_down_even_while_reelect_hangs() -> None:
    e = elected()
    only(e.handle(Tick(), at(5.1)), LeaderReelect)
    out = e.handle(Tick(), at(14))
    assert out.lost_leadership and not e.is_leader
    assert e.state is ElectorState.RESIGNING


def test_request_resign_resigns_then_follows() -> None:
    e = elected()
    out = e.handle(LeadershipNotification(LeadershipPayload("request_resign", "")), at(2))
    assert out.lost_leadership
    resign = only(out, LeaderResign)
    out = e.handle(IntentSucceeded(resign, True), at(2.1))  # type: ignore[arg-type]
    assert e.state is ElectorState.FOLLOWER and out.next_deadline == at(2.1)


def test_resign_retries_three_times() -> None:
    e = elected()
    resign = only(e.handle(Stop(), at(1)), LeaderResign)
    assert e.timeout_for(resign) == timedelta(seconds=1)  # type: ignore[arg-type]
    out = e.handle(IntentFailed(resign, RuntimeError()), at(2))  # type: ignore[arg-type]
    assert out.next_deadline == at(3)
    resign = only(e.handle(Tick(), at(3)), LeaderResign)
    assert e.timeout_for(resign) == timedelta(seconds=2)  # type: ignore[arg-type]
    e.handle(IntentFailed(resign, RuntimeError()), at(4))  # type: ignore[arg-type]
    resign = only(e.handle(Tick(), at(6)), LeaderResign)
    out = e.handle(IntentFailed(resign, RuntimeError()), at(9))  # type: ignore[arg-type]
    assert out.stopped and e.state is ElectorState.STOPPED


def test_stop_as_leader_reports_loss_before_resign() -> None:
    e = elected()
    out = e.handle(Stop(), at(1))
    assert out.lost_leadership and isinstance(out.intents[0], LeaderResign)
    out = e.handle(IntentSucceeded(out.intents[0], True), at(1.1))
    assert out.stopped


def test_elect_answered_after_stop_is_resigned() -> None:
    e = Elector("me", FixedRng())
    e.handle(Start(), at(0))
    elect = only(e.handle(Tick(), at(0)), LeaderElect)
    assert e.handle(Stop(), at(0.1)).stopped
    out = e.handle(IntentSucceeded(elect, leader_row()), at(0.2))  # type: ignore[arg-type]
    assert not out.became_leader
    resign = only(out, LeaderResign)
    assert e.handle(IntentSucceeded(resign, True), at(0.3)).stopped


@pytest.mark.parametrize(
    ("setup", "event"),
    [
        ("new", Tick()),
        ("new", LeadershipNotification(LeadershipPayload("resigned", "x"))),
        ("leader", Start()),
        ("follower", Start()),
    ],
)
def test_illegal_events(setup: str, event: object) -> None:
    e = elected() if setup == "leader" else Elector("me", FixedRng())
    if setup == "follower":
        e.handle(Start(), at(0))
    with pytest.raises(ProtocolError):
        e.handle(event, at(1))  # type: ignore[arg-type]


def test_row_for_another_leader_is_rejected() -> None:
    e = Elector("me", FixedRng())
    e.handle(Start(), at(0))
    elect = only(e.handle(Tick(), at(0)), LeaderElect)
    with pytest.raises(ProtocolError):
        e.handle(IntentSucceeded(elect, leader_row(who="other")), at(0))  # type: ignore[arg-type]


def test_config_validation() -> None:
    with pytest.raises(ValidationError):
        Elector("", FixedRng())
    with pytest.raises(ValidationError):
        Elector("me", FixedRng(), ttl=timedelta(seconds=1))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["tick", "ok", "none", "fail", "resigned", "request", "advance"]), st.floats(0, 8)
        ),
        max_size=80,
    ),
    st.randoms(use_true_random=False),
)
def test_never_leader_past_trust_window(steps: list[tuple[str, float]], rng: random.Random) -> None:
    e = Elector("me", rng)
    now = at(0)
    e.handle(Start(), now)
    started_at: dict[int, datetime] = {}
    for kind, dt in steps:
        now += timedelta(seconds=dt)
        flight = next(iter(e.in_flight), None)
        if kind in ("ok", "none", "fail") and flight is not None:
            if kind == "fail":
                out = e.handle(IntentFailed(flight, RuntimeError()), now)
            elif isinstance(flight, LeaderResign):
                out = e.handle(IntentSucceeded(flight, True), now)
            else:
                result = LeaderRow("me", at(0), now) if kind == "ok" else None
                out = e.handle(IntentSucceeded(flight, result), now)
        elif kind in ("resigned", "request"):
            action = "resigned" if kind == "resigned" else "request_resign"
            if e.state is ElectorState.NEW:
                continue
            out = e.handle(LeadershipNotification(LeadershipPayload(action, "x")), now)
        else:
            out = e.handle(Tick(), now)
        for intent in out.intents:
            started_at[id(intent)] = now
        if e.is_leader:
            assert e.term is not None
            assert now < e.term.trust_until
            # Trust never extends beyond TTL - 1 s from some attempt start no later than now.
            assert e.term.trust_until <= now + timedelta(seconds=14)
            assert out.next_deadline is not None and out.next_deadline <= e.term.trust_until
        assert not (out.became_leader and out.lost_leadership)
