"""Insert options and how River resolves them into one row to insert (docs/protocol.md §5.1).

Precedence per option: explicit ``InsertOpts`` > the args type's default
options > client default. Zero values (0, ``""``, ``None``) mean "not set", as
in Go, so an args type's defaults show through unless overridden.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from river_protocol.constants import (
    KIND_RE,
    MAX_ATTEMPTS_DEFAULT,
    PRIORITY_DEFAULT,
    QUEUE_DEFAULT,
    QUEUE_NAME_RE,
    TAG_RE,
)
from river_protocol.errors import ValidationError
from river_protocol.flow_control import SequenceOpts
from river_protocol.golang.gotime import GoTime, require_aware
from river_protocol.intents import InsertParams
from river_protocol.states import JobState
from river_protocol.unique import UniqueKeyRules, UniqueOpts, parse_unique_key_rules, unique_key

DEFAULT_MAX_ATTEMPTS = MAX_ATTEMPTS_DEFAULT
DEFAULT_PRIORITY = PRIORITY_DEFAULT
DEFAULT_QUEUE = QUEUE_DEFAULT
MAX_SMALLINT = 32767
QUEUE_NAME_MAX_LEN = 64
TAG_MAX_LEN = 255
KIND_MAX_LEN = 127  # the river_job.kind column check


@dataclass(frozen=True, slots=True)
class InsertOpts:
    """River's ``InsertOpts``. ``tags=None`` means "not set" (an args type's tags apply),
    while ``tags=()`` explicitly means no tags. ``metadata`` is a JSON object given as a
    mapping (encoded like Go's ``json.Marshal``) or as encoded bytes."""

    max_attempts: int = 0
    priority: int = 0
    queue: str = ""
    scheduled_at: datetime | GoTime | None = None
    tags: tuple[str, ...] | None = None
    metadata: Mapping[str, Any] | bytes | None = None
    pending: bool = False
    unique_opts: UniqueOpts | None = None
    # Flow control's sequences (river_protocol.flow_control): kept in the job's metadata.
    sequence: SequenceOpts | None = None

    def __post_init__(self) -> None:
        if self.tags is not None:
            if isinstance(self.tags, str):
                raise ValidationError(f"tags must be a sequence of strings, not the string {self.tags!r}")
            object.__setattr__(self, "tags", tuple(self.tags))
        if isinstance(self.scheduled_at, datetime):
            require_aware(self.scheduled_at, "scheduled_at")


# ---------------------------------------------------------------- validators


def validate_queue_name(queue: str) -> None:
    if queue == "":
        raise ValidationError("queue name cannot be empty")
    if len(queue) > QUEUE_NAME_MAX_LEN:
        raise ValidationError(f"queue name cannot be longer than {QUEUE_NAME_MAX_LEN} characters")
    if QUEUE_NAME_RE.fullmatch(queue) is None:
        raise ValidationError(
            "queue name is invalid, expected letters and numbers separated by underscores or "
            f"hyphens: {queue!r}"
        )


def validate_tags(tags: Sequence[str]) -> None:
    for tag in tags:
        if not isinstance(tag, str):
            raise ValidationError(f"tags must be strings, got {tag!r}")
        if len(tag.encode()) > TAG_MAX_LEN:
            raise ValidationError(f"tags should be a maximum of {TAG_MAX_LEN} characters long")
        # The regex already excludes commas; bulk insert paths join tags with them.
        if TAG_RE.search(tag) is None:
            raise ValidationError(f"tags should match regex {TAG_RE.pattern}: {tag!r} does not")


def validate_priority(priority: int) -> None:
    if not 1 <= priority <= 4:
        raise ValidationError(f"priority must be between 1 and 4, got {priority}")


def validate_max_attempts(max_attempts: int) -> None:
    if not 1 <= max_attempts <= MAX_SMALLINT:
        raise ValidationError(f"max_attempts must be between 1 and {MAX_SMALLINT}, got {max_attempts}")


def validate_kind(kind: str) -> None:
    """The check River applies when a worker is registered for ``kind``."""
    if KIND_RE.search(kind) is None:
        raise ValidationError(f"job kind {kind!r} should match regex {KIND_RE.pattern}")


def encode_metadata(metadata: Mapping[str, Any] | bytes | None) -> bytes:
    """The ``metadata`` column bytes: a JSON object (``{}`` when unset or empty)."""
    if metadata is None or (isinstance(metadata, bytes | bytearray) and len(metadata) == 0):
        return b"{}"
    if isinstance(metadata, bytes | bytearray):
        try:
            decoded = json.loads(bytes(metadata))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError(f"metadata is not valid JSON: {exc}") from None
        if not isinstance(decoded, dict):
            raise ValidationError("metadata must be a JSON object")
        return bytes(metadata)
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be a mapping or JSON bytes, got {type(metadata).__name__}")
    # Imported late to keep this module light.
    from river_protocol.golang import encoding_json

    return encoding_json.encode(dict(metadata))


# ---------------------------------------------------------------- resolution


def _scheduled(value: datetime | GoTime | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, GoTime):
        return value.to_datetime()
    return require_aware(value, "scheduled_at")


_NO_OPTS = InsertOpts()  # frozen: one serves every insert that passes none


def _with_sequence(metadata: bytes, sequence: SequenceOpts, kind: str, encoded_args: bytes) -> bytes:
    if not isinstance(sequence, SequenceOpts):
        raise ValidationError(f"sequence must be a SequenceOpts, got {type(sequence).__name__}")
    args = json.loads(encoded_args)
    if not isinstance(args, dict):
        raise ValidationError(f"a job in a sequence needs args that encode as a JSON object, got {args!r}")
    merged = json.loads(metadata)
    merged.update(sequence.metadata(kind, args))
    from river_protocol.golang import encoding_json

    return encoding_json.encode(merged)


def resolve_insert_params(
    kind: str,
    encoded_args: bytes,
    *,
    insert_opts: InsertOpts | None,
    args_opts: InsertOpts | None,
    client_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    unique_fields: Sequence[str],
    now: datetime | GoTime,
    unique_key_rules: UniqueKeyRules | str = UniqueKeyRules.V0_43,
) -> InsertParams:
    """One job's row, options applied as Go's client does (docs/protocol.md §5.1).

    ``now`` is the client clock at insert; under v0.43's rules it decides a ByPeriod bucket
    even when the job is scheduled for later (``"latest"``: the job's scheduled_at does,
    when given). ``unique_key_rules`` picks the River release
    whose unique keys are reproduced (see ``UniqueKeyRules``). The args type's default metadata is ignored
    and tags are not merged, as in Go. Raises ``ValidationError`` for bad options
    and ``UniqueKeyError`` when the unique key cannot be built.
    """
    opts = insert_opts or _NO_OPTS
    defaults = args_opts or _NO_OPTS
    if not 1 <= len(kind) <= KIND_MAX_LEN:
        raise ValidationError(f"job kind must be 1 to {KIND_MAX_LEN} characters long, got {kind!r}")

    # River's drivers store min(max_attempts, 32767) in the smallint column rather than refuse it.
    max_attempts = min(opts.max_attempts or defaults.max_attempts or client_max_attempts, MAX_SMALLINT)
    priority = opts.priority or defaults.priority or DEFAULT_PRIORITY
    queue = opts.queue or defaults.queue or DEFAULT_QUEUE
    validate_queue_name(queue)
    tags = opts.tags if opts.tags is not None else defaults.tags
    validate_tags(tags or ())
    validate_priority(priority)
    validate_max_attempts(max_attempts)

    uniq = opts.unique_opts
    if uniq is not None:
        uniq.validate()  # even when empty: exclude_kind alone is refused, not ignored
    if uniq is None or uniq.is_empty():
        uniq = defaults.unique_opts
    if uniq is not None:
        uniq.validate()
    metadata = encode_metadata(opts.metadata)
    sequence = opts.sequence or defaults.sequence
    if sequence is not None:
        metadata = _with_sequence(metadata, sequence, kind, encoded_args)

    scheduled_at = _scheduled(opts.scheduled_at) or _scheduled(defaults.scheduled_at)
    key: bytes | None = None
    states: int | None = None
    if uniq is not None and not uniq.is_empty():
        # A ByPeriod bucket: River v0.43 computes the key before it applies scheduled_at, so
        # the bucket always comes from `now`; newer River (its goldens' period_from_schedule
        # cases) takes it from scheduled_at when one is given, printed in UTC.
        rules = parse_unique_key_rules(unique_key_rules)
        clock = scheduled_at if rules is UniqueKeyRules.LATEST and scheduled_at is not None else now
        key = unique_key(kind, encoded_args, unique_fields, uniq, clock, queue, rules=rules)
        states = uniq.state_bitmask()

    state = JobState.AVAILABLE
    if scheduled_at is not None:
        state = JobState.SCHEDULED
    if opts.pending:
        state = JobState.PENDING

    return InsertParams(
        kind=kind,
        encoded_args=encoded_args,
        state=state,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        metadata=metadata,
        tags=tuple(tags or ()),
        scheduled_at=scheduled_at,
        unique_key=key,
        unique_states=states,
    )
