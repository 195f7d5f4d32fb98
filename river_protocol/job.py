"""The job row as River stores it, and the error element of ``errors[]``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from river_protocol.golang.gotime import GoTime, format_rfc3339nano, parse_time
from river_protocol.states import JobState


@dataclass(frozen=True, slots=True)
class AttemptError:
    """One element of ``river_job.errors``: Go's ``rivertype.AttemptError``."""

    at: datetime
    attempt: int
    error: str
    trace: str = ""

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> AttemptError:
        return cls(
            at=parse_time(value["at"]),
            attempt=int(value["attempt"]),
            error=str(value.get("error", "")),
            trace=str(value.get("trace", "")),
        )


def encode_attempt_error(at: datetime | GoTime, attempt: int, error: str, trace: str = "") -> bytes:
    """The element's JSON exactly as Go's ``json.Marshal`` writes it (field order, HTML escaping)."""
    from river_protocol.golang.encoding_json import encode_go_string

    return (
        b'{"at":' + encode_go_string(format_rfc3339nano(at))
        + b',"attempt":' + str(int(attempt)).encode()
        + b',"error":' + encode_go_string(error)
        + b',"trace":' + encode_go_string(trace) + b"}"
    )


@dataclass(frozen=True, slots=True)
class JobRow:
    """Every column of ``river_job``; ``encoded_args`` are the stored JSON bytes.

    ``undecodable`` is set when some stored value could not be read (a row
    another writer got wrong): it says which columns and why, and those
    columns hold neutral placeholders. Such a job is failed, never worked.
    """

    id: int
    kind: str
    encoded_args: bytes
    state: JobState
    queue: str = "default"
    priority: int = 1
    attempt: int = 0
    max_attempts: int = 25
    attempted_at: datetime | None = None
    attempted_by: tuple[str, ...] = ()
    created_at: datetime | None = None
    finalized_at: datetime | None = None
    scheduled_at: datetime | None = None
    errors: tuple[AttemptError, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    unique_key: bytes | None = None
    unique_states: int | None = None
    undecodable: str | None = None

    @property
    def args(self) -> Any:
        return json.loads(self.encoded_args)

    @property
    def finalized(self) -> bool:
        return self.state.finalized


class _JobRowDraft:
    """A mutable object with ``JobRow``'s exact slot layout, retyped once filled.

    A frozen dataclass's ``__init__`` stores each field through
    ``object.__setattr__``, which is most of the cost of building a row; rows are
    built for every claimed and every completed job. Filling this twin with plain
    attribute stores and then assigning ``__class__`` (allowed between classes with
    identical slots) gives the same frozen ``JobRow`` several times faster.
    """

    __slots__ = JobRow.__slots__


def stored_job_row(
    id: int, kind: str, encoded_args: bytes, state: JobState, queue: str, priority: int,
    attempt: int, max_attempts: int, attempted_at: datetime | None, attempted_by: tuple[str, ...],
    created_at: datetime | None, finalized_at: datetime | None, scheduled_at: datetime | None,
    errors: tuple[AttemptError, ...], metadata: dict[str, Any], tags: tuple[str, ...],
    unique_key: bytes | None, unique_states: int | None, undecodable: str | None = None,
) -> JobRow:
    """``JobRow(...)`` with every field given, for values already checked by a row reader."""
    row: Any = _JobRowDraft()
    row.id = id
    row.kind = kind
    row.encoded_args = encoded_args
    row.state = state
    row.queue = queue
    row.priority = priority
    row.attempt = attempt
    row.max_attempts = max_attempts
    row.attempted_at = attempted_at
    row.attempted_by = attempted_by
    row.created_at = created_at
    row.finalized_at = finalized_at
    row.scheduled_at = scheduled_at
    row.errors = errors
    row.metadata = metadata
    row.tags = tags
    row.unique_key = unique_key
    row.unique_states = unique_states
    row.undecodable = undecodable
    row.__class__ = JobRow
    result: JobRow = row
    return result
