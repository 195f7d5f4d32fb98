"""River Go's job list rules (``river_protocol.go_job_list``): fields, defaults and cursor text."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from river_protocol.errors import ValidationError
from river_protocol.go_job_list import (
    decode_go_job_list_cursor,
    go_job_list_cursor,
    go_list_jobs_intent,
)
from river_protocol.job import JobRow
from river_protocol.states import JobState

T = datetime(2099, 1, 1, 0, 0, 1, 120_000, tzinfo=UTC)


def _job(**kw: object) -> JobRow:
    base: dict[str, object] = {"id": 9_007_199_254_740_993, "kind": "conformance_echo", "encoded_args": b"{}",
                               "state": JobState.SCHEDULED, "scheduled_at": T, "created_at": T}
    return JobRow(**{**base, **kw})  # type: ignore[arg-type]


def _decoded(cursor: str) -> dict[str, object]:
    data = base64.urlsafe_b64decode(cursor)
    value: dict[str, object] = json.loads(data)
    return value


def test_an_id_cursor_is_gos_text_with_the_zero_time() -> None:
    cursor = go_job_list_cursor(_job(), "id")
    raw = base64.urlsafe_b64decode(cursor)
    assert raw == (b'{"id":9007199254740993,"kind":"conformance_echo","queue":"default",'
                   b'"sort_field":"id","time":"0001-01-01T00:00:00Z"}')
    assert cursor.endswith("=") or len(cursor) % 4 == 0  # padded, as Go's URLEncoding
    assert decode_go_job_list_cursor(cursor) == (None, 9_007_199_254_740_993)


def test_cursor_strings_are_escaped_as_go_escapes_them() -> None:
    cursor = go_job_list_cursor(_job(kind="conformance_cursor<>&~~~"), "id")
    assert b'"kind":"conformance_cursor\\u003c\\u003e\\u0026~~~"' in base64.urlsafe_b64decode(cursor)
    assert "-" in cursor  # the URL-safe alphabet
    # Go reads cursors with the standard alphabet: both are accepted.
    standard = cursor.replace("-", "+").replace("_", "/")
    assert decode_go_job_list_cursor(standard) == decode_go_job_list_cursor(cursor)
    assert decode_go_job_list_cursor(cursor.rstrip("=")) == decode_go_job_list_cursor(cursor)


def test_cursor_times_are_the_sort_value_in_gos_format() -> None:
    assert _decoded(go_job_list_cursor(_job(), "scheduled_at"))["time"] == "2099-01-01T00:00:01.12Z"
    done = _job(state=JobState.CANCELLED, finalized_at=T)
    assert _decoded(go_job_list_cursor(done, "finalized_at"))["time"] == "2099-01-01T00:00:01.12Z"
    # "time": the first listed state's column, whatever the job's own state (newer River;
    # River Go v0.43 took the job's own state's column).
    running = _job(state=JobState.RUNNING, attempted_at=datetime(2030, 5, 6, tzinfo=UTC))
    assert _decoded(go_job_list_cursor(running, "time", states=["running"]))["time"] == "2030-05-06T00:00:00Z"
    # Go's default states start with available: scheduled_at.
    assert _decoded(go_job_list_cursor(running, "time"))["time"] == "2099-01-01T00:00:01.12Z"
    assert _decoded(go_job_list_cursor(done, "time", states=["available", "cancelled"]))["time"] \
        == "2099-01-01T00:00:01.12Z"
    assert _decoded(go_job_list_cursor(done, "time", states=["cancelled"]))["sort_field"] == "time"
    assert decode_go_job_list_cursor(go_job_list_cursor(done, "time", states=["cancelled"])) == (T, done.id)


def test_a_null_sort_value_is_gos_zero_time() -> None:
    retried = _job(state=JobState.AVAILABLE)  # no finalized_at
    for cursor in (go_job_list_cursor(retried, "time", states=["cancelled", "available"]),
                   go_job_list_cursor(retried, "finalized_at")):
        assert _decoded(cursor)["time"] == "0001-01-01T00:00:00Z"
        assert decode_go_job_list_cursor(cursor) == (None, retried.id)
    # A null time reads the same.
    null_time = base64.urlsafe_b64encode(b'{"id":5,"sort_field":"finalized_at","time":null}').decode()
    assert decode_go_job_list_cursor(null_time) == (None, 5)


def test_time_orders_by_the_first_listed_states_column() -> None:
    assert go_list_jobs_intent(order_by="time").order_by == "scheduled_at"  # Go's states start available
    assert go_list_jobs_intent(order_by="time", states=["running", "available"]).order_by == "attempted_at"
    assert go_list_jobs_intent(order_by="time", states=["cancelled", "available"]).order_by == "finalized_at"
    assert go_list_jobs_intent(order_by="time", states=["pending"]).order_by == "scheduled_at"


def test_finalized_at_lists_finalized_states_only() -> None:
    intent = go_list_jobs_intent(order_by="finalized_at")
    assert intent.filter.states == (JobState.CANCELLED, JobState.COMPLETED, JobState.DISCARDED)
    assert go_list_jobs_intent(order_by="finalized_at", states=["completed"]).filter.states == (
        JobState.COMPLETED,)
    with pytest.raises(ValidationError, match="non-finalized"):
        go_list_jobs_intent(order_by="finalized_at", states=["cancelled", "available"])


def test_the_intent_carries_every_filter_and_gos_keyset() -> None:
    cursor = go_job_list_cursor(_job(), "scheduled_at")
    intent = go_list_jobs_intent(states=["scheduled"], kinds=["k"], queues=["q"], ids=[1, 2], priorities=[3],
                                 tags_all=["a", "b"], metadata=b'{"w":1}', order_by="scheduled_at",
                                 descending=True, limit=2, after=cursor)
    assert intent.go_keyset and intent.descending and intent.limit == 2
    assert intent.after == (T, _job().id)
    f = intent.filter
    assert (f.kinds, f.queues, f.ids, f.priorities, f.tags_all, f.metadata_contains) == (
        ("k",), ("q",), (1, 2), (3,), ("a", "b"), b'{"w":1}')


@pytest.mark.parametrize("kwargs", [
    {"order_by": "kind"}, {"limit": 0}, {"limit": 10_001}, {"states": ["nowhere"]},
    {"metadata": b"[1]"}, {"metadata": b"{"}, {"after": "not a cursor"},
    {"after": base64.urlsafe_b64encode(b'{"id":"1"}').decode()},
])
def test_bad_params_are_validation_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        go_list_jobs_intent(**kwargs)  # type: ignore[arg-type]
