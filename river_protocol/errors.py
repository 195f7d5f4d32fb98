"""Typed errors raised by the protocol core.

Every error a caller can provoke with bad input is a ``ValidationError`` (also a
``ValueError``), so a single ``except`` catches all of them while the message
still says exactly what is wrong.
"""

from __future__ import annotations


class RiverError(Exception):
    """Base class of every error this project raises on purpose."""


class ValidationError(RiverError, ValueError):
    """Input that River would refuse: bad option, name, state, schedule..."""


class EncodingError(ValidationError):
    """A value has no Go ``encoding/json`` equivalent (NaN, year 10000, ...)."""


class CronParseError(ValidationError):
    """A cron expression River's parser (robfig/cron) would reject."""


class UniqueKeyRepeatedError(ValidationError):
    """An insert batch holds two jobs with the same unique key that would both enter the unique
    index. River refuses such a batch whole (on Postgres one statement cannot resolve a conflict
    twice), so nothing of it is inserted; ``positions`` are the batch indexes sharing a key."""

    def __init__(self, message: str, positions: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.positions = positions


class LeaderElectionDisabledError(ValidationError):
    """Something only a leader does was asked of a client whose leader election is disabled
    (``leader_election_disabled=True`` / ``leader_election=False``): periodic jobs, which only
    the leader enqueues, so they would never run."""


class ReservedMetadataKeyError(ValidationError):
    """User metadata names a key under ``river:``, which is River's; ``keys`` are those keys."""

    def __init__(self, message: str, keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.keys = keys


class JobNotRunError(RiverError):
    """A claimed job was failed without running: no worker is registered for its kind, or its
    args or stored row do not decode. The message is the attempt error recorded. The client's
    error handler is handed one, as River Go hands its error handler the unknown-kind or
    decode error, and may cancel the job instead of its retry."""


class UniqueKeyError(RiverError):
    """River's unique-key builder fails on these args (path syntax quirks)."""


class ProtocolError(RiverError):
    """A state machine received an event that is illegal in its current state."""


class MigrationError(RiverError):
    """A migration request cannot be carried out (unknown version, other lines...)."""


class RiverProSchemaError(MigrationError):
    """A migration that rebuilds ``river_job`` (SQLite's version 8, either way) was refused
    because River Pro's schema is installed beside it: the rebuild would drop the parts on that
    table. ``objects`` names what was found; nothing was changed."""

    def __init__(self, message: str, *, version: int, direction: str, objects: tuple[str, ...]) -> None:
        super().__init__(message)
        self.version = version
        self.direction = direction
        self.objects = objects


class JobNotFoundError(RiverError):
    """No job with the requested id exists."""


class QueueNotFoundError(RiverError):
    """No queue with the requested name exists."""


class DatabaseUnavailableError(RiverError, ConnectionError):
    """The database cannot be reached: refused, dropped or shut down connections, a pool that
    got none. The underlying driver error is chained as ``__cause__``; retrying later may work."""


class DatabaseNotMigratedError(RiverError):
    """A client's database lacks River's tables, or holds a schema older than this client needs.

    Raised by a client's start before anything runs. The message names the missing tables,
    the versions applied and needed, and the command that fixes it (``river migrate-up``);
    the same facts are attributes: ``missing_tables``, ``applied_versions``, ``missing_versions``
    and ``required_version``.
    """

    def __init__(
        self,
        message: str,
        *,
        missing_tables: tuple[str, ...] = (),
        applied_versions: tuple[int, ...] = (),
        missing_versions: tuple[int, ...] = (),
        required_version: int | None = None,
    ) -> None:
        super().__init__(message)
        self.missing_tables = missing_tables
        self.applied_versions = applied_versions
        self.missing_versions = missing_versions
        self.required_version = required_version


class DatabaseNotFoundError(DatabaseNotMigratedError, FileNotFoundError):
    """A SQLite file a client was pointed at does not exist: refused rather than created empty
    (an empty file has no tables; ``river migrate-up`` creates and migrates it)."""
