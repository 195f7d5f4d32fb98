"""The async executor and its thread runner: ``river_async.executor``, kept at this import path."""

from river_async.executor import (
    CANCEL_TIMEOUT,
    AsyncExecutor,
    PlanRunner,
    ThreadRunner,
    connection_kind,
)

__all__ = ["CANCEL_TIMEOUT", "AsyncExecutor", "PlanRunner", "ThreadRunner", "connection_kind"]
