"""Unique jobs: the ``unique_states`` bitmask, ``UniqueOpts`` and the ``unique_key`` bytes.

Go River and River for Python dedupe against each other only if both derive
byte-identical keys (docs/protocol.md §3.2, §3.3), so this module reproduces Go's
builder exactly, quirks included. Two of those quirks changed after River
v0.43, so which builder a client follows is a setting (``UniqueKeyRules``):
under v0.43's rules top-level member names are gjson/sjson *paths* (see
``river_protocol.golang.gjson`` and ``.sjson``) and the period bucket is rendered in the clock
value's own time zone; under the newer rules member names are taken
literally and the bucket is rendered in UTC. Period buckets count from Go's
zero time under both.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol import rawjson
from river_protocol.args import is_skipped, is_unique, json_name
from river_protocol.errors import UniqueKeyError, ValidationError
from river_protocol.golang import gjson, sjson
from river_protocol.golang.encoding_json import encode_go_string
from river_protocol.golang.gotime import NS_PER_SECOND, GoTime, to_gotime
from river_protocol.states import JobState

# ---------------------------------------------------------------- states bitmask

# Bit k set <=> uniqueness holds while a row is in that state (available is bit 0).
STATE_BITS: dict[JobState, int] = {
    JobState.AVAILABLE: 1 << 0,
    JobState.CANCELLED: 1 << 1,
    JobState.COMPLETED: 1 << 2,
    JobState.DISCARDED: 1 << 3,
    JobState.PENDING: 1 << 4,
    JobState.RETRYABLE: 1 << 5,
    JobState.RUNNING: 1 << 6,
    JobState.SCHEDULED: 1 << 7,
}
_BITS_BY_NAME = {state.value: bit for state, bit in STATE_BITS.items()}

DEFAULT_UNIQUE_STATES: tuple[JobState, ...] = (
    JobState.AVAILABLE,
    JobState.COMPLETED,
    JobState.PENDING,
    JobState.RETRYABLE,
    JobState.RUNNING,
    JobState.SCHEDULED,
)
# A custom ByState must keep these, or a duplicate could be inserted while the
# original is still going to run.
REQUIRED_UNIQUE_STATES: tuple[JobState, ...] = (
    JobState.AVAILABLE,
    JobState.PENDING,
    JobState.RUNNING,
    JobState.SCHEDULED,
)


def states_to_bitmask(states: Iterable[str | JobState]) -> int:
    """The 8-bit mask of ``states``; names that are not job states are ignored, as in Go."""
    mask = 0
    for state in states:
        mask |= _BITS_BY_NAME.get(str(state), 0)
    return mask


DEFAULT_UNIQUE_STATES_BITMASK = states_to_bitmask(DEFAULT_UNIQUE_STATES)  # 245


def bitmask_to_states(mask: int) -> tuple[JobState, ...]:
    """States whose bit is set in ``mask`` (bits above 7 ignored), in name order."""
    return tuple(sorted((s for s, bit in STATE_BITS.items() if mask & bit), key=lambda s: s.value))


def validate_by_state(states: Sequence[str | JobState] | None) -> None:
    """River's check of ``UniqueOpts.ByState``: known states only, and all required ones.

    ``None`` or an empty list is valid (the default states apply).
    """
    if not states:
        return
    for state in states:
        if str(state) not in _BITS_BY_NAME:
            raise ValidationError(f'UniqueOpts.ByState contains invalid state "{state}"')
    names = {str(s) for s in states}
    missing = [s.value for s in REQUIRED_UNIQUE_STATES if s.value not in names]
    if missing:
        raise ValidationError(
            "UniqueOpts.ByState must contain all required states, missing: " + ", ".join(missing)
        )


# ---------------------------------------------------------------- options


def _period_ns(period: timedelta | None) -> int:
    if period is None:
        return 0
    return (period.days * 86400 + period.seconds) * NS_PER_SECOND + period.microseconds * 1000


@dataclass(frozen=True, slots=True)
class UniqueOpts:
    """River's ``UniqueOpts``: which parts of a job make it unique.

    ``by_state=None`` means the default states; ``by_state=()`` also means the
    default states but, unlike ``None``, makes the options non-empty (the job is
    unique by kind). ``exclude_kind`` needs ``by_args``, ``by_period`` or
    ``by_queue`` beside it (``validate()`` refuses it otherwise, as newer River
    does; River v0.43 took it alone as "not unique"). Unknown state names are
    rejected when the options are built.
    """

    by_args: bool = False
    by_period: timedelta | None = None
    by_queue: bool = False
    by_state: tuple[JobState, ...] | None = None
    exclude_kind: bool = False

    def __post_init__(self) -> None:
        if self.by_state is not None:
            raw = tuple(self.by_state)
            for state in raw:
                if str(state) not in _BITS_BY_NAME:
                    raise ValidationError(f'UniqueOpts.ByState contains invalid state "{state}"')
            object.__setattr__(self, "by_state", tuple(JobState(str(s)) for s in raw))
        if self.by_period is not None and not isinstance(self.by_period, timedelta):
            raise ValidationError(f"UniqueOpts.by_period must be a timedelta, got {self.by_period!r}")

    @property
    def by_period_ns(self) -> int:
        return _period_ns(self.by_period)

    def is_empty(self) -> bool:
        return (
            not self.by_args and self.by_period_ns == 0 and not self.by_queue and self.by_state is None
        )

    def validate(self) -> None:
        """Raise ``ValidationError`` with River's message if River would refuse these options."""
        if self.exclude_kind and not (self.by_args or self.by_period_ns or self.by_queue):
            # Without the kind and without another part the key would be the same for every
            # job; newer River refuses it (its conformance harness, leaf Batch/Atomicity).
            raise ValidationError("UniqueOpts.ExcludeKind requires ByArgs, ByPeriod or ByQueue")
        if self.is_empty():
            return
        if self.by_period_ns != 0 and self.by_period_ns < NS_PER_SECOND:
            raise ValidationError("UniqueOpts.ByPeriod should not be less than 1 second")
        validate_by_state(self.by_state)

    def state_bitmask(self) -> int:
        return states_to_bitmask(self.by_state or DEFAULT_UNIQUE_STATES)


# ---------------------------------------------------------------- unique key


class UniqueKeyRules(enum.StrEnum):
    """Which River release's key builder a client reproduces.

    ``V0_43`` (the default) writes the keys River v0.43 Go clients write, so
    both dedupe against each other in one database. ``LATEST`` follows newer
    River: args member names are hashed literally (v0.43 reads them as gjson
    paths, so ``"a.b"`` nests, ``"@x"`` vanishes and ``""`` is refused) and
    the period bucket is printed in UTC (v0.43 prints the clock's own zone,
    e.g. ``-05:00`` for a Go process whose local zone is New York). The two
    agree for member names free of path syntax and clocks in UTC; they
    disagree otherwise, which is why newer keys are opt-in.
    """

    V0_43 = "v0.43"
    LATEST = "latest"


def parse_unique_key_rules(value: UniqueKeyRules | str) -> UniqueKeyRules:
    try:
        return UniqueKeyRules(value)
    except ValueError:
        known = ", ".join(repr(r.value) for r in UniqueKeyRules)
        raise ValidationError(f"unknown unique key rules {value!r}; known: {known}") from None


_GO_ZERO_TIME_TO_UNIX_NS = 62_135_596_800 * NS_PER_SECOND


def truncate_to_period(now: datetime | GoTime, period_ns: int) -> GoTime:
    """Go's ``Time.Truncate``: buckets counted from 0001-01-01T00:00:00Z, zone kept."""
    t = to_gotime(now)
    if period_ns <= 0:
        return t
    return GoTime(t.unix_ns - (t.unix_ns + _GO_ZERO_TIME_TO_UNIX_NS) % period_ns, t.tz)


def _selected_args(encoded_args: bytes, unique_fields: Sequence[str]) -> bytes:
    # Starts from an empty document, not "{}": with no field present the part stays empty.
    doc = b""
    for path in unique_fields:
        found = gjson.get(encoded_args, path)
        if not found.exists() or found.raw == b"undefined":
            continue
        doc = sjson.set_raw(doc, path, found.raw)
    return doc


def _all_args_as_paths(encoded_args: bytes) -> bytes:
    doc = b"{}"
    # River lists the keys with gjson's ``@keys`` and reads each as a string, so escapes are undone.
    keys = [k.string() for k in gjson.get(encoded_args, b"@keys").array()]
    for key in sorted(keys):
        doc = sjson.set_raw(doc, key, gjson.get(encoded_args, key).raw)
    return doc


def _sjson_key(key: bytes) -> bytes:
    # sjson writes a name verbatim unless it needs escaping, even if the args escaped it.
    if all(0x20 <= b <= 0x7F and b not in (0x22, 0x5C) for b in key):
        return b'"' + key + b'"'
    return encode_go_string(key)


def _all_args_literal(encoded_args: bytes) -> bytes:
    members = rawjson.object_members(encoded_args)
    if members is None:
        if encoded_args.strip() == b"[]":
            return b"{}"
        raise UniqueKeyError("job arguments must encode to a JSON object")
    first: dict[bytes, bytes] = {}
    for key, raw in members:
        first.setdefault(key, raw)  # a duplicated name keeps its first value, as gjson reads it
    return b"{" + b",".join(_sjson_key(k) + b":" + first[k] for k in sorted(first)) + b"}"


def _args_part(encoded_args: bytes, unique_fields: Sequence[str], rules: UniqueKeyRules) -> bytes:
    if unique_fields:
        return _selected_args(encoded_args, unique_fields)
    if rules is UniqueKeyRules.LATEST:
        return _all_args_literal(encoded_args)
    return _all_args_as_paths(encoded_args)


def build_unique_key_string(
    kind: str,
    encoded_args: bytes,
    unique_fields: Sequence[str],
    opts: UniqueOpts,
    now: datetime | GoTime,
    queue: str,
    *,
    rules: UniqueKeyRules | str = UniqueKeyRules.V0_43,
) -> bytes:
    """The pre-hash unique key (bytes: args may hold invalid UTF-8).

    ``unique_fields`` are the dotted JSON paths of the args' unique fields
    (``unique_fields_of``); empty means "all top-level keys". ``now`` is the
    insert-time clock; under v0.43's rules its zone decides how the period
    bucket is rendered. Raises ``UniqueKeyError`` where Go's builder fails
    (e.g. an empty member name under v0.43's rules).
    """
    rules = parse_unique_key_rules(rules)
    out = bytearray()
    if not opts.exclude_kind:
        out += b"&kind=" + kind.encode()
    if opts.by_args:
        out += b"&args=" + _args_part(encoded_args, unique_fields, rules)
    period_ns = opts.by_period_ns
    if period_ns != 0:
        bucket = truncate_to_period(now, period_ns)
        if rules is UniqueKeyRules.LATEST:
            bucket = GoTime(bucket.unix_ns, UTC)
        out += b"&period=" + bucket.format_rfc3339(nano=False).encode()
    if opts.by_queue:
        out += b"&queue=" + queue.encode()
    return bytes(out)


def unique_key(
    kind: str,
    encoded_args: bytes,
    unique_fields: Sequence[str],
    opts: UniqueOpts,
    now: datetime | GoTime,
    queue: str,
    *,
    rules: UniqueKeyRules | str = UniqueKeyRules.V0_43,
) -> bytes:
    """The 32-byte ``unique_key`` column value: SHA-256 of ``build_unique_key_string``."""
    key_string = build_unique_key_string(kind, encoded_args, unique_fields, opts, now, queue, rules=rules)
    return hashlib.sha256(key_string).digest()


# ---------------------------------------------------------------- unique fields of an args type

_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def unique_fields_of(args_type: type) -> list[str]:
    """Dotted JSON paths of the fields marked unique, byte-sorted (Go's ``SortedFieldsWithTag``).

    A class may declare ``unique_fields: ClassVar[tuple[str, ...]]`` instead of
    field metadata. Nested dataclass fields are searched; a unique-marked nested
    dataclass without unique subfields contributes its whole value.
    """
    cached = _FIELDS_CACHE.get(args_type)
    if cached is None:
        explicit = getattr(args_type, "unique_fields", None)
        if isinstance(explicit, (tuple, list)) and all(isinstance(f, str) for f in explicit):
            found = list(explicit)
        elif dataclasses.is_dataclass(args_type):
            found = _tagged_paths(args_type, [], set())
        else:
            found = []
        cached = tuple(sorted(found, key=lambda f: f.encode()))
        _FIELDS_CACHE[args_type] = cached
    return list(cached)


def _dataclass_type(hint: Any) -> type | None:
    """The dataclass a field holds, directly or as ``X | None`` (Go: struct or pointer to struct)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(options) == 1:
            return _dataclass_type(options[0])
    return None


def _tagged_paths(cls: type, path: list[str], seen: set[type]) -> list[str]:
    # Like Go, a type is expanded once per traversal: recursive or repeated
    # struct types contribute their whole value (if tagged) after the first.
    if cls in seen:
        return []
    seen.add(cls)
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # unresolvable annotations: treat fields as plain values
        hints = {}
    out: list[str] = []
    for f in dataclasses.fields(cls):
        name = "-" if is_skipped(f) else json_name(f)
        nested = _dataclass_type(hints.get(f.name, f.type))
        if nested is not None:
            sub = _tagged_paths(nested, [*path, name], seen)
            if sub:
                out.extend(sub)
            elif is_unique(f):
                out.append(".".join([*path, name]))
            continue
        if is_unique(f):
            out.append(".".join([*path, name]))
    return sorted(out, key=lambda p: p.encode())
