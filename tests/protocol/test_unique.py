"""Unique keys, the unique_states bitmask and UniqueOpts."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import ClassVar
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_protocol.args import arg_field
from river_protocol.errors import UniqueKeyError, ValidationError
from river_protocol.golang.gotime import GoTime
from river_protocol.states import ALL_STATES, JobState
from river_protocol.unique import (
    DEFAULT_UNIQUE_STATES,
    DEFAULT_UNIQUE_STATES_BITMASK,
    REQUIRED_UNIQUE_STATES,
    UniqueKeyRules,
    UniqueOpts,
    bitmask_to_states,
    build_unique_key_string,
    parse_unique_key_rules,
    states_to_bitmask,
    truncate_to_period,
    unique_fields_of,
    unique_key,
    validate_by_state,
)

NOW = datetime(2024, 5, 14, 13, 45, 27, 123456, tzinfo=UTC)
BY_ARGS = UniqueOpts(by_args=True)

# ---------------------------------------------------------------- bitmask


def test_default_states_bitmask_is_245() -> None:
    assert DEFAULT_UNIQUE_STATES_BITMASK == 245 == 0b11110101
    assert states_to_bitmask(DEFAULT_UNIQUE_STATES) == 245


def test_bit_layout_available_low_scheduled_high() -> None:
    assert states_to_bitmask([JobState.AVAILABLE]) == 1
    assert states_to_bitmask(["cancelled"]) == 2
    assert states_to_bitmask([JobState.SCHEDULED]) == 128


def test_unknown_states_are_ignored_in_bitmask() -> None:
    assert states_to_bitmask(["bogus", "available", "AVAILABLE"]) == 1


def test_bitmask_round_trip_every_subset() -> None:
    for size in range(len(ALL_STATES) + 1):
        for subset in itertools.combinations(ALL_STATES, size):
            assert bitmask_to_states(states_to_bitmask(subset)) == tuple(sorted(subset))


@given(st.integers(min_value=0, max_value=255))
def test_states_of_any_byte_round_trip(mask: int) -> None:
    assert states_to_bitmask(bitmask_to_states(mask)) == mask


def test_validate_by_state_messages() -> None:
    validate_by_state(None)
    validate_by_state([])
    validate_by_state(list(REQUIRED_UNIQUE_STATES))
    with pytest.raises(ValidationError, match='invalid state "bogus"'):
        validate_by_state(["bogus", "available"])
    with pytest.raises(ValidationError, match="missing: pending, running, scheduled"):
        validate_by_state(["available", "completed"])


# ---------------------------------------------------------------- UniqueOpts


def test_unique_opts_emptiness_follows_river() -> None:
    assert UniqueOpts().is_empty()
    assert UniqueOpts(exclude_kind=True).is_empty()
    assert not UniqueOpts(by_state=()).is_empty()
    assert not UniqueOpts(by_period=timedelta(hours=1)).is_empty()
    assert UniqueOpts(by_period=timedelta(0)).is_empty()


def test_unique_opts_state_bitmask_defaults_for_empty_list() -> None:
    assert UniqueOpts(by_state=()).state_bitmask() == 245
    assert UniqueOpts().state_bitmask() == 245
    assert UniqueOpts(by_state=tuple(REQUIRED_UNIQUE_STATES)).state_bitmask() == 209


def test_unique_opts_coerces_state_names() -> None:
    opts = UniqueOpts(by_state=("available", "pending", "running", "scheduled"))  # type: ignore[arg-type]
    assert opts.by_state == REQUIRED_UNIQUE_STATES


def test_unique_opts_rejects_unknown_state_at_construction() -> None:
    with pytest.raises(ValidationError, match="invalid state"):
        UniqueOpts(by_state=("nope",))  # type: ignore[arg-type]


def test_unique_opts_validate() -> None:
    UniqueOpts(by_period=timedelta(seconds=1.5)).validate()
    UniqueOpts(exclude_kind=True, by_args=True).validate()
    UniqueOpts(exclude_kind=True, by_period=timedelta(seconds=1)).validate()
    UniqueOpts(exclude_kind=True, by_queue=True).validate()
    with pytest.raises(ValidationError, match="ExcludeKind requires ByArgs, ByPeriod or ByQueue"):
        UniqueOpts(exclude_kind=True, by_period=None).validate()
    with pytest.raises(ValidationError, match="ExcludeKind requires"):
        UniqueOpts(exclude_kind=True, by_state=tuple(REQUIRED_UNIQUE_STATES)).validate()
    with pytest.raises(ValidationError, match="less than 1 second"):
        UniqueOpts(by_period=timedelta(milliseconds=999)).validate()
    with pytest.raises(ValidationError, match="less than 1 second"):
        UniqueOpts(by_period=timedelta(seconds=-5)).validate()
    with pytest.raises(ValidationError, match="missing: pending, running, scheduled"):
        UniqueOpts(by_state=(JobState.AVAILABLE,)).validate()


# ---------------------------------------------------------------- key string


def key(args: bytes, fields: list[str], opts: UniqueOpts = BY_ARGS, **kw: object) -> bytes:
    return build_unique_key_string(
        str(kw.get("kind", "email")), args, fields, opts, kw.get("now", NOW), str(kw.get("queue", "default"))  # type: ignore[arg-type]
    )


def test_protocol_example_all_keys_sorted() -> None:
    assert key(b'{"to":"a@b","id":7}', []) == b'&kind=email&args={"id":7,"to":"a@b"}'


def test_unique_key_is_sha256_of_string() -> None:
    raw = b'{"to":"a@b","id":7}'
    digest = unique_key("email", raw, [], BY_ARGS, NOW, "default")
    assert digest == hashlib.sha256(b'&kind=email&args={"id":7,"to":"a@b"}').digest()
    assert len(digest) == 32


def test_parts_order_and_exclude_kind() -> None:
    opts = UniqueOpts(by_args=True, by_period=timedelta(hours=1), by_queue=True)
    want = b'&kind=email&args={"a":1}&period=2024-05-14T13:00:00Z&queue=q'
    assert key(b'{"a":1}', [], opts, queue="q") == want
    opts = UniqueOpts(by_queue=True, exclude_kind=True)
    assert key(b"{}", [], opts, queue="q&x=1") == b"&queue=q&x=1"


def test_tagged_fields_keep_only_those_paths() -> None:
    raw = b'{"customer_id":42,"amount":19.99,"note":"first"}'
    assert key(raw, ["customer_id", "note"]) == b'&kind=email&args={"customer_id":42,"note":"first"}'


def test_tagged_fields_none_present_leaves_args_empty() -> None:
    assert key(b'{"other":1}', ["missing"]) == b"&kind=email&args="
    assert key(b"{}", []) == b"&kind=email&args={}"


def test_nested_tagged_paths_build_nested_objects() -> None:
    raw = b'{"customer":{"id":1,"email":"e","x":2},"z":3}'
    want = b'&kind=email&args={"customer":{"email":"e","id":1}}'
    assert key(raw, ["customer.email", "customer.id"]) == want


def test_digit_field_first_makes_an_array_then_fails() -> None:
    with pytest.raises(UniqueKeyError, match="cannot set array element for non-numeric key 'A'"):
        key(b'{"2":8,"A":3}', ["2", "A"])


def test_empty_member_name_fails_like_go() -> None:
    with pytest.raises(UniqueKeyError, match="path cannot be empty"):
        key(b'{"":1,"a":2}', [])
    with pytest.raises(UniqueKeyError, match="path cannot be empty"):
        key(b"[1,2]", [])


def test_dotted_member_name_is_a_path() -> None:
    # Go writes an empty raw value here: the hashed string is not valid JSON.
    assert key(b'{"a.b":1}', []) == b'&kind=email&args={"a":{"b":}}'


def test_nested_values_are_copied_verbatim() -> None:
    raw = b'{"b":{"z":1E+21,"a":-0.0},"a":"\\u0061"}'
    assert key(raw, []) == b'&kind=email&args={"a":"\\u0061","b":{"z":1E+21,"a":-0.0}}'


def test_invalid_utf8_passes_through_as_bytes() -> None:
    raw = b'{"s":"\xff\xfe"}'
    assert key(raw, []) == b'&kind=email&args={"s":"\xff\xfe"}'


# ---------------------------------------------------------------- period


def test_period_counts_from_go_zero_time() -> None:
    # 7-day buckets start on Mondays (0001-01-01 was a Monday), not Thursdays (Unix epoch).
    bucket = truncate_to_period(NOW, 7 * 86400 * 10**9)
    assert bucket.format_rfc3339(nano=False) == "2024-05-13T00:00:00Z"
    assert datetime(2024, 5, 13).weekday() == 0


def test_period_fraction_dropped_and_zone_kept() -> None:
    opts = UniqueOpts(by_period=timedelta(seconds=1.5))
    assert key(b"{}", [], opts) == b"&kind=email&period=2024-05-14T13:45:27Z"
    ny = NOW.astimezone(ZoneInfo("America/New_York"))
    opts = UniqueOpts(by_period=timedelta(hours=24))
    assert key(b"{}", [], opts, now=ny) == b"&kind=email&period=2024-05-13T20:00:00-04:00"
    fixed = GoTime(GoTime.from_datetime(NOW).unix_ns, timezone(timedelta(hours=5, minutes=30)))
    hourly = UniqueOpts(by_period=timedelta(hours=1))
    assert key(b"{}", [], hourly, now=fixed) == b"&kind=email&period=2024-05-14T18:30:00+05:30"


# ---------------------------------------------------------------- properties

_KEY_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
_KEY = st.text(alphabet=_KEY_CHARS, min_size=1, max_size=8)
_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEY, inner, max_size=3),
    max_leaves=6,
)


def _compact(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@given(st.dictionaries(_KEY, _VALUE, max_size=6), st.randoms())
def test_all_keys_key_ignores_top_level_member_order(members: dict[str, object], rnd: object) -> None:
    items = list(members.items())
    shuffled = items[:]
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    a = _compact(dict(items))
    b = _compact(dict(shuffled))
    assert unique_key("k", a, [], BY_ARGS, NOW, "q") == unique_key("k", b, [], BY_ARGS, NOW, "q")


@given(
    st.dictionaries(_KEY, st.integers() | st.text(max_size=6), min_size=1, max_size=5),
    st.data(),
)
def test_key_changes_when_a_unique_value_changes(members: dict[str, object], data: st.DataObject) -> None:
    names = sorted(members)
    # Non-numeric names only: a leading all-digit name would turn the document into an array.
    fields = [n for n in names if not n.isdigit()]
    if not fields:
        return
    field = data.draw(st.sampled_from(fields))
    new_value = data.draw(st.integers() | st.text(max_size=6))
    if new_value == members[field]:
        return
    changed = dict(members, **{field: new_value})
    before = unique_key("k", _compact(members), fields, BY_ARGS, NOW, "q")
    after = unique_key("k", _compact(changed), fields, BY_ARGS, NOW, "q")
    assert before != after


# ---------------------------------------------------------------- unique fields of args types


@dataclass
class Customer:
    id: int = arg_field(json="id", unique=True, default=0)
    email: str = arg_field(json="email", default="")


@dataclass
class Address:
    street: str = ""


@dataclass
class OrderArgs:
    kind: ClassVar[str] = "order"
    zeta: int = arg_field(json="Zeta", unique=True, default=0)
    customer: Customer = arg_field(json="customer", default_factory=Customer)
    address: Address = arg_field(json="address", unique=True, default_factory=Address)
    maybe: Customer | None = arg_field(json="maybe", unique=True, default=None)
    plain: str = arg_field(json="plain", default="")


def test_unique_fields_of_nested_and_sorted() -> None:
    # Customer is expanded once per traversal (like Go), so "maybe" counts as a whole value.
    assert unique_fields_of(OrderArgs) == ["Zeta", "address", "customer.id", "maybe"]


def test_unique_fields_of_explicit_classvar_and_cache() -> None:
    class Explicit:
        kind: ClassVar[str] = "explicit"
        unique_fields: ClassVar[tuple[str, ...]] = ("b", "a.c")

    assert unique_fields_of(Explicit) == ["a.c", "b"]
    first = unique_fields_of(Explicit)
    first.append("mutated")
    assert unique_fields_of(Explicit) == ["a.c", "b"]


def test_unique_fields_of_untagged_type_is_empty() -> None:
    assert unique_fields_of(Address) == []


# ---------------------------------------------------------------- newer River's key rules

LATEST = UniqueKeyRules.LATEST


def _latest_args(args: bytes) -> bytes:
    return build_unique_key_string("k", args, [], BY_ARGS, NOW, "q", rules=LATEST)


def test_latest_rules_hash_member_names_literally() -> None:
    args = rb'{"b":1,"a.b":2,"@x":3,"":4,"a\\b":5,":lead":6}'
    assert _latest_args(args) == rb'&kind=k&args={"":4,":lead":6,"@x":3,"a.b":2,"a\\b":5,"b":1}'
    # v0.43 reads the names as gjson paths and refuses the empty one.
    with pytest.raises(UniqueKeyError, match="path cannot be empty"):
        build_unique_key_string("k", args, [], BY_ARGS, NOW, "q")


def test_latest_rules_write_names_as_sjson_does_and_keep_first_duplicate() -> None:
    args = rb'{"\u0061":1,"a\u003cb":2,"\u00e9&":3,"line\n":4,"a":9}'
    # Printable ASCII names lose their escapes; others get Go's (é stays raw, & is escaped).
    assert _latest_args(args) == '&kind=k&args={"a":1,"a<b":2,"line\\n":4,"é\\u0026":3}'.encode()


def test_latest_rules_keep_values_byte_for_byte() -> None:
    args = b'{"n":1E+21,"z":-0,"o":{"y":2, "x":[1, 2]}}'
    assert _latest_args(args) == b'&kind=k&args={"n":1E+21,"o":{"y":2, "x":[1, 2]},"z":-0}'


def test_latest_rules_refuse_args_that_are_not_an_object() -> None:
    assert _latest_args(b"[]") == b"&kind=k&args={}"
    for args in (b"[1]", b"null", b'"args"'):
        with pytest.raises(UniqueKeyError, match="must encode to a JSON object"):
            _latest_args(args)


def test_selected_fields_are_built_the_same_under_both_rules() -> None:
    args = b'{"account":{"id":"a","x":1},"label":"l"}'
    fields = ["account.id", "label"]
    assert build_unique_key_string("k", args, fields, BY_ARGS, NOW, "q", rules=LATEST) == (
        build_unique_key_string("k", args, fields, BY_ARGS, NOW, "q")
    )


def test_latest_rules_print_the_period_bucket_in_utc() -> None:
    opts = UniqueOpts(by_period=timedelta(hours=1))
    new_york = NOW.astimezone(ZoneInfo("America/New_York"))
    assert build_unique_key_string("k", b"{}", [], opts, new_york, "q", rules=LATEST) == (
        b"&kind=k&period=2024-05-14T13:00:00Z"
    )
    v043 = build_unique_key_string("k", b"{}", [], opts, new_york, "q")
    assert v043 == b"&kind=k&period=2024-05-14T09:00:00-04:00"
    in_utc = unique_key("k", b"{}", [], opts, NOW, "q")
    assert unique_key("k", b"{}", [], opts, new_york, "q", rules="latest") == in_utc


def test_unique_key_rules_by_name_and_unknown_names() -> None:
    assert parse_unique_key_rules("v0.43") is UniqueKeyRules.V0_43
    assert parse_unique_key_rules(LATEST) is LATEST
    with pytest.raises(ValidationError, match="unknown unique key rules 'v9'"):
        parse_unique_key_rules("v9")
    with pytest.raises(ValidationError, match="unknown unique key rules"):
        build_unique_key_string("k", b"{}", [], BY_ARGS, NOW, "q", rules="newest")
