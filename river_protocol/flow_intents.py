"""The intents of flow control (river_protocol.flow_control): the limited claim, and the
``river_py_queue_limit`` rows that hold each limited queue's limits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from river_protocol.errors import ValidationError
from river_protocol.flow_control import FlowControl, PartitionConfig, QueueLimits
from river_protocol.intents import ClaimJobs, Intent
from river_protocol.options import validate_queue_name

MIGRATE_HINT = "run `river migrate-up --line python`"


@dataclass(frozen=True, slots=True)
class ClaimLimitedJobs(Intent):
    """``claim`` under ``flow``'s rule (flow_control's module docstring), serialised with every
    other limited claim of the queue on the database. The limits are read from the queue's
    ``river_py_queue_limit`` row inside the claim (``flow.limits`` when there is none), so a
    change there holds from the next claim on. Result: the claimed ``JobRow`` list."""

    claim: ClaimJobs
    flow: FlowControl
    transactional = True


@dataclass(frozen=True, slots=True)
class SetQueueLimits(Intent):
    """Write ``queue``'s limits (and, for display, its partitions) to ``river_py_queue_limit``.

    Fails with a ``MigrationError`` naming the command when the ``python`` migration line is
    not applied. Result: None."""

    queue: str
    limits: QueueLimits
    concurrency_partition: PartitionConfig | None = None
    rate_partition: PartitionConfig | None = None
    transactional = True


@dataclass(frozen=True, slots=True)
class QueueLimitRow:
    queue: str
    limits: QueueLimits
    concurrency_partition: PartitionConfig
    rate_partition: PartitionConfig
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ListQueueLimits(Intent):
    """Every ``river_py_queue_limit`` row (``[]`` when the python line is not applied)."""


@dataclass(frozen=True, slots=True)
class PartitionUsage:
    key: str  # the partition's values as JSON text
    running: int


@dataclass(frozen=True, slots=True)
class BusiestPartitions(Intent):
    """The ``top`` partitions of ``queue`` with the most running jobs, busiest first."""

    queue: str
    partition: PartitionConfig
    top: int = 5


@dataclass(frozen=True, slots=True)
class UpdateQueueLimits(Intent):
    """Change ``queue``'s limit numbers at runtime (every client's next claim obeys them),
    keeping its partitions; a queue with no row yet gets one. Fails with a ``MigrationError``
    naming the command when the ``python`` line is not applied. Result: None."""

    queue: str
    limits: QueueLimits
    transactional = True


def update_limits_intent(queue: str, limits: QueueLimits) -> UpdateQueueLimits:
    """``UpdateQueueLimits`` for a change asked at runtime (``client.queues.set_limits``,
    ``river queues set-limit``): a typed error, nothing written, for a bad name or limits."""
    if not isinstance(limits, QueueLimits):
        raise ValidationError(f"limits must be a QueueLimits, got {type(limits).__name__}")
    validate_queue_name(queue)
    return UpdateQueueLimits(queue, limits)


@dataclass(frozen=True, slots=True)
class QueueFlowStatus:
    """One limited queue as ``river queues list`` and ``client.queues.flow_status()`` show it."""

    queue: str
    limits: QueueLimits
    concurrency_partition: PartitionConfig
    rate_partition: PartitionConfig
    updated_at: datetime
    running: int
    busiest: tuple[PartitionUsage, ...]


@dataclass(frozen=True, slots=True)
class GetFlowStatus(Intent):
    """Every limited queue with its limits, its running jobs and its ``top`` busiest
    partitions (``[]`` when the python line is not applied)."""

    top: int = 5


def flow_status_intent(top: int = 5) -> GetFlowStatus:
    """``GetFlowStatus`` as ``client.queues.flow_status(top=)`` asks it: ``top`` a whole number
    from 0 (a negative LIMIT fails on Postgres and means none on SQLite)."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValidationError(f"top must be a whole number, 0 or more, got {top!r}")
    return GetFlowStatus(top)
