"""The row reader's inline fast path gives exactly what the general column readers give.

``_job_row`` takes the shapes the drivers usually hand back without calling a
reader per column; for every other shape it must still agree, value for value
and in what it refuses, with reading each column through the general readers.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.dialects import rows
from river_protocol.errors import ValidationError
from river_protocol.job import JobRow, stored_job_row
from river_protocol.states import JobState

T = datetime(2031, 3, 4, 12, 0, 5, 123456, tzinfo=UTC)


def _string_list(value: Any) -> tuple[str, ...]:
    """A string-list column read without the fast path's shortcuts (None reads as empty)."""
    return () if value is None else rows._checked_strings(rows._strings_raw(value))


def _reference(row: list[Any]) -> JobRow:
    """The strict reading of every column through the module's general readers."""
    args = rows._json_bytes(row[2])
    if args[:1] != b"{":
        raise ValidationError("args must be a JSON object")
    return JobRow(
        id=int(row[0]), kind=str(row[1]), encoded_args=args, state=JobState.parse(str(row[3])),
        queue=str(row[4]), priority=int(row[5]), attempt=int(row[6]), max_attempts=int(row[7]),
        attempted_at=rows._utc_or_none(row[8]), attempted_by=_string_list(row[9]),
        created_at=rows._utc_or_none(row[10]), finalized_at=rows._utc_or_none(row[11]),
        scheduled_at=rows._utc_or_none(row[12]), errors=(), metadata=rows._json_object(row[14]),
        tags=_string_list(row[15]), unique_key=rows._unique_key(row[16]),
        unique_states=rows._unique_states(row[17]),
    )


def _outcome(fn: Any, row: list[Any]) -> Any:
    try:
        return fn(row)
    except rows._UNREADABLE:
        return "unreadable"  # either way the row goes to the lenient reader


times = st.one_of(
    st.none(),
    st.just(T),
    st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7))])),
    st.datetimes(),  # naive: read as UTC
    st.sampled_from(["2031-03-04 12:00:05.123", "2031-03-04T12:00:05Z", "not a time", ""]),
    st.integers(min_value=0, max_value=2**31),
)
string_lists = st.one_of(
    st.none(), st.lists(st.text(max_size=5), max_size=3), st.just([None]), st.just([1]),
    st.sampled_from(['["a"]', "[]", "null", '"a"', "", "{}"]),
)
metadata = st.one_of(st.none(), st.sampled_from(["{}", '{"a": 1}', "[]", "null", "", "{", b"{}"]))


@st.composite
def job_rows(draw: st.DrawFn) -> list[Any]:
    return [
        draw(st.one_of(st.integers(min_value=1, max_value=2**62), st.just("12"))),
        draw(st.sampled_from(["k", "bench_noop"])),
        draw(st.sampled_from(['{"n": 1}', "{}", b'{"a":2}', "[]", '"x"', "", None])),
        draw(st.sampled_from(["running", "available", "completed", "bogus", JobState.RETRYABLE, 3])),
        draw(st.sampled_from(["default", "q"])),
        draw(st.integers(min_value=1, max_value=4)),
        draw(st.one_of(st.integers(min_value=0, max_value=30), st.just("2"))),
        draw(st.integers(min_value=1, max_value=30)),
        draw(times), draw(string_lists), draw(times), draw(times), draw(times),
        None,
        draw(metadata), draw(string_lists),
        draw(st.sampled_from([None, b"", b"\x01\x02", "0a0b"])),
        draw(st.sampled_from([None, 0, 3, "00000011"])),
    ]


@settings(max_examples=400)
@given(job_rows())
def test_fast_path_agrees_with_general_readers(row: list[Any]) -> None:
    assert _outcome(lambda r: rows._job_row(r, errors=()), row) == _outcome(_reference, row)


def test_common_postgres_row_is_read_without_conversion() -> None:
    row = [7, "k", '{"a":1}', "running", "default", 1, 2, 25, T, ["c"], T, None, T, None, "{}", [],
           None, None]
    job = rows.job_row_from_pg(row)
    assert job.attempted_at is T and job.metadata == {} and job.attempted_by == ("c",)
    assert job.encoded_args == b'{"a":1}' and job.state is JobState.RUNNING and job.undecodable is None


def test_unreadable_value_still_falls_back_to_the_lenient_reader() -> None:
    row = [7, "k", '{"a":1}', "running", "default", 1, 2, 25, "yesterday", None, T, None, T, None,
           "{}", None, None, None]
    job = rows.job_row_from_pg(row)
    assert job.attempted_at is None and job.undecodable is not None
    assert job.undecodable.startswith("attempted_at: ")


def test_stored_job_row_is_a_frozen_job_row_equal_to_the_constructed_one() -> None:
    values = dict(
        id=1, kind="k", encoded_args=b"{}", state=JobState.RUNNING, queue="q", priority=2,
        attempt=3, max_attempts=4, attempted_at=T, attempted_by=("a",), created_at=T,
        finalized_at=None, scheduled_at=T, errors=(), metadata={"m": 1}, tags=("t",),
        unique_key=b"k", unique_states=3, undecodable="why",
    )
    built = stored_job_row(**values)  # type: ignore[arg-type]
    assert type(built) is JobRow and built == JobRow(**values)  # type: ignore[arg-type]
    assert dataclasses.replace(built, id=9).id == 9
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.id = 2  # type: ignore[misc]
    names = tuple(f.name for f in dataclasses.fields(JobRow))
    assert stored_job_row.__code__.co_varnames[: len(values)] == names


# ---------------------------------------------------------------- the common-row tier
#
# ``_common_pg_row`` takes the exact row psycopg's binary results give for a plain job and
# declines (None) anything else; whatever it builds must be what the lenient reader, which
# accepts every row, reads from the same values.


def _lenient(row: tuple[Any, ...]) -> Any:
    try:
        return rows._lenient_job_row(row, rows._pg_error_elements)
    except ValidationError:
        return "refused"


class _Str(str):
    pass


class _Int(int):
    pass


def _near(common: Any, *others: Any) -> Any:
    """Mostly the common value, sometimes a near miss the tier must decline or read the same."""
    return st.one_of(st.just(common), *(st.just(o) for o in others)) if others else st.just(common)


aware_times = st.one_of(
    st.none(),
    st.datetimes(timezones=st.just(UTC)),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=2)))),
    st.datetimes(),
    st.just("2031-03-04 12:00:05.123"),
)
psycopg_string_lists = st.one_of(  # JSON text (array_to_json), as claims read them, and other shapes
    st.lists(st.text(max_size=4), max_size=3).map(json.dumps), st.none(),
    st.sampled_from(["[]", "null", "[1]", '["a",null]', '[["a"]]', "", "{}", '"a"']),
    st.just(_Str('["a"]')), st.lists(st.text(max_size=4), max_size=3), st.just([1]), st.just(("a",)),
)


@st.composite
def common_rows(draw: st.DrawFn) -> tuple[Any, ...]:
    return (
        draw(st.one_of(st.integers(min_value=1, max_value=2**62), st.just(True), st.just(_Int(3)),
                       st.just("12"))),
        draw(_near("k", _Str("k"), 5)),
        draw(st.one_of(st.sampled_from(['{"n":1}', "{}", '{"é":"ü"}', "[]", "", '"x"', " {}"]),
                       st.just(b'{"a":2}'), st.just(_Str("{}")))),
        draw(st.sampled_from(["running", "completed", "available", "bogus", JobState.RETRYABLE])),
        draw(_near("default", _Str("q"), None)),
        draw(st.one_of(st.integers(min_value=1, max_value=4), st.just(False), st.just(2.0))),
        draw(st.one_of(st.integers(min_value=0, max_value=30), st.just("2"))),
        draw(st.one_of(st.integers(min_value=1, max_value=30), st.just(_Int(25)))),
        draw(aware_times), draw(psycopg_string_lists), draw(aware_times), draw(aware_times),
        draw(aware_times),
        draw(st.sampled_from([None, [], ['{"at":"2031-03-04T12:00:05Z","attempt":1,"error":"e"}']])),
        draw(st.sampled_from(["{}", '{"a":1}', None, b"{}", "[]", _Str("{}")])),
        draw(psycopg_string_lists),
        draw(st.sampled_from([None, b"", b"\x01"])),
        draw(st.sampled_from([None, 0, 3])),
    )


@settings(max_examples=600)
@given(common_rows())
def test_common_row_tier_agrees_with_the_lenient_reader(row: tuple[Any, ...]) -> None:
    fast = rows._common_pg_row(*row)
    if fast is not None:
        assert type(fast) is JobRow and fast.undecodable is None
        assert fast == _lenient(row)
        assert fast == rows._job_row(row, errors=())
    try:
        read: Any = rows.job_row_from_pg(row)
    except ValidationError:
        read = "refused"
    assert read == _lenient(row)


@settings(max_examples=300)
@given(job_rows())
def test_common_row_tier_declines_or_agrees_on_any_row(row: list[Any]) -> None:
    fast = rows._common_pg_row(*row)
    assert fast is None or fast == _lenient(tuple(row))


def test_a_claimed_psycopg_row_takes_the_common_tier() -> None:
    # attempted_by and tags arrive as JSON text (rows._PG_CASTS: array_to_json).
    row = (7, "k", '{"a":1}', "running", "default", 1, 2, 25, T, '["c"]', T, None, T, None, "{}", "[]",
           None, None)
    job = rows._common_pg_row(*row)
    assert job is not None and job == rows._job_row(row, errors=())
    assert job.tags == () and job.attempted_by == ("c",) and job.encoded_args == b'{"a":1}'
    tagged = rows._common_pg_row(*row[:15], '["x","y"]', None, None)
    assert tagged is not None and tagged.tags == ("x", "y")
    assert rows._common_pg_row(*row[:9], "[1]", *row[10:]) is None  # not strings: the general reader
    completed = rows._common_pg_row(*row[:3], "completed", *row[4:11], T, *row[12:])
    assert completed is not None and completed.state is JobState.COMPLETED and completed.finalized_at is T


def test_a_row_with_errors_or_a_unique_key_leaves_the_common_tier() -> None:
    row = (7, "k", '{"a":1}', "running", "default", 1, 2, 25, T, '["c"]', T, None, T, None, "{}", "[]",
           b"\x01", 3)
    assert rows._common_pg_row(*row) is None
    assert rows.job_row_from_pg(row).unique_key == b"\x01"
@settings(max_examples=400)
@given(job_rows())
def test_sqlite_reader_agrees_with_the_shared_reader(row: list[Any]) -> None:
    shared = _outcome(lambda r: rows._job_row(r, errors=()), row)
    assert _outcome(lambda r: rows._sqlite_job_row(r, ()), row) == shared


def test_sqlite_reader_reads_canonical_time_text_as_aware_utc() -> None:
    row = [7, "k", '{"a":1}', "running", "default", 1, 2, 25, "2031-03-04 12:00:05.123", '["c"]',
           "2031-03-04 12:00:05.000", None, "2031-03-04 12:00:05.000", None, "{}", "[]", None, None]
    job = rows.job_row_from_sqlite(row)
    assert job.attempted_at == datetime(2031, 3, 4, 12, 0, 5, 123000, tzinfo=UTC)
    assert job.attempted_at.tzinfo is UTC and job.created_at == T.replace(microsecond=0)
    assert job.attempted_by == ("c",) and job.tags == () and job.undecodable is None
