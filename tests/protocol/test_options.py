"""InsertOpts validation and River's insert-parameter precedence (docs/protocol.md §5.1)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from river_protocol.errors import ValidationError
from river_protocol.options import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    InsertOpts,
    encode_metadata,
    resolve_insert_params,
    validate_kind,
    validate_max_attempts,
    validate_priority,
    validate_queue_name,
    validate_tags,
)
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts

NOW = datetime(2024, 5, 14, 13, 45, 27, 123456, tzinfo=UTC)
LATER = datetime(2024, 6, 1, 8, 30, tzinfo=UTC)
ARGS = b'{"name":"n","seq":1}'


def resolve(
    insert: InsertOpts | None = None, args: InsertOpts | None = None, **kw: object
) -> object:
    return resolve_insert_params(
        "fx_client",
        ARGS,
        insert_opts=insert,
        args_opts=args,
        unique_fields=["name"],
        now=NOW,
        **kw,  # type: ignore[arg-type]
    )


def test_defaults() -> None:
    assert (DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, DEFAULT_QUEUE) == (25, 1, "default")
    p = resolve_insert_params("k", b"{}", insert_opts=None, args_opts=None, unique_fields=[], now=NOW)
    assert p.queue == "default" and p.priority == 1 and p.max_attempts == 25
    assert p.state is JobState.AVAILABLE and p.scheduled_at is None
    assert p.metadata == b"{}" and p.tags == ()
    assert p.unique_key is None and p.unique_states is None


@pytest.mark.parametrize("queue", ["default", "a", "a_b", "a-b", "a|b", "q1", "x" * 64])
def test_valid_queue_names(queue: str) -> None:
    validate_queue_name(queue)


@pytest.mark.parametrize("queue", ["", "A", "a b", "a__b", "_a", "a-", "a\n", "x" * 65, "é"])
def test_invalid_queue_names(queue: str) -> None:
    with pytest.raises(ValidationError, match="queue name"):
        validate_queue_name(queue)


def test_tags() -> None:
    validate_tags(["abc", "a-b_c", "x" * 255])
    for bad in ["ab", "a,b,c", "-ab", "abc-", "a b c", "héé", "x" * 256]:
        with pytest.raises(ValidationError, match="tags should"):
            validate_tags([bad])


def test_priority_and_max_attempts_ranges() -> None:
    validate_priority(1)
    validate_priority(4)
    for bad in (0, 5, -1):
        with pytest.raises(ValidationError, match="priority"):
            validate_priority(bad)
    validate_max_attempts(32767)
    for bad in (0, -1, 32768):
        with pytest.raises(ValidationError, match="max_attempts"):
            validate_max_attempts(bad)


def test_insert_clamps_max_attempts_to_the_column_as_gos_drivers_do() -> None:
    assert resolve(InsertOpts(max_attempts=40_000), None).max_attempts == 32767  # type: ignore[attr-defined]
    assert resolve(InsertOpts(max_attempts=32767), None).max_attempts == 32767  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="max_attempts"):
        resolve(InsertOpts(max_attempts=-3), None)


def test_kind_regex() -> None:
    for good in ["email", "a.b", "Foo[int]", "x:y+z", "a/b<c>", "a·b"]:
        validate_kind(good)
    for bad in ["a", "", " ab", "a b", "-ab", "ab\n"]:
        with pytest.raises(ValidationError, match="should match regex"):
            validate_kind(bad)


def test_metadata_must_be_an_object() -> None:
    assert encode_metadata(None) == b"{}"
    assert encode_metadata(b"") == b"{}"
    assert encode_metadata(b'{"a":1}') == b'{"a":1}'
    with pytest.raises(ValidationError, match="JSON object"):
        encode_metadata(b"[1]")
    with pytest.raises(ValidationError, match="not valid JSON"):
        encode_metadata(b"{nope")


def test_metadata_mapping_encoded_like_go() -> None:
    assert encode_metadata({"b": "<x>", "a": 1}) == b'{"a":1,"b":"\\u003cx\\u003e"}'


def test_precedence_insert_then_args_then_client() -> None:
    args = InsertOpts(max_attempts=7, priority=3, queue="from_args")
    p = resolve(None, args, client_max_attempts=9)
    assert (p.max_attempts, p.priority, p.queue) == (7, 3, "from_args")  # type: ignore[attr-defined]
    p = resolve(InsertOpts(max_attempts=2, priority=4, queue="mine"), args)
    assert (p.max_attempts, p.priority, p.queue) == (2, 4, "mine")  # type: ignore[attr-defined]
    p = resolve(None, None, client_max_attempts=9)
    assert p.max_attempts == 9  # type: ignore[attr-defined]


def test_args_metadata_ignored_and_tags_not_merged() -> None:
    args = InsertOpts(metadata=b'{"from":"args"}', tags=("args-tag",))
    p = resolve(None, args)
    assert p.metadata == b"{}" and p.tags == ("args-tag",)  # type: ignore[attr-defined]
    p = resolve(InsertOpts(tags=()), args)
    assert p.tags == ()  # type: ignore[attr-defined]
    p = resolve(InsertOpts(tags=["own"], metadata={"k": "v"}), args)  # type: ignore[arg-type]
    assert p.tags == ("own",) and p.metadata == b'{"k":"v"}'  # type: ignore[attr-defined]


def test_scheduled_and_pending_states() -> None:
    p = resolve(InsertOpts(scheduled_at=LATER))
    assert p.state is JobState.SCHEDULED and p.scheduled_at == LATER  # type: ignore[attr-defined]
    p = resolve(None, InsertOpts(scheduled_at=LATER))
    assert p.state is JobState.SCHEDULED  # type: ignore[attr-defined]
    p = resolve(InsertOpts(scheduled_at=LATER, pending=True))
    assert p.state is JobState.PENDING and p.scheduled_at == LATER  # type: ignore[attr-defined]


def test_unique_key_uses_now_not_scheduled_at() -> None:
    opts = UniqueOpts(by_period=timedelta(hours=1))
    p = resolve(InsertOpts(scheduled_at=LATER, unique_opts=opts))
    assert p.unique_key == hashlib.sha256(b"&kind=fx_client&period=2024-05-14T13:00:00Z").digest()  # type: ignore[attr-defined]
    assert p.unique_states == 245  # type: ignore[attr-defined]


def test_unique_from_args_unless_insert_opts_non_empty() -> None:
    args = InsertOpts(queue="aq", unique_opts=UniqueOpts(by_args=True, by_queue=True))
    p = resolve(InsertOpts(unique_opts=UniqueOpts()), args)
    want = b'&kind=fx_client&args={"name":"n"}&queue=aq'
    assert p.unique_key == hashlib.sha256(want).digest()  # type: ignore[attr-defined]
    p = resolve(InsertOpts(unique_opts=UniqueOpts(by_state=())), args)
    assert p.unique_key == hashlib.sha256(b"&kind=fx_client").digest()  # type: ignore[attr-defined]


def test_exclude_kind_alone_is_refused() -> None:
    # Newer River refuses it (River v0.43 took it as "not unique"); nothing falls back to
    # the args' own unique options either.
    args = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    for opts in (UniqueOpts(exclude_kind=True), UniqueOpts(exclude_kind=True, by_state=())):
        with pytest.raises(ValidationError, match="ExcludeKind requires ByArgs, ByPeriod or ByQueue"):
            resolve(InsertOpts(unique_opts=opts), args)
    p = resolve(InsertOpts(unique_opts=UniqueOpts(exclude_kind=True, by_queue=True)))
    assert p.unique_key is not None  # type: ignore[attr-defined]


def test_invalid_options_raise_validation_error() -> None:
    with pytest.raises(ValidationError, match="less than 1 second"):
        resolve(InsertOpts(unique_opts=UniqueOpts(by_period=timedelta(milliseconds=1))))
    with pytest.raises(ValidationError, match="queue name"):
        resolve(InsertOpts(queue="Bad Queue"))
    with pytest.raises(ValidationError, match="priority"):
        resolve(InsertOpts(priority=9))
    with pytest.raises(ValidationError, match="tags"):
        resolve(InsertOpts(tags=("a,b",)))
    with pytest.raises(ValidationError, match="naive"):
        InsertOpts(scheduled_at=datetime(2024, 1, 1))
    with pytest.raises(ValidationError, match="tags must be a sequence"):
        InsertOpts(tags="abc")  # type: ignore[arg-type]
