"""The dashboard's figures from rows (river_protocol.dashboard): pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from river_protocol.dashboard import (
    SERIES,
    STATE_ORDER,
    HistogramCell,
    QueueStateCount,
    StateCount,
    available_queues,
    count_intent,
    histogram_intent,
    live_leader,
    periodic_seen,
    pretty_json,
    queue_overviews,
    waited,
)
from river_protocol.errors import ValidationError
from river_protocol.intents import LeaderRow, QueueRow
from river_protocol.job import JobRow
from river_protocol.states import JobState

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
S = JobState


def test_histogram_intent_splits_the_span_before_now_into_equal_buckets() -> None:
    intent = histogram_intent(NOW, span=timedelta(hours=1), buckets=30)
    assert intent.since == NOW - timedelta(hours=1)
    assert intent.bucket == timedelta(minutes=2) and intent.buckets == 30
    with pytest.raises(ValidationError, match="timezone-aware"):
        histogram_intent(NOW.replace(tzinfo=None))
    with pytest.raises(ValidationError, match="positive"):
        histogram_intent(NOW, buckets=0)


def test_count_intent_needs_a_positive_limit() -> None:
    assert count_intent(5).exact_up_to == 5
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValidationError):
            count_intent(bad)  # type: ignore[arg-type]


def test_queue_overviews_merge_queue_rows_counts_ages_and_series() -> None:
    queues = [QueueRow("email", NOW, {}, NOW - timedelta(minutes=5), NOW)]
    counts = [
        QueueStateCount("email", S.AVAILABLE, 3),
        QueueStateCount("bulk", S.COMPLETED, 250_000, estimated=True),
        QueueStateCount("bulk", S.AVAILABLE, 7),
        QueueStateCount("bulk", S.SCHEDULED, 1001, estimated=True, at_least=True),
    ]
    cells = [
        HistogramCell("bulk", S.COMPLETED, 0, 5),
        HistogramCell("bulk", S.DISCARDED, 1, 2),
        HistogramCell("bulk", S.RETRYABLE, 1, 1),
        HistogramCell("bulk", S.CANCELLED, 2, 4),
        HistogramCell("bulk", S.COMPLETED, 3, 9),  # outside the 3 buckets: ignored
    ]
    oldest = {"bulk": NOW - timedelta(seconds=90), "email": NOW + timedelta(seconds=5)}
    email, bulk = sorted(
        queue_overviews(queues=queues, counts=counts, oldest=oldest, cells=cells, buckets=3, now=NOW),
        key=lambda q: q.name != "email",
    )
    assert email.registered and email.paused and email.states[S.AVAILABLE] == StateCount(3)
    assert list(email.states) == list(STATE_ORDER) and email.states[S.RUNNING] == StateCount(0)
    assert email.oldest_available_age == timedelta(0)  # a clock skew never shows a negative age
    assert email.series == {name: (0, 0, 0) for name in SERIES}
    assert not bulk.registered and not bulk.paused
    assert bulk.states[S.COMPLETED] == StateCount(250_000, estimated=True)
    assert bulk.states[S.SCHEDULED] == StateCount(1001, estimated=True, at_least=True)
    assert bulk.total == StateCount(251_008, estimated=True)
    assert bulk.oldest_available_age == timedelta(seconds=90)
    assert bulk.series == {"completed": (5, 0, 0), "failed": (0, 3, 0), "cancelled": (0, 0, 4)}


def test_waited_is_never_negative() -> None:
    assert waited(NOW - timedelta(seconds=90), NOW) == timedelta(seconds=90)
    # A clock a moment behind the database's: scheduled "in the future", waited nothing yet.
    assert waited(NOW + timedelta(seconds=2), NOW) == timedelta(0)


def test_a_leader_whose_term_expired_is_not_shown() -> None:
    leader = LeaderRow("worker-1", elected_at=NOW - timedelta(seconds=10),
                       expires_at=NOW + timedelta(seconds=5))
    assert live_leader(leader, NOW) is leader
    assert live_leader(leader, NOW + timedelta(seconds=5)) is None
    assert live_leader(None, NOW) is None


def test_available_queues_are_those_with_available_jobs() -> None:
    counts = [
        QueueStateCount("b", S.AVAILABLE, 1),
        QueueStateCount("a", S.AVAILABLE, 2),
        QueueStateCount("c", S.RUNNING, 1),
        QueueStateCount("d", S.AVAILABLE, 0),
    ]
    assert available_queues(counts) == ("a", "b")


def _job(job_id: int, scheduled: datetime, metadata: dict[str, object], state: S = S.COMPLETED) -> JobRow:
    return JobRow(
        id=job_id,
        kind="cleanup_kind",
        encoded_args=b"{}",
        state=state,
        queue="maint",
        scheduled_at=scheduled,
        metadata=metadata,
    )


def test_periodic_seen_groups_by_periodic_id_with_last_and_next_runs() -> None:
    marked = {"periodic": True, "river:periodic_job_id": "nightly"}
    jobs = [  # newest first, as PeriodicJobsSeen returns them
        _job(9, NOW + timedelta(hours=1), marked, S.SCHEDULED),
        _job(8, NOW - timedelta(hours=1), marked, S.DISCARDED),
        _job(7, NOW - timedelta(hours=2), marked),
        _job(6, NOW - timedelta(minutes=3), {"periodic": True}),  # no ID: grouped by kind
        _job(5, NOW - timedelta(minutes=3), {"periodic": "yes"}),  # not River's marker
        _job(4, NOW - timedelta(minutes=3), {}),
    ]
    nightly, by_kind = sorted(periodic_seen(jobs, NOW), key=lambda p: p.periodic_id != "nightly")
    assert (nightly.last_run, nightly.last_state, nightly.last_job_id) == (
        NOW - timedelta(hours=1),
        S.DISCARDED,
        8,
    )
    assert nightly.next_run == NOW + timedelta(hours=1) and nightly.seen == 3
    assert by_kind.periodic_id == "cleanup_kind" and by_kind.seen == 1 and by_kind.next_run is None
    assert periodic_seen([], NOW) == []


def test_pretty_json_indents_stored_json_and_shows_anything_else_as_it_is() -> None:
    assert pretty_json(b'{"b":1,"a":[1,2]}') == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}'
    assert pretty_json(b"not json <b>") == "not json <b>"
    assert pretty_json("a string") == '"a string"'
    assert pretty_json({"é": None}) == '{\n  "é": null\n}'


def test_action_outcome_says_when_the_api_left_a_job_as_it_was() -> None:
    from river_protocol.dashboard import action_outcome

    def row(state: S) -> JobRow:
        return JobRow(id=7, kind="k", encoded_args=b"{}", state=state)

    assert action_outcome("retry", row(S.AVAILABLE)) is None
    assert action_outcome("retry", row(S.RUNNING)) == "job 7 is running: not retried"
    assert action_outcome("cancel", row(S.CANCELLED)) is None
    assert action_outcome("cancel", row(S.RUNNING)) is None  # asked to stop
    assert action_outcome("cancel", row(S.COMPLETED)) == "job 7 is completed: not cancelled"
    assert action_outcome("delete", row(S.COMPLETED)) is None
