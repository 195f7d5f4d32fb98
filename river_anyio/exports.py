"""River's client on Postgres or SQLite: the names every driver package exports.

``river_sync``, the threaded driver (one thread per job), is this module as
generated for threads; ``river_trio`` and ``river_asyncio`` export the same
objects and add their own ``Client`` (bound to their event loop) and
``testing``, so the packages cannot drift apart.

One outcome vocabulary is documented: the raised one, Go's (``JobSnooze``,
``JobCancel``, ``JobDiscard``). The returned outcomes (``return Snooze(delay)``:
``Cancel``, ``Completed``, ``Discard``, ``Failed``, ``Snooze``, ``WorkOutcome``)
stay importable from every client package, outside ``__all__``.
"""

from river_anyio.context import CancellationToken, WorkContext
from river_anyio.database import AsyncDatabase
from river_anyio.events import Event, Subscription
from river_anyio.signals import run_until_signalled
from river_anyio.transactions import transaction
from river_db.client_support import ClientStats, ProducerStats
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
    DatabaseNotFoundError,
    DatabaseNotMigratedError,
    DatabaseUnavailableError,
    EncodingError,
    JobNotFoundError,
    MigrationError,
    QueueNotFoundError,
    RiverError,
    RiverProSchemaError,
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
from river_protocol.outcomes import Cancel as Cancel
from river_protocol.outcomes import Completed as Completed
from river_protocol.outcomes import Discard as Discard
from river_protocol.outcomes import Failed as Failed
from river_protocol.outcomes import Snooze as Snooze
from river_protocol.retry import DefaultRetryPolicy, RetryPolicy
from river_protocol.run_log import NO_LOG, JobLogLevels
from river_protocol.states import JobState
from river_protocol.sweeper_status import SweeperStatus
from river_protocol.unique import UniqueOpts
from river_protocol.work import CancelCause, JobCancel, JobDiscard, JobSnooze, WorkCancelled
from river_protocol.work import WorkOutcome as WorkOutcome
from river_protocol.workers import Workers
from river_protocol.workflow import (
    TaskRef,
    WaitTimeoutError,
    Workflow,
    WorkflowInsertResult,
    WorkflowSummary,
    WorkflowTaskFailedError,
    WorkflowView,
)

if True:  # ASYNC
    Database = AsyncDatabase  # river_sync's name for the same role
else:
    from river_anyio.client import Client
    from river_db.version import package_version

    __version__ = package_version()

__all__ = [
    "NO_LOG",
    "AttemptError",
    "CancelCause",
    "CancellationToken",
    "ClientState",
    "ClientStats",
    "ConcurrencyConfig",
    "CronParseError",
    "Database",
    "DatabaseNotFoundError",
    "DatabaseNotMigratedError",
    "DatabaseUnavailableError",
    "DefaultRetryPolicy",
    "EncodingError",
    "Event",
    "EventKind",
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
    "ProducerStats",
    "QueueAlreadyAddedError",
    "QueueConfig",
    "QueueLimits",
    "QueueNotAddedError",
    "QueueNotFoundError",
    "QueueRow",
    "RateLimit",
    "RetryPolicy",
    "RiverError",
    "RiverProSchemaError",
    "SequenceOpts",
    "Subscription",
    "SubscriptionTimeoutError",
    "SweeperStatus",
    "TagFilter",
    "TaskRef",
    "UniqueKeyError",
    "UniqueOpts",
    "ValidationError",
    "WaitTimeoutError",
    "WorkCancelled",
    "WorkContext",
    "Workers",
    "Workflow",
    "WorkflowInsertResult",
    "WorkflowSummary",
    "WorkflowTaskFailedError",
    "WorkflowView",
    "arg_field",
    "run_until_signalled",
    "transaction",
]
if True:  # ASYNC
    __all__ += ["AsyncDatabase"]
else:
    __all__ += ["Client"]
