"""Whether LISTEN works on a connection: a notification to ourselves, for both drivers.

Behind a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``) a
LISTEN runs on whichever server connection the pooler lent for that statement,
and that connection goes back to the pool at once: notifications for it are
never read, and the listener hears nothing. Nothing fails, so it has to be
probed: once the listener listens on a private topic, a second connection sends
a notification there, and it must arrive within ``PROBE_TIMEOUT``. The second
connection matters: a backend delivers its own notifications to itself, so a
NOTIFY on the listener's connection would arrive even through the pooler.

When the probe fails the client polls instead (``ClientCore.listener_unavailable``)
and ``warn_unavailable`` says once why and how to get notifications back.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from river_db.notify_settings import MAX_CHANNEL_BYTES, PROBE_TIMEOUT
from river_db.urls import parse_database_url
from river_protocol.errors import ValidationError

_TOPIC_PREFIX = "river_probe_"


@dataclass(frozen=True, slots=True)
class ListenProbe:
    """One probe: a topic no one else listens on and a token only this probe sends."""

    topic: str = field(default_factory=lambda: _TOPIC_PREFIX + secrets.token_hex(6))
    token: str = field(default_factory=lambda: secrets.token_hex(8))
    timeout: float = PROBE_TIMEOUT

    def fits(self, prefix: str) -> bool:
        """Whether ``<prefix><topic>`` is a channel name Postgres keeps whole (a very long schema
        name leaves no room: then there is no probe, and LISTEN is assumed to work)."""
        return len((prefix + self.topic).encode()) <= MAX_CHANNEL_BYTES

    def answered_by(self, payload: str) -> bool:
        return payload == self.token

    def send(self, conn: Any, prefix: str) -> None:
        """Send the probe on ``conn``, a connection other than the listener's (then closed)."""
        try:
            conn.execute("SELECT pg_notify(%s, %s)", (prefix + self.topic, self.token), prepare=False)
        finally:
            conn.close()


def notifications_setting(notifications: bool | str, dialect: str) -> tuple[bool, str | None]:
    """A client's ``notifications`` argument as (listen at all, the listener's own URL or None).

    A string is a Postgres URL for the listener alone (a direct or session-pooled one when
    the client's database is reached through a transaction pooler).
    """
    if isinstance(notifications, bool):
        return notifications, None
    if not isinstance(notifications, str):
        raise ValidationError(
            f"notifications must be True, False or a postgresql:// URL for the listener, "
            f"got {type(notifications).__name__}"
        )
    if dialect != "postgres":
        raise ValidationError("a notifications URL needs a Postgres database: SQLite's notifications "
                              "are its outbox table (use notifications=True)")
    if parse_database_url(notifications).dialect != "postgres":
        raise ValidationError(f"the notifications URL must be a postgresql:// URL, got {notifications!r}")
    return True, notifications


def warn_unavailable(log: logging.Logger, timeout: float = PROBE_TIMEOUT) -> None:
    """The one WARNING a client logs when its listener hears nothing."""
    log.warning(
        "river: LISTEN/NOTIFY does not work on this connection: a notification sent to ourselves "
        "did not arrive within %.1f s. A connection pooler in transaction mode (PgBouncer's "
        "pool_mode = transaction) lends each statement any server connection, so a LISTEN is "
        "never read. Polling instead: each queue fetches every fetch_poll_interval, queue settings "
        "and leadership are polled, and inserts are picked up at the next poll rather than at once. "
        "To get notifications, give the listener a connection of its own: "
        "Client(..., notifications=\"postgresql://...\") with a direct or session-pooled URL, "
        "or notifications=False to poll without this probe.",
        timeout,
    )
