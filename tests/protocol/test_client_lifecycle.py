"""The client lifecycle table both drivers follow (river_protocol.lifecycle)."""

from __future__ import annotations

import pytest

from river_protocol.errors import ProtocolError
from river_protocol.lifecycle import CLIENT_TRANSITIONS, ClientState, Lifecycle


def _at(state: ClientState) -> Lifecycle:
    path = {
        ClientState.NEW: [],
        ClientState.STARTING: [ClientState.STARTING],
        ClientState.STARTED: [ClientState.STARTING, ClientState.STARTED],
        ClientState.STOPPING: [ClientState.STARTING, ClientState.STARTED, ClientState.STOPPING],
        ClientState.STOPPED: [ClientState.STARTING, ClientState.STARTED, ClientState.STOPPING,
                              ClientState.STOPPED],
    }[state]
    life = Lifecycle()
    for step in path:
        life.advance(step)
    return life


def test_the_table_covers_every_state_and_stopped_is_final() -> None:
    assert set(CLIENT_TRANSITIONS) == set(ClientState)
    assert CLIENT_TRANSITIONS[ClientState.STOPPED] == frozenset()
    # Every state but STOPPED can reach STOPPED.
    for state in ClientState:
        seen, frontier = {state}, [state]
        while frontier:
            for nxt in CLIENT_TRANSITIONS[frontier.pop()] - seen:
                seen.add(nxt)
                frontier.append(nxt)
        assert ClientState.STOPPED in seen


@pytest.mark.parametrize("origin", list(ClientState))
@pytest.mark.parametrize("target", list(ClientState))
def test_advance_follows_the_table_exactly(origin: ClientState, target: ClientState) -> None:
    life = _at(origin)
    if target in CLIENT_TRANSITIONS[origin]:
        life.advance(target)
        assert life.state is target
    else:
        with pytest.raises(ProtocolError, match=f"from {origin} to {target}"):
            life.advance(target)
        assert life.state is origin


def test_states_read_as_their_old_strings() -> None:
    # Logs and messages said "new", "started"...; a StrEnum keeps them reading the same.
    assert [str(s) for s in ClientState] == ["new", "starting", "started", "stopping", "stopped"]


@pytest.mark.parametrize("origin", [ClientState.NEW, ClientState.STARTING, ClientState.STARTED,
                                    ClientState.STOPPING])
def test_end_reaches_stopped_from_any_live_state(origin: ClientState) -> None:
    life = _at(origin)
    life.end()
    assert life.state is ClientState.STOPPED
    with pytest.raises(ProtocolError):
        life.end()


def test_running_and_ending() -> None:
    flags = {s: (_at(s).running, _at(s).ending) for s in ClientState}
    assert flags == {
        ClientState.NEW: (False, False),
        ClientState.STARTING: (False, False),
        ClientState.STARTED: (True, False),
        ClientState.STOPPING: (False, True),
        ClientState.STOPPED: (False, True),
    }
