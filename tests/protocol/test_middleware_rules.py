"""Rules insert and work middleware rely on: metadata merging, the planned-fields check, outcome labels."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from river_protocol.errors import ValidationError
from river_protocol.intents import InsertJobs, InsertParams
from river_protocol.job import JobRow
from river_protocol.middleware import metadata_of, outcome_label, replace_insert_jobs, with_metadata
from river_protocol.states import JobState
from river_protocol.work import CancelCause, JobCancel, JobDiscard, JobSnooze, WorkCancelled


def params(**kw: object) -> InsertParams:
    return InsertParams(kind="k", encoded_args=b"{}", **kw)  # type: ignore[arg-type]


def test_with_metadata_merges_top_level_keys_and_replaces_existing_ones() -> None:
    before = params(metadata=b'{"a":1,"b":{"c":2}}')
    after = with_metadata(before, {"b": "new", "z": [1]})
    assert metadata_of(after) == {"a": 1, "b": "new", "z": [1]}
    assert metadata_of(before) == {"a": 1, "b": {"c": 2}}  # params are immutable values
    assert with_metadata(before, {}) is before


def test_with_metadata_refuses_a_non_mapping() -> None:
    with pytest.raises(ValidationError, match="must be a mapping"):
        with_metadata(params(), [("a", 1)])  # type: ignore[arg-type]


def test_replace_insert_jobs_keeps_the_nonce_and_takes_the_new_rows() -> None:
    insert = InsertJobs(jobs=(params(), params(priority=2)), nonce="00ff")
    changed = (with_metadata(insert.jobs[0], {"x": 1}), dataclasses.replace(insert.jobs[1], tags=("t",)))
    out = replace_insert_jobs(insert, changed)
    assert out.nonce == "00ff" and out.jobs == changed


@pytest.mark.parametrize(
    ("field", "value"),
    [("kind", "other"), ("encoded_args", b'{"a":1}'), ("queue", "q2"), ("state", JobState.SCHEDULED),
     ("unique_key", b"key")],
)
def test_replace_insert_jobs_refuses_a_change_to_a_planned_field(field: str, value: object) -> None:
    insert = InsertJobs(jobs=(params(),))
    with pytest.raises(ValidationError, match=f"changed {field} of job 0"):
        replace_insert_jobs(insert, [dataclasses.replace(insert.jobs[0], **{field: value})])


def test_replace_insert_jobs_refuses_other_counts_and_types() -> None:
    insert = InsertJobs(jobs=(params(),))
    with pytest.raises(ValidationError, match="passed on 2 jobs for an insert of 1"):
        replace_insert_jobs(insert, [params(), params()])
    with pytest.raises(ValidationError, match="passed on a dict as job 0"):
        replace_insert_jobs(insert, [{"kind": "k"}])  # type: ignore[list-item]


def job(attempt: int = 1, max_attempts: int = 3) -> JobRow:
    return JobRow(id=1, kind="k", encoded_args=b"{}", state=JobState.RUNNING, attempt=attempt,
                  max_attempts=max_attempts)


@pytest.mark.parametrize(
    ("result", "error", "label"),
    [
        (None, None, "completed"),
        ("anything", None, "completed"),
        (None, JobSnooze(timedelta(seconds=5)), "snooze"),
        (JobSnooze(timedelta(seconds=5)), None, "snooze"),
        (None, JobCancel("no"), "cancel"),
        (None, JobDiscard("no"), "discard"),
        (None, ValueError("boom"), "error"),
        (None, WorkCancelled(CancelCause.STOP), "interrupted"),
        (None, WorkCancelled(CancelCause.TIMEOUT), "error"),
    ],
)
def test_outcome_label_names_what_the_run_records(
    result: object, error: BaseException | None, label: str
) -> None:
    assert outcome_label(job(), result, error) == label


def test_a_failure_on_the_last_attempt_is_a_discard() -> None:
    assert outcome_label(job(attempt=3, max_attempts=3), None, ValueError("boom")) == "discard"
    assert outcome_label(job(attempt=2, max_attempts=3), None, ValueError("boom")) == "error"


def test_a_cancelled_runs_unwinding_is_labelled_by_the_tokens_cause() -> None:
    class Cancelled(BaseException):  # what trio raises through a cancelled run's scope
        pass

    assert outcome_label(job(), None, Cancelled(), cancel_cause=CancelCause.STOP) == "interrupted"
    assert outcome_label(job(), None, Cancelled(), cancel_cause=CancelCause.TIMEOUT) == "error"
    assert outcome_label(job(), None, Cancelled()) == "error"  # no cause: an ordinary failure
