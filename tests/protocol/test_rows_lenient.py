"""Row decoding of values other writers got wrong: the row is still read, and says what was unreadable."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from river_protocol.dialects.rows import job_row_from_pg, job_row_from_sqlite
from river_protocol.errors import ValidationError
from river_protocol.job import AttemptError
from river_protocol.states import JobState

T = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)
ERROR = '{"at":"2031-03-04T12:00:00Z","attempt":1,"error":"e","trace":""}'


def _row(**over: object) -> list[object]:
    base: dict[str, object] = {
        "id": 7, "kind": "k", "args": '{"a":1}', "state": "running", "queue": "default",
        "priority": 1, "attempt": 2, "max_attempts": 25, "attempted_at": T,
        "attempted_by": None, "created_at": T, "finalized_at": None, "scheduled_at": T,
        "errors": None, "metadata": "{}", "tags": None, "unique_key": None,
        "unique_states": None,
    }
    base.update(over)
    return list(base.values())


def test_good_rows_are_not_marked() -> None:
    pg = job_row_from_pg(_row(errors=[ERROR], tags=["a"], attempted_by=["c"]))
    lite = job_row_from_sqlite(_row(errors=f"[{ERROR}]", tags='["a"]', attempted_by='["c"]'))
    for job in (pg, lite):
        assert job.undecodable is None
        assert job.tags == ("a",) and job.attempted_by == ("c",) and job.errors[0].attempt == 1


@pytest.mark.parametrize(("column", "value", "placeholder"), [
    ("metadata", "null", {}),
    ("metadata", "[]", {}),
    ("metadata", '"text"', {}),
    ("metadata", '{"n": ' + "9" * 5000 + "}", {}),  # past Python's integer-digit limit
    ("metadata", "[" * 100_000 + "]" * 100_000, {}),  # nested past the recursion limit
    ("args", "[]", b"{}"),
    ("args", '"text"', b"{}"),
    ("args", "null", b"{}"),
    ("tags", '"a"', ()),
    ("tags", "[1, 2]", ()),
    ("tags", '{"a": 1}', ()),
    ("attempted_by", '{"a": 1}', ()),
    ("created_at", "last tuesday", None),
    ("scheduled_at", "2031-13-45 00:00:00", None),
])
def test_sqlite_unreadable_column_gets_placeholder_and_reason(
    column: str, value: str, placeholder: object
) -> None:
    job = job_row_from_sqlite(_row(**{column: value}))
    field = "encoded_args" if column == "args" else column
    assert getattr(job, field) == placeholder
    assert job.undecodable is not None and job.undecodable.startswith(f"{column}: ")
    # Everything readable is kept as stored.
    assert (job.id, job.kind, job.attempt, job.max_attempts, job.state) == (7, "k", 2, 25, JobState.RUNNING)


@pytest.mark.parametrize(("column", "value"), [
    ("tags", ["a", None]),
    ("attempted_by", [None]),
    ("metadata", "null"),
    ("args", "[1]"),
])
def test_pg_unreadable_column_is_marked(column: str, value: object) -> None:
    job = job_row_from_pg(_row(**{column: value}))
    assert job.undecodable is not None and job.undecodable.startswith(f"{column}: ")


def test_error_elements_in_other_shapes_are_read_leniently() -> None:
    # As newer River reads them (its harness leaf Chaos/DecodeIsolation): the job stays
    # workable, each element still counts (the retry backoff counts errors), an `at` that is
    # not RFC 3339 is Go's zero time, a decimal string attempt a number, a non-string error
    # or trace its JSON text, and an element that is not an object an error of its JSON.
    odd = '{"at": "2024-01-02 03:04:05+00", "attempt": "1", "error": {"message": "boom"}, "trace": ["frame"]}'
    pg = job_row_from_pg(_row(errors=[ERROR, '{"error": "x", "extra": true}', odd, "42", '"x"']))
    lite = job_row_from_sqlite(_row(errors=f'[{ERROR}, {{"error": "x", "extra": true}}, {odd}, 42, "x"]'))
    zero = datetime(1, 1, 1, tzinfo=UTC)
    for job in (pg, lite):
        assert job.undecodable is None
        assert job.errors[0].attempt == 1
        assert job.errors[1:] == (
            AttemptError(zero, 0, "x"),
            AttemptError(zero, 1, '{"message":"boom"}', '["frame"]'),
            AttemptError(zero, 0, "42"),
            AttemptError(zero, 0, '"x"'),
        )


@pytest.mark.parametrize(("attempt", "read"), [
    ('"7"', 7), ('"+7"', 7), ('"-2"', -2), ('" 7"', 0), ('"7.0"', 0), ("7.5", 0), ("true", 0),
    ("null", 0), ('"99999999999999999999"', 2**63 - 1),
])
def test_attempt_is_read_as_go_atoi_reads_its_text(attempt: str, read: int) -> None:
    job = job_row_from_pg(_row(errors=[f'{{"at": "2026-01-02T03:04:05Z", "attempt": {attempt}}}']))
    assert job.errors[0].attempt == read and job.undecodable is None


def test_sqlite_errors_of_another_type_read_as_none() -> None:
    job = job_row_from_sqlite(_row(errors='{"at": 1}'))
    assert job.errors == () and job.undecodable == "errors: expected a JSON array, found dict"


def test_several_problems_are_all_reported() -> None:
    job = job_row_from_sqlite(_row(metadata="[]", tags='"a"', created_at="never"))
    assert job.undecodable is not None
    assert [p.split(":")[0] for p in job.undecodable.split("; ")] == ["created_at", "metadata", "tags"]


def test_huge_reason_text_is_cut_short() -> None:
    job = job_row_from_sqlite(_row(metadata='"' + "x" * 10_000 + '"'))
    assert job.undecodable is not None and len(job.undecodable) < 300


def test_other_time_forms_on_sqlite_are_read_not_marked() -> None:
    job = job_row_from_sqlite(_row(created_at=1_700_000_000, scheduled_at="2031-03-04T12:00:00.123456789Z",
                                   attempted_at=b"2031-03-04 12:00:00 +0000 UTC"))
    assert job.undecodable is None
    assert job.created_at == datetime.fromtimestamp(1_700_000_000, UTC)
    assert job.scheduled_at == datetime(2031, 3, 4, 12, 0, 0, 123456, tzinfo=UTC)
    assert job.attempted_at == T


def test_unknown_state_is_a_clear_error_naming_the_job() -> None:
    with pytest.raises(ValidationError, match="job 7 has unknown state 'paused_by_hand'"):
        job_row_from_sqlite(_row(state="paused_by_hand"))


def test_short_rows_still_raise() -> None:
    with pytest.raises(ValidationError, match="columns"):
        job_row_from_pg(_row()[:5])
