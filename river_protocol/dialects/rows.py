"""Result rows -> values, and the parameter binder both dialects build SQL with.

Every statement selects job, queue and leader columns through the column
lists below, in one fixed order, so one parser per dialect reads them all.
Postgres hands back typed values (JSON is selected as text so the stored
bytes survive); SQLite hands back text everywhere, and some of it was written
by Go in forms our own writers never produce (``time.String()`` timestamps,
nine fractional digits in error times), so its parser is lenient.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.golang.gotime import _parse_time_cached, format_sqlite_time, parse_time
from river_protocol.intents import LeaderRow, LeaseRead, LeaseRow, NotificationRow, QueueRow
from river_protocol.job import AttemptError, JobRow, stored_job_row
from river_protocol.states import JobState

# ---------------------------------------------------------------- binder


class Binder:
    """Collects parameters in the order their placeholders are written.

    SQL is assembled with f-strings calling ``p(value)``; Python evaluates the
    pieces left to right, so the placeholder order always matches ``params``.
    """

    def __init__(self, placeholder: str) -> None:
        self.placeholder = placeholder
        self.params: list[Any] = []

    def p(self, value: Any) -> str:
        self.params.append(value)
        return self.placeholder


# Written timestamps keep one text shape so that the lexicographic comparisons
# River relies on stay correct: datetime() with 'subsec' prints exactly three
# fractional digits, as format_sqlite_time does for parameters.
SQLITE_DB_NOW = "datetime('now', 'subsec')"


def sqlite_now(b: Binder, now: datetime | None) -> str:
    return SQLITE_DB_NOW if now is None else b.p(format_sqlite_time(now))


# ---------------------------------------------------------------- column lists

_JOB_FIELDS = (
    "id", "kind", "args", "state", "queue", "priority", "attempt", "max_attempts",
    "attempted_at", "attempted_by", "created_at", "finalized_at", "scheduled_at",
    "errors", "metadata", "tags", "unique_key", "unique_states",
)

# attempted_by and tags come back as JSON text: psycopg builds a list for each array element by
# element (about 0.25 us a column a row, even empty), while one JSON text is read once per
# distinct value (``_strings_of_text`` remembers them; a claim's rows share one client id).
_PG_CASTS = {
    "args": "{}::text",
    "state": "{}::text",
    "attempted_by": "array_to_json({})::text",
    "errors": "{}::text[]",
    "metadata": "{}::text",
    "tags": "array_to_json({})::text",
    "unique_states": "{}::int",
}

# json() raises on a malformed value, which would fail the whole statement: one row another
# writer got wrong would stall its queue. Such a value comes back as stored instead, for the
# lenient reader to mark (json_valid flags 10: JSON5 text, or JSONB that json() can read).
SQLITE_JSON_GENERAL = "CASE WHEN json_valid({0}, 10) THEN json({0}) ELSE {0} END"
# Most stored values are NULL (no errors or attempts yet) or the one-byte JSONB of {} or [] (no
# args, metadata or tags): those are answered by a comparison, with no json_valid()/json() call
# per column per row. JSONB heads its value with one byte, type in the low nibble (11 array,
# 12 object) and payload size in the high one, so an empty array is x'0b' and an empty object
# x'0c'. Anything else, text '{}' included, takes the general path; the answer is the same
# (tests/db/test_sqlite_json_fast_path.py checks the two agree on any value).
SQLITE_JSON = ("CASE WHEN {0} IS NULL THEN NULL WHEN {0} = x'0c' THEN '{{}}' WHEN {0} = x'0b' THEN '[]'"
               " WHEN json_valid({0}, 10) THEN json({0}) ELSE {0} END")
_SQLITE_CASTS = {
    "args": SQLITE_JSON,
    "attempted_by": SQLITE_JSON,
    "errors": SQLITE_JSON,
    "metadata": SQLITE_JSON,
    "tags": SQLITE_JSON,
}


def _columns(casts: dict[str, str], alias: str) -> str:
    qualifier = f"{alias}." if alias else ""
    return ", ".join(casts.get(f, "{}").format(qualifier + f) for f in _JOB_FIELDS)


def pg_job_columns(alias: str = "") -> str:
    return _columns(_PG_CASTS, alias)


# A completion's read-back of a claimed run on Postgres: what a set-state update can change
# (``completed_row`` takes the rest from the claim), the other columns NULL, typed as
# ``pg_job_columns`` types them so that the slim rows and whole ones share one UNION.
_PG_CHANGEABLE = frozenset(("id", "state", "attempt", "attempted_at", "finalized_at", "scheduled_at",
                            "errors", "metadata"))
_PG_NULLS = {"kind": "text", "args": "text", "queue": "text", "priority": "smallint",
             "max_attempts": "smallint", "attempted_by": "text", "created_at": "timestamptz",
             "tags": "text", "unique_key": "bytea", "unique_states": "int"}


def pg_slim_job_columns(alias: str) -> str:
    """``pg_job_columns(alias)`` with only what a completion can change; the rest NULL."""
    return ", ".join(
        _PG_CASTS.get(f, "{}").format(f"{alias}.{f}") if f in _PG_CHANGEABLE else f"NULL::{_PG_NULLS[f]}"
        for f in _JOB_FIELDS
    )


def pg_changeable_columns(alias: str) -> str:
    """The columns ``pg_slim_job_columns`` reads, as they are stored (an UPDATE's RETURNING)."""
    return ", ".join(f"{alias}.{f}" for f in _JOB_FIELDS if f in _PG_CHANGEABLE)


def sqlite_job_columns(alias: str = "") -> str:
    return _columns(_SQLITE_CASTS, alias)


JOB_COLUMN_COUNT = len(_JOB_FIELDS)
PG_QUEUE_COLUMNS = "name, created_at, metadata::text, paused_at, updated_at"
SQLITE_QUEUE_COLUMNS = "name, created_at, json(metadata), paused_at, updated_at"
LEADER_COLUMNS = "leader_id, elected_at, expires_at"
NOTIFICATION_COLUMNS = "id, topic, payload, created_at"

# ---------------------------------------------------------------- scalar readers


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        return parse_time(value)
    if isinstance(value, (int, float)):
        # Some SQLite writers store unix seconds; accept them rather than fail the row.
        return datetime.fromtimestamp(value, UTC)
    raise ValidationError(f"cannot read {value!r} as a time")


def _utc_or_none(value: Any) -> datetime | None:
    return None if value is None else _utc(value)


def _json_text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode()
    if isinstance(value, str):
        return value
    raise ValidationError(f"expected JSON text, got {value!r}")


def _json_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return _json_text(value).encode()


def _json_object(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    loaded = json.loads(_json_text(value))
    if not isinstance(loaded, dict):
        raise ValidationError(f"metadata must be a JSON object, found {loaded!r}"[:200])
    return loaded


def _strings_raw(value: Any) -> Sequence[Any]:
    if value is None or value == "[]":
        return ()
    if isinstance(value, (list, tuple)):
        return value
    loaded = json.loads(_json_text(value))
    if loaded is None:
        return ()
    if not isinstance(loaded, list):
        raise ValidationError(f"expected a JSON array of strings, found {loaded!r}"[:200])
    return loaded


def _strings(value: Any) -> tuple[str, ...]:
    cls = value.__class__
    if cls is list:  # Postgres's text[]: checked inline, every claimed and completed row has two
        for s in value:
            if s.__class__ is not str:
                return _checked_strings(value)  # raises
        return tuple(value)
    if cls is str:
        return _strings_of_text(value)
    return _checked_strings(_strings_raw(value))


def _checked_strings(strings: Sequence[Any]) -> tuple[str, ...]:
    for s in strings:
        if s.__class__ is not str:
            raise ValidationError(f"expected strings, found {s!r}")
    return tuple(strings)


# SQLite hands attempted_by and tags back as JSON text, the same text for every job of a
# claim (one client id); the tuples are immutable, so recent texts are remembered.
@functools.lru_cache(maxsize=1024)
def _strings_of_text(text: str) -> tuple[str, ...]:
    return _checked_strings(_strings_raw(text))


def _errors(elements: Sequence[Any]) -> tuple[AttemptError, ...]:
    out = []
    for element in elements:
        value = json.loads(_json_text(element)) if not isinstance(element, dict) else element
        out.append(AttemptError.from_stored(value))
    return tuple(out)


def _unique_key(value: Any) -> bytes | None:
    if value is None:
        return None
    key = bytes(value) if not isinstance(value, str) else bytes.fromhex(value)
    return key or None


def _unique_states(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        # A bit(8) string read without the integer cast.
        return int(value, 2) or None
    return int(value) or None


# ---------------------------------------------------------------- rows


def job_row_from_pg(row: Sequence[Any]) -> JobRow:
    """A row selected with ``pg_job_columns()``."""
    try:
        if len(row) == JOB_COLUMN_COUNT:
            job = _common_pg_row(*row)
            if job is not None:
                return job
        errors = row[13]
        return _job_row(row, errors=_errors(errors) if errors is not None else ())
    except _UNREADABLE:
        return _lenient_job_row(row, _pg_error_elements)


def _common_pg_row(
    job_id: Any, kind: Any, args: Any, state: Any, queue: Any, priority: Any, attempt: Any,
    max_attempts: Any, attempted_at: Any, attempted_by: Any, created_at: Any, finalized_at: Any,
    scheduled_at: Any, errors: Any, metadata: Any, tags: Any, unique_key: Any, unique_states: Any,
) -> JobRow | None:
    """The row every claim and completion of a plain job returns, built with no conversion; None
    for any other shape, which ``_job_row`` (and after it the lenient reader) reads instead.

    psycopg's binary results hand back exact ints and strs (attempted_by and tags as JSON text,
    see ``_PG_CASTS``), and aware datetimes on the one shared UTC (``with_utc_session``): each
    column is only checked for that type.
    """
    if not (
        errors is None and metadata == "{}" and unique_key is None and unique_states is None
        and job_id.__class__ is int and kind.__class__ is str and queue.__class__ is str
        and args.__class__ is str and args[:1] == "{"
        and priority.__class__ is int and attempt.__class__ is int and max_attempts.__class__ is int
        and (attempted_at is None or (attempted_at.__class__ is datetime and attempted_at.tzinfo is UTC))
        and (created_at is None or (created_at.__class__ is datetime and created_at.tzinfo is UTC))
        and (finalized_at is None or (finalized_at.__class__ is datetime and finalized_at.tzinfo is UTC))
        and (scheduled_at is None or (scheduled_at.__class__ is datetime and scheduled_at.tzinfo is UTC))
        and (attempted_by is None or attempted_by.__class__ is str)
        and (tags is None or tags.__class__ is str)
    ):
        return None
    job_state = _STATES.get(state)
    if job_state is None:
        return None
    try:
        by = () if attempted_by is None else _strings_of_text(attempted_by)
        labels = () if tags is None or tags == "[]" else _strings_of_text(tags)
    except _UNREADABLE:
        return None  # the general reader raises the same, and the lenient one then reads the row
    return stored_job_row(
        job_id, kind, args.encode(), job_state, queue, priority, attempt, max_attempts, attempted_at,
        by, created_at, finalized_at, scheduled_at, (), {}, labels, None, None,
    )


def job_row_from_sqlite(row: Sequence[Any]) -> JobRow:
    """A row selected with ``sqlite_job_columns()`` (errors arrive as one JSON array)."""
    try:
        raw = row[13]
        if raw is None or raw == "[]":
            return _sqlite_job_row(row, ())
        elements: list[Any] = json.loads(_json_text(raw))
        return _sqlite_job_row(row, _errors(elements or []))
    except _UNREADABLE:
        return _lenient_job_row(row, _sqlite_error_elements)


def _sqlite_job_row(row: Sequence[Any], errors: tuple[AttemptError, ...]) -> JobRow:
    """``_job_row`` for the shapes sqlite3 hands back: times and JSON lists as text, read
    straight through their caches (a claimed and a completed row carry seven times between
    them). Any other shape takes the shared reader's general path, with the same result."""
    if len(row) != JOB_COLUMN_COUNT:
        return _job_row(row, errors=errors)
    (job_id, kind, args, state, queue, priority, attempt, max_attempts, attempted_at, attempted_by,
     created_at, finalized_at, scheduled_at, _, metadata, tags, unique_key, unique_states) = row
    args = args.encode() if args.__class__ is str else _json_bytes(args)
    if args[:1] != b"{":  # json() hands JSON back trimmed, so an object starts with "{"
        raise ValidationError("args must be a JSON object")
    parse = _parse_time_cached
    if attempted_at is not None:
        attempted_at = parse(attempted_at) if attempted_at.__class__ is str else _utc(attempted_at)
    if created_at is not None:
        created_at = parse(created_at) if created_at.__class__ is str else _utc(created_at)
    if finalized_at is not None:
        finalized_at = parse(finalized_at) if finalized_at.__class__ is str else _utc(finalized_at)
    if scheduled_at is not None:
        scheduled_at = parse(scheduled_at) if scheduled_at.__class__ is str else _utc(scheduled_at)
    return stored_job_row(
        int(job_id), str(kind), args, _STATES.get(state) or JobState.parse(str(state)), str(queue),
        int(priority), int(attempt), int(max_attempts), attempted_at,
        () if attempted_by is None else (
            _strings_of_text(attempted_by) if attempted_by.__class__ is str else _strings(attempted_by)),
        created_at, finalized_at, scheduled_at, errors,
        {} if metadata == "{}" else _json_object(metadata),
        () if tags is None else _strings_of_text(tags) if tags.__class__ is str else _strings(tags),
        None if unique_key is None else _unique_key(unique_key),
        None if unique_states is None else _unique_states(unique_states),
    )


def _job_row(row: Sequence[Any], *, errors: tuple[AttemptError, ...]) -> JobRow:
    # Every claimed and every completed job passes through here, so the shapes both
    # drivers hand back (aware UTC datetimes, str lists, "{}" metadata) are taken
    # inline; anything else goes through the general readers above, with the same result.
    count = len(row)
    if count < JOB_COLUMN_COUNT:
        raise ValidationError(f"job row has {count} columns, expected {JOB_COLUMN_COUNT}")
    (job_id, kind, args, state, queue, priority, attempt, max_attempts, attempted_at, attempted_by,
     created_at, finalized_at, scheduled_at, _, metadata, tags, unique_key, unique_states) = (
        row if count == JOB_COLUMN_COUNT else row[:JOB_COLUMN_COUNT])
    args = args.encode() if args.__class__ is str else _json_bytes(args)
    if args[:1] != b"{":  # both databases hand JSON back trimmed, so an object starts with "{"
        raise ValidationError("args must be a JSON object")
    if attempted_at is not None and (attempted_at.__class__ is not datetime
                                    or attempted_at.tzinfo is not UTC):
        attempted_at = _utc(attempted_at)
    if created_at is not None and (created_at.__class__ is not datetime
                                  or created_at.tzinfo is not UTC):
        created_at = _utc(created_at)
    if finalized_at is not None and (finalized_at.__class__ is not datetime
                                    or finalized_at.tzinfo is not UTC):
        finalized_at = _utc(finalized_at)
    if scheduled_at is not None and (scheduled_at.__class__ is not datetime
                                    or scheduled_at.tzinfo is not UTC):
        scheduled_at = _utc(scheduled_at)
    metadata = {} if metadata == "{}" else _json_object(metadata)
    return stored_job_row(
        int(job_id), str(kind), args, _STATES.get(state) or JobState.parse(str(state)), str(queue),
        int(priority), int(attempt), int(max_attempts), attempted_at,
        () if attempted_by is None else _strings(attempted_by), created_at, finalized_at, scheduled_at,
        errors, metadata, () if tags is None else _strings(tags),
        None if unique_key is None else _unique_key(unique_key),
        None if unique_states is None else _unique_states(unique_states),
    )


_STATES = {state.value: state for state in JobState}


# ---------------------------------------------------------------- completed rows, read back slim
#
# A completion of a claimed run may read back only the columns a set-state update can change; the
# rest of the row is then the claim's (``SetStateUpdate.claimed``). A row whose stored attempted_at
# is not the claim's (someone else claimed the job since) is read back whole instead.


def _stored_time(value: Any) -> datetime | None:
    if value is None or (value.__class__ is datetime and value.tzinfo is UTC):
        return value
    if value.__class__ is str:
        return _parse_time_cached(value)
    return _utc(value)


def completed_row(
    claimed: JobRow, state: Any, attempt: Any, finalized_at: Any, scheduled_at: Any, errors: Any,
    metadata: Any, read_full: Any,
) -> JobRow:
    """``claimed`` with the columns a set-state update can change as a completion read them back,
    in either dialect's shapes (errors: None, a text[] list, or one JSON array text).

    A completed plain job (no errors, ``{}`` metadata) is built directly; any other shape goes
    through ``read_full`` (the dialect's row reader, ``job_row_from_pg`` or
    ``job_row_from_sqlite``) on the whole row rebuilt from the claim, so it reads exactly as
    the full row would, the lenient reader included."""
    job_state = _STATES.get(state)
    if (job_state is not None and attempt.__class__ is int and metadata == "{}"
            and (errors is None or errors == "[]")):
        try:
            finalized, scheduled = _stored_time(finalized_at), _stored_time(scheduled_at)
        except _UNREADABLE:
            pass
        else:
            c = claimed
            return stored_job_row(
                c.id, c.kind, c.encoded_args, job_state, c.queue, c.priority, attempt, c.max_attempts,
                c.attempted_at, c.attempted_by, c.created_at, finalized, scheduled, (), {}, c.tags,
                c.unique_key, c.unique_states,
            )
    job: JobRow = read_full((
        claimed.id, claimed.kind, claimed.encoded_args.decode(), state, claimed.queue, claimed.priority,
        attempt, claimed.max_attempts, claimed.attempted_at, list(claimed.attempted_by),
        claimed.created_at, finalized_at, scheduled_at, errors, metadata, list(claimed.tags),
        claimed.unique_key, claimed.unique_states,
    ))
    return job


# ---------------------------------------------------------------- lenient rows
#
# Rows written by another language, by hand or by an older client may hold
# values our writers never produce. One such row must not fail the statement
# that read it (a claim would roll back and the whole queue would stall), so
# the strict reader above falls back to this one, which reads each column on
# its own, puts a neutral value where one is unreadable, and says why in
# ``JobRow.undecodable``. The client fails such a job through the normal
# error path instead of running it.

# What a value of the wrong shape raises while being read; RecursionError is
# JSON nested too deep, ValueError also covers integers too long to convert.
_UNREADABLE = (ValidationError, ValueError, TypeError, KeyError, AttributeError,
               IndexError, OverflowError, RecursionError)


def _pg_error_elements(value: Any) -> list[Any]:
    # jsonb[] elements arrive as JSON text; SQLite's array arrives already parsed.
    return [] if value is None else [e if isinstance(e, dict) else json.loads(_json_text(e)) for e in value]


def _sqlite_error_elements(value: Any) -> list[Any]:
    if value is None:
        return []
    loaded = json.loads(_json_text(value))
    if loaded is None:
        return []
    if not isinstance(loaded, list):
        raise ValidationError(f"expected a JSON array, found {type(loaded).__name__}")
    return loaded


def _describe(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply"
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "..."


def _lenient_job_row(row: Sequence[Any], error_elements: Any) -> JobRow:
    if len(row) < JOB_COLUMN_COUNT:
        raise ValidationError(f"job row has {len(row)} columns, expected {JOB_COLUMN_COUNT}")
    job_id = int(row[0])
    problems: list[str] = []

    def read(column: str, reader: Any, value: Any, fallback: Any) -> Any:
        try:
            return reader(value)
        except _UNREADABLE as exc:
            problems.append(f"{column}: {_describe(exc)}")
            return fallback

    try:
        state = JobState.parse(str(row[3]))
    except ValueError:
        # Both schemas constrain the state, and a claim only returns rows it set
        # running, so this is a read of a row nobody can work: say which one.
        raise ValidationError(f"job {job_id} has unknown state {row[3]!r}") from None
    args = read("args", _object_bytes, row[2], b"{}")
    elements = read("errors", error_elements, row[13], [])
    errors = tuple(AttemptError.from_stored(e) for e in elements)
    return JobRow(
        id=job_id,
        kind=str(row[1]),
        encoded_args=args,
        state=state,
        queue=str(row[4]),
        priority=read("priority", int, row[5], 1),
        attempt=read("attempt", int, row[6], 0),
        max_attempts=read("max_attempts", int, row[7], 1),
        attempted_at=read("attempted_at", _utc_or_none, row[8], None),
        attempted_by=read("attempted_by", _strict_strings, row[9], ()),
        created_at=read("created_at", _utc_or_none, row[10], None),
        finalized_at=read("finalized_at", _utc_or_none, row[11], None),
        scheduled_at=read("scheduled_at", _utc_or_none, row[12], None),
        errors=errors,
        metadata=read("metadata", _json_object, row[14], {}),
        tags=read("tags", _strict_strings, row[15], ()),
        unique_key=read("unique_key", _unique_key, row[16], None),
        unique_states=read("unique_states", _unique_states, row[17], None),
        undecodable="; ".join(problems) or None,
    )


def _object_bytes(value: Any) -> bytes:
    encoded = _json_bytes(value)
    if encoded[:1] != b"{":
        raise ValidationError(f"must be a JSON object, found {encoded[:40]!r}")
    return encoded


def _strict_strings(value: Any) -> tuple[str, ...]:
    strings = _strings_raw(value)
    if not all(isinstance(s, str) for s in strings):
        raise ValidationError(f"expected strings, found {list(strings)!r}"[:200])
    return tuple(strings)


def queue_row(row: Sequence[Any]) -> QueueRow:
    """A row selected with ``PG_QUEUE_COLUMNS`` or ``SQLITE_QUEUE_COLUMNS``."""
    return QueueRow(
        name=str(row[0]),
        created_at=_utc(row[1]),
        metadata=_json_object(row[2]),
        paused_at=_utc_or_none(row[3]),
        updated_at=_utc(row[4]),
    )


def leader_row(row: Sequence[Any]) -> LeaderRow:
    return LeaderRow(leader_id=str(row[0]), elected_at=_utc(row[1]), expires_at=_utc(row[2]))


def lease_read(name: str, read_at: Any, row: Sequence[Any] | None, *, table_exists: bool = True) -> LeaseRead:
    """``GetLease``'s answer from the database's now and (holder, held_since, expires_at)."""
    lease = None if row is None else LeaseRow(
        name=name, holder=str(row[0]), held_since=_utc(row[1]), expires_at=_utc(row[2]))
    return LeaseRead(read_at=_utc(read_at), table_exists=table_exists, row=lease)


def notification_row(row: Sequence[Any]) -> NotificationRow:
    return NotificationRow(
        id=int(row[0]), topic=str(row[1]), payload=str(row[2]), created_at=_utc(row[3])
    )
