"""The job row as River stores it, and the error element of ``errors[]``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
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

    @classmethod
    def from_stored(cls, value: Any) -> AttemptError:
        """A decoded element of a stored ``errors`` column, read as leniently as newer River
        reads it (its harness leaf Chaos/DecodeIsolation), so an element in a shape River
        does not write never makes the job unworkable: an ``at`` that is not RFC 3339 is Go's
        zero time, an ``attempt`` written as a decimal string is that number (anything else
        0), an ``error`` or ``trace`` that is not a string is its JSON text, and an element
        that is not an object is an error whose text is the element's JSON.
        """
        if not isinstance(value, dict):
            return cls(GO_ZERO_TIME, 0, _json_text(value))
        at = _text(value.get("at"))
        return cls(
            at=parse_time(at) if _RFC3339.match(at) else GO_ZERO_TIME,
            attempt=_go_atoi(_text(value.get("attempt"))),
            error=_text(value.get("error")),
            trace=_text(value.get("trace")),
        )


# Go's zero time.Time, 0001-01-01T00:00:00Z: what an unreadable attempt time reads as.
GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")
_GO_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_INT64_MAX = 2**63 - 1


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _text(value: Any) -> str:
    # A JSON string is its value, null is empty (Go leaves the string unset), anything
    # else its JSON text.
    if value is None:
        return ""
    return value if isinstance(value, str) else _json_text(value)


def _go_atoi(text: str) -> int:
    # strconv.Atoi with its error ignored: 0 unless the text is a decimal integer, which
    # is clamped to int64's range.
    if not _GO_INT_RE.match(text):
        return 0
    return max(-_INT64_MAX - 1, min(_INT64_MAX, int(text)))


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
