"""Client events for subscribers: ``river_async.events``, kept at this import path."""

from river_async.events import (
    Event,
    EventHub,
    Subscription,
    SubscriptionTimeoutError,
)

__all__ = ["Event", "EventHub", "Subscription", "SubscriptionTimeoutError"]
