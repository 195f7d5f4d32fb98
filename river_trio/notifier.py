"""Receiving River notifications: ``river_anyio.notifier``, kept at this import path."""

from river_anyio.notifier import (
    BUFFER_SIZE,
    PING_INTERVAL,
    SQLITE_POLL_INTERVAL,
    Notifier,
    NotifierProtocol,
    NullNotifier,
    SQLiteNotifier,
    Subscription,
    default_backoff,
    notifier_for,
)

__all__ = [
    "BUFFER_SIZE",
    "PING_INTERVAL",
    "SQLITE_POLL_INTERVAL",
    "Notifier",
    "NotifierProtocol",
    "NullNotifier",
    "SQLiteNotifier",
    "Subscription",
    "default_backoff",
    "notifier_for",
]
