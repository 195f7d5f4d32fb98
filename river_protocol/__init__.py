"""River's job protocol as a pure, sans-IO core.

No sockets, threads, drivers, clocks or randomness: every input (rows, work
outcomes, notifications, ``now``, random draws) is passed in, and every
database effect comes out as a typed intent that a dialect renders to SQL.
"""

from river_protocol.errors import (
    CronParseError,
    EncodingError,
    JobNotFoundError,
    MigrationError,
    ProtocolError,
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
from river_protocol.job import AttemptError, JobRow
from river_protocol.states import JobState

__all__ = [
    "AttemptError",
    "ConcurrencyConfig",
    "CronParseError",
    "EncodingError",
    "JobNotFoundError",
    "JobRow",
    "JobState",
    "MigrationError",
    "PartitionConfig",
    "ProtocolError",
    "QueueLimits",
    "QueueNotFoundError",
    "RateLimit",
    "RiverError",
    "RiverProSchemaError",
    "SequenceOpts",
    "UniqueKeyError",
    "ValidationError",
]
