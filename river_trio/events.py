"""Client events for subscribers: ``river_anyio.events``, kept at this import path."""

from river_anyio.events import (
    Event,
    EventHub,
    Subscription,
    SubscriptionTimeoutError,
)

__all__ = ["Event", "EventHub", "Subscription", "SubscriptionTimeoutError"]
