"""A client's lifecycle states and the moves between them, in one table for both drivers.

``river_sync.Client`` and ``river_anyio``'s client start and stop differently (a
thread per machine / tasks in a nursery), but they pass through the same
states, so code and tests that look at ``client.state`` read the same on
either. A move the table does not list is a bug in the driver and raises at
once, as the job-state table does.
"""

from __future__ import annotations

import enum

from river_protocol.errors import ProtocolError


class ClientState(enum.StrEnum):
    NEW = "new"  # built; may be configured; an insert-only client may insert
    STARTING = "starting"  # its machines are being started
    STARTED = "started"  # working its queues (or, insert-only, ready)
    STOPPING = "stopping"  # no more fetching; running jobs finish, outcomes flush
    STOPPED = "stopped"  # everything it started has ended; it cannot start again


# A client never restarts: STOPPED is final. A never-started client may stop at once,
# and a start that fails part way goes through STOPPING like any stop.
CLIENT_TRANSITIONS: dict[ClientState, frozenset[ClientState]] = {
    ClientState.NEW: frozenset({ClientState.STARTING, ClientState.STOPPING, ClientState.STOPPED}),
    ClientState.STARTING: frozenset({ClientState.STARTED, ClientState.STOPPING}),
    ClientState.STARTED: frozenset({ClientState.STOPPING}),
    ClientState.STOPPING: frozenset({ClientState.STOPPED}),
    ClientState.STOPPED: frozenset(),
}


class Lifecycle:
    """One client's current state; ``advance`` refuses any move the table lacks."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = ClientState.NEW

    def advance(self, to: ClientState) -> None:
        if to not in CLIENT_TRANSITIONS[self.state]:
            raise ProtocolError(f"a client cannot go from {self.state} to {to}")
        self.state = to

    def end(self) -> None:
        """Move to STOPPED, through STOPPING when a failed start never got there."""
        if self.state is not ClientState.STOPPING:
            self.advance(ClientState.STOPPING)
        self.advance(ClientState.STOPPED)

    @property
    def running(self) -> bool:
        """Started and not yet stopping: the only state in which producers take new work."""
        return self.state is ClientState.STARTED

    @property
    def ending(self) -> bool:
        return self.state in (ClientState.STOPPING, ClientState.STOPPED)
