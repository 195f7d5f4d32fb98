"""The names ``river_trio`` and ``river_asyncio`` both export, as the same objects.

Each driver package adds its own ``Client`` (this list less the one class bound
to an event loop) and ``testing``; everything else is shared, so the two
packages cannot drift apart (``tests/test_parity.py`` checks they don't).
"""

from river_async.context import CancellationToken, WorkContext
from river_async.database import AsyncDatabase
from river_async.events import Event, Subscription
from river_async.signals import run_until_signalled
from river_async.transactions import transaction
from river_db.client_support import ClientStats
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

Database = AsyncDatabase  # river_sync's name for the same role

__all__ = [
    "NO_LOG",
    "AsyncDatabase",
    "AttemptError",
    "Cancel",
    "CancelCause",
    "CancellationToken",
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
