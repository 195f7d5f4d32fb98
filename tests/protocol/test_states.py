from __future__ import annotations

import pytest

from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.states import (
    ALL_STATES,
    FINALIZED_STATES,
    TRANSITIONS,
    Actor,
    JobState,
    check_transition,
    parse_states,
)


def test_eight_states_in_river_order() -> None:
    assert [s.value for s in ALL_STATES] == [
        "available", "cancelled", "completed", "discarded", "pending", "retryable", "running", "scheduled",
    ]
    assert {s for s in ALL_STATES if s.finalized} == FINALIZED_STATES


@pytest.mark.parametrize(
    ("current", "actor", "target"),
    [
        (None, Actor.INSERT, JobState.AVAILABLE),
        (None, Actor.INSERT, JobState.PENDING),
        (JobState.AVAILABLE, Actor.PRODUCER, JobState.RUNNING),
        (JobState.RUNNING, Actor.COMPLETER, JobState.AVAILABLE),
        (JobState.RUNNING, Actor.RESCUER, JobState.DISCARDED),
        (JobState.SCHEDULED, Actor.SCHEDULER, JobState.AVAILABLE),
        (JobState.RETRYABLE, Actor.CANCEL_API, JobState.CANCELLED),
        (JobState.COMPLETED, Actor.RETRY_API, JobState.AVAILABLE),
        (JobState.DISCARDED, Actor.JOB_CLEANER, None),
    ],
)
def test_legal_transitions_pass(current: JobState | None, actor: Actor, target: JobState | None) -> None:
    check_transition(current, actor, target)


@pytest.mark.parametrize(
    ("current", "actor", "target"),
    [
        (JobState.COMPLETED, Actor.PRODUCER, JobState.RUNNING),  # finalized jobs are never claimed
        (JobState.RUNNING, Actor.CANCEL_API, JobState.CANCELLED),  # running jobs only get cancel_attempted_at
        (JobState.RUNNING, Actor.DELETE_API, None),
        (JobState.RUNNING, Actor.RETRY_API, JobState.AVAILABLE),
        (JobState.PENDING, Actor.SCHEDULER, JobState.AVAILABLE),  # River never moves pending jobs
        (JobState.AVAILABLE, Actor.JOB_CLEANER, None),
        (None, Actor.INSERT, JobState.RUNNING),
    ],
)
def test_illegal_transitions_raise(current: JobState | None, actor: Actor, target: JobState | None) -> None:
    with pytest.raises(ProtocolError, match="illegal transition"):
        check_transition(current, actor, target)


def test_no_actor_moves_a_finalized_job_except_retry_delete_and_cleaner() -> None:
    for (current, actor), targets in TRANSITIONS.items():
        if current in FINALIZED_STATES:
            assert actor in (Actor.RETRY_API, Actor.DELETE_API, Actor.JOB_CLEANER), (current, actor, targets)


def test_parse_states_rejects_unknown() -> None:
    assert parse_states(["running", JobState.PENDING]) == (JobState.RUNNING, JobState.PENDING)
    with pytest.raises(ValidationError, match="invalid job state 'Running'"):
        JobState.parse("Running")
