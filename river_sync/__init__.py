"""The threaded driver: River's client on Postgres or SQLite with one thread per job."""

from river_db.events import Event, SubscriptionTimeoutError
from river_db.migrator import Migrator
from river_db.version import package_version
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
from river_protocol.errors import (
    CronParseError,
    DatabaseUnavailableError,
    EncodingError,
    JobNotFoundError,
    MigrationError,
    QueueNotFoundError,
    RiverError,
    UniqueKeyError,
    ValidationError,
)
from river_protocol.flow_control import (
    ConcurrencyConfig,
    PartitionConfig,
    QueueLimits,
    RateLimit,
    SequenceOpts,
)
from river_protocol.intents import InsertResult, QueueRow
from river_protocol.job import AttemptError, JobRow
from river_protocol.leadership import PeriodicJob
from river_protocol.lifecycle import ClientState
from river_protocol.options import InsertOpts
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Snooze
from river_protocol.retry import DefaultRetryPolicy, RetryPolicy
from river_protocol.run_log import NO_LOG, JobLogLevels
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts
from river_protocol.work import CancelCause, JobCancel, JobDiscard, JobSnooze, WorkCancelled, WorkOutcome
from river_protocol.workers import Workers
from river_sync.client import Client, ClientStats
from river_sync.context import CancellationToken, WorkContext
from river_sync.database import Database
from river_sync.events import Subscription
from river_sync.signals import run_until_signalled
from river_sync.transactions import transaction

__version__ = package_version()

__all__ = [
    "NO_LOG",
    "AttemptError",
    "Cancel",
    "CancelCause",
    "CancellationToken",
    "Client",
    "ClientState",
    "ClientStats",
    "Completed",
    "ConcurrencyConfig",
    "CronParseError",
    "Database",
    "DatabaseUnavailableError",
    "DefaultRetryPolicy",
    "Discard",
    "EncodingError",
    "Event",
    "EventKind",
    "Failed",
    "InsertManyParams",
    "InsertOpts",
    "InsertResult",
    "JobCancel",
    "JobDiscard",
    "JobLogLevels",
    "JobNotFoundError",
    "JobPage",
    "JobRow",
    "JobRunningError",
    "JobSnooze",
    "JobState",
    "LeaderElectionConfig",
    "MaintenanceConfig",
    "MigrationError",
    "Migrator",
    "PartitionConfig",
    "PeriodicJob",
    "QueueAlreadyAddedError",
    "QueueConfig",
    "QueueLimits",
    "QueueNotAddedError",
    "QueueNotFoundError",
    "QueueRow",
    "RateLimit",
    "RetryPolicy",
    "RiverError",
    "SequenceOpts",
    "Snooze",
    "Subscription",
    "SubscriptionTimeoutError",
    "TagFilter",
    "UniqueKeyError",
    "UniqueOpts",
    "ValidationError",
    "WorkCancelled",
    "WorkContext",
    "WorkOutcome",
    "Workers",
    "arg_field",
    "run_until_signalled",
    "transaction",
]
