"""The threaded driver: River's client on Postgres or SQLite with one thread per job."""

from river_protocol.client_core import (
    EventKind,
    InsertManyParams,
    LeaderElectionConfig,
    MaintenanceConfig,
    QueueConfig,
)
from river_protocol.intents import InsertResult
from river_protocol.job import AttemptError, JobRow
from river_protocol.leadership import PeriodicJob
from river_protocol.options import InsertOpts
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Snooze
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts
from river_protocol.work import CancelCause, JobCancel, JobDiscard, JobSnooze, WorkCancelled, WorkOutcome
from river_protocol.workers import Workers
from river_sync.client import Client, ClientStats
from river_sync.context import CancellationToken, WorkContext
from river_sync.database import Database
from river_sync.events import Event, Subscription

__all__ = [
    "AttemptError",
    "Cancel",
    "CancelCause",
    "CancellationToken",
    "Client",
    "ClientStats",
    "Completed",
    "Database",
    "Discard",
    "Event",
    "EventKind",
    "Failed",
    "InsertManyParams",
    "InsertOpts",
    "InsertResult",
    "JobCancel",
    "JobDiscard",
    "JobRow",
    "JobSnooze",
    "JobState",
    "LeaderElectionConfig",
    "MaintenanceConfig",
    "PeriodicJob",
    "QueueConfig",
    "Snooze",
    "Subscription",
    "UniqueOpts",
    "WorkCancelled",
    "WorkContext",
    "WorkOutcome",
    "Workers",
]
