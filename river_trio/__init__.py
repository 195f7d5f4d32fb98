"""The trio driver: River's client on Postgres or SQLite with jobs as trio tasks.

Names mirror ``river_sync`` one for one; methods that do I/O are async.
"""

from river_db.events import SubscriptionTimeoutError
from river_db.migrator import Migrator
from river_protocol.admin import JobPage, JobRunningError, QueueAlreadyAddedError, QueueNotAddedError
from river_protocol.args import arg_field
from river_protocol.claim_filters import TagFilter
from river_protocol.client_core import (
    EventKind,
    InsertManyParams,
    LeaderElectionConfig,
    MaintenanceConfig,
    QueueConfig,
)
from river_protocol.errors import DatabaseUnavailableError, JobNotFoundError, QueueNotFoundError
from river_protocol.intents import InsertResult, QueueRow
from river_protocol.job import AttemptError, JobRow
from river_protocol.leadership import PeriodicJob
from river_protocol.lifecycle import ClientState
from river_protocol.options import InsertOpts
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Snooze
from river_protocol.retry import DefaultRetryPolicy, RetryPolicy
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts
from river_protocol.work import CancelCause, JobCancel, JobDiscard, JobSnooze, WorkCancelled, WorkOutcome
from river_protocol.workers import Workers
from river_trio.client import Client, ClientStats
from river_trio.context import CancellationToken, WorkContext
from river_trio.database import AsyncDatabase
from river_trio.events import Event, Subscription
from river_trio.signals import run_until_signalled
from river_trio.transactions import transaction

Database = AsyncDatabase  # river_sync's name for the same role

__all__ = [
    "AsyncDatabase",
    "AttemptError",
    "Cancel",
    "CancelCause",
    "CancellationToken",
    "Client",
    "ClientState",
    "ClientStats",
    "Completed",
    "Database",
    "DatabaseUnavailableError",
    "DefaultRetryPolicy",
    "Discard",
    "Event",
    "EventKind",
    "Failed",
    "InsertManyParams",
    "InsertOpts",
    "InsertResult",
    "JobCancel",
    "JobDiscard",
    "JobNotFoundError",
    "JobPage",
    "JobRow",
    "JobRunningError",
    "JobSnooze",
    "JobState",
    "LeaderElectionConfig",
    "MaintenanceConfig",
    "Migrator",
    "PeriodicJob",
    "QueueAlreadyAddedError",
    "QueueConfig",
    "QueueNotAddedError",
    "QueueNotFoundError",
    "QueueRow",
    "RetryPolicy",
    "Snooze",
    "Subscription",
    "SubscriptionTimeoutError",
    "TagFilter",
    "UniqueOpts",
    "WorkCancelled",
    "WorkContext",
    "WorkOutcome",
    "Workers",
    "arg_field",
    "run_until_signalled",
    "transaction",
]
