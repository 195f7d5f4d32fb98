"""WorkContext and its cancellation token: ``river_async.context``, kept at this import path."""

from river_async.context import (
    AsyncStep,
    CancellationToken,
    WorkContext,
)

__all__ = ["AsyncStep", "CancellationToken", "WorkContext"]
