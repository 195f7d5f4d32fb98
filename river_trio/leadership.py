"""The elector and leader-only services: ``river_async.leadership``, kept at this import path."""

from river_async.leadership import (
    ELECTOR_STOP_WAIT,
    SERVICE_STOP_WAIT,
    LeaderDriver,
)

__all__ = ["ELECTOR_STOP_WAIT", "SERVICE_STOP_WAIT", "LeaderDriver"]
