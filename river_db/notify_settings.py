"""Notifier timings and reconnect back-off, the same for both drivers' notifiers."""

from __future__ import annotations

import random

BUFFER_SIZE = 1000
PING_INTERVAL = 5.0
LISTENER_TIMEOUT = 10.0
SQLITE_POLL_INTERVAL = 0.05
MAX_CHANNEL_BYTES = 63
_BACKOFF_RESET_AFTER = 10


def default_backoff(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before reconnect ``attempt`` (1-based): 1, 2, 4, ... 512, then
    starting over, each ±10 % so a fleet doesn't reconnect in lockstep."""
    base = 2.0 ** ((max(attempt, 1) - 1) % _BACKOFF_RESET_AFTER)
    return base * (rng or random).uniform(0.9, 1.1)
# How long a listener waits, once at start, for the notification it sent itself (listen_probe).
PROBE_TIMEOUT = 2.0
