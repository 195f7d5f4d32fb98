"""build_job: the row a client would insert and a producer claim, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from river_protocol.errors import ValidationError
from river_protocol.job import AttemptError
from river_protocol.options import InsertOpts
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts
from river_sync.testing import build_job
from tests.testing_helpers import Task, Urgent

NOW = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def test_defaults_look_like_a_claimed_job() -> None:
    job = build_job(Task("a"), now=NOW)
    assert (job.id, job.kind, job.encoded_args, job.state) == (1, "task", b'{"name":"a"}', JobState.RUNNING)
    assert (job.queue, job.priority, job.max_attempts, job.tags) == ("default", 1, 25, ())
    assert job.attempt == 1 and job.attempted_at == NOW and job.attempted_by == ("river-test",)
    assert job.created_at == NOW and job.scheduled_at == NOW and job.finalized_at is None
    assert job.metadata == {} and job.errors == () and job.unique_key is None


def test_args_type_defaults_and_explicit_opts_resolve_like_the_client() -> None:
    job = build_job(Urgent("x"), now=NOW)
    assert (job.queue, job.priority, job.max_attempts, job.tags) == ("urgent", 2, 3, ("hot",))
    later = NOW + timedelta(hours=1)
    opts = InsertOpts(priority=4, tags=(), scheduled_at=later, metadata={"m": 1})
    job = build_job(Urgent("x"), opts, now=NOW)
    assert (job.queue, job.priority, job.max_attempts, job.tags) == ("urgent", 4, 3, ())
    assert job.scheduled_at == later and job.metadata == {"m": 1}


def test_unique_opts_give_the_same_key_as_an_insert() -> None:
    from river_protocol.golang.encoding_json import encode_args
    from river_protocol.options import resolve_insert_params

    opts = InsertOpts(unique_opts=UniqueOpts(by_args=True))
    job = build_job(Task("u"), opts, now=NOW)
    params = resolve_insert_params("task", encode_args(Task("u")), insert_opts=opts, args_opts=None,
                                   unique_fields=[], now=NOW)
    assert job.unique_key == params.unique_key is not None
    assert job.unique_states == params.unique_states


def test_attempt_zero_state_and_overrides() -> None:
    fresh = build_job(Task(), attempt=0, state="available", now=NOW, id=7)
    assert (fresh.id, fresh.state, fresh.attempt, fresh.attempted_at, fresh.attempted_by) == (
        7, JobState.AVAILABLE, 0, None, ())
    err = AttemptError(at=NOW, attempt=1, error="boom")
    done = build_job(Task(), state=JobState.COMPLETED, attempt=2, errors=[err], client_id="c1",
                     attempted_by=["c0", "c1"], metadata={"k": "v"}, now=NOW)
    assert done.finalized_at == NOW and done.errors == (err,) and done.attempted_by == ("c0", "c1")
    assert done.metadata == {"k": "v"}


def test_default_now_is_the_clock() -> None:
    before = datetime.now(UTC)
    job = build_job(Task())
    assert job.created_at is not None and job.created_at >= before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"attempt": -1}, "attempt cannot be negative"),
        ({"id": 0}, "job id must be positive"),
        ({"now": datetime(2024, 1, 1)}, "timezone-aware"),
        ({"opts": {"queue": "x"}}, "opts must be InsertOpts"),
        ({"opts": InsertOpts(priority=9)}, "priority must be between 1 and 4"),
    ],
)
def test_bad_input_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        build_job(Task(), **kwargs)  # type: ignore[arg-type]


def test_args_without_kind_are_refused() -> None:
    with pytest.raises(ValidationError, match="kind"):
        build_job({"name": "x"})
