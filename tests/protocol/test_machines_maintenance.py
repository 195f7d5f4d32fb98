"""Maintenance services: timing, batching, breaker, and the rescuer's per-job decision."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import (
    DeleteExpiredQueues,
    DeleteFinalizedBefore,
    DeleteNotificationsBefore,
    GetStuckJobs,
    IndexExists,
    ListReindexArtifacts,
    Notify,
    Reindex,
    RescueJobs,
    ScheduledJob,
    ScheduleJobs,
)
from river_protocol.job import JobRow
from river_protocol.machines.base import IntentFailed, IntentSucceeded, Stop, Tick
from river_protocol.machines.maintenance import (
    BatchSizeBreaker,
    DailyAtMidnightUTC,
    JobCleanerJob,
    MaintenanceOutput,
    ServiceState,
    Start,
    WorkerInfo,
    job_cleaner,
    job_rescuer,
    job_scheduler,
    notification_cleaner,
    queue_cleaner,
    reindexer,
    rescue_after_for,
    rescue_decision,
)
from river_protocol.machines.throttle import InsertNotifyThrottle
from river_protocol.states import JobState

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class FixedRng:
    def __init__(self, value: float = 0.5) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


class FixedPolicy:
    def next_retry(self, job: JobRow, now: datetime, rand: float) -> datetime:
        return now + timedelta(seconds=100)


def one(out: MaintenanceOutput) -> object:
    (intent,) = out.intents
    return intent


def test_scheduler_staggers_runs_and_notifies_due_queues() -> None:
    throttle = InsertNotifyThrottle()
    s = job_scheduler(FixedRng(0.5), throttle)
    assert s.handle(Start(), at(0)).next_deadline == at(0.5)
    intent = one(s.handle(Tick(), at(0.5)))
    assert intent == ScheduleJobs(now=at(5.5), limit=10_000)
    assert s.timeout_for(intent) == timedelta(seconds=30)  # type: ignore[arg-type]
    due = JobRow(
        id=1, kind="k", encoded_args=b"{}", state=JobState.AVAILABLE, queue="a", scheduled_at=at(0.5)
    )
    later = JobRow(
        id=2, kind="k", encoded_args=b"{}", state=JobState.AVAILABLE, queue="b", scheduled_at=at(3)
    )
    out = s.handle(IntentSucceeded(intent, [ScheduledJob(due, False), ScheduledJob(later, False)]), at(0.6))  # type: ignore[arg-type]
    assert out.intents == (Notify("river_insert", ('{"queue":"a"}',)),)
    assert [r.batches for r in out.runs] == [1]
    assert out.next_deadline == at(5.5)
    s.handle(IntentSucceeded(out.intents[0], None), at(0.7))


def test_full_batch_pauses_then_continues() -> None:
    s = queue_cleaner(FixedRng(0.0))
    s.handle(Start(), at(0))
    intent = one(s.handle(Tick(), at(0)))
    assert intent == DeleteExpiredQueues(updated_before=at(0) - timedelta(hours=24), limit=10_000)
    out = s.handle(IntentSucceeded(intent, ["q"] * 10_000), at(1))  # type: ignore[arg-type]
    assert out.intents == () and out.next_deadline == at(1.05) and s.state is ServiceState.WORKING
    intent = one(s.handle(Tick(), at(1.05)))
    out = s.handle(IntentSucceeded(intent, ["q"]), at(1.1))  # type: ignore[arg-type]
    assert out.runs[0].batches == 2
    assert out.next_deadline == at(3600)


def test_breaker_reduces_batch_after_three_timeouts() -> None:
    s = job_cleaner(FixedRng(0.0), interval=timedelta(seconds=30))
    s.handle(Start(), at(0))
    now = at(0)
    for _ in range(3):
        intent = one(s.handle(Tick(), now))
        assert isinstance(intent, DeleteFinalizedBefore) and intent.limit == 10_000
        out = s.handle(IntentFailed(intent, TimeoutError()), now)  # type: ignore[arg-type]
        assert out.runs[0].error is not None
        assert out.next_deadline is not None
        now = out.next_deadline
    intent = one(s.handle(Tick(), now))
    assert isinstance(intent, DeleteFinalizedBefore) and intent.limit == 1_000


def test_breaker_resets_on_success_and_window() -> None:
    b = BatchSizeBreaker()
    b.trip(at(0))
    b.trip(at(1))
    b.success()
    b.trip(at(2))
    b.trip(at(3))
    assert not b.open
    b2 = BatchSizeBreaker()
    b2.trip(at(0))
    b2.trip(at(1))
    b2.trip(at(700))
    assert not b2.open
    b2.trip(at(701))
    assert not b2.open  # the two early trips fell out of the 10 min window
    b2.trip(at(702))
    assert b2.open and b2.batch_size() == 1000
    b2.success()
    assert b2.open


def test_job_cleaner_horizons_and_disabled_states() -> None:
    job = JobCleanerJob(cancelled_retention=timedelta(microseconds=-1))
    intent = job.first(at(0), 10)
    assert intent == DeleteFinalizedBefore(
        cancelled_before=None,
        completed_before=at(0) - timedelta(hours=24),
        discarded_before=at(0) - timedelta(days=7),
        limit=10,
    )
    off = timedelta(microseconds=-1)
    assert JobCleanerJob(off, off, off).first(at(0), 10) is None


def test_notification_cleaner_single_delete_no_breaker() -> None:
    s = notification_cleaner(FixedRng(0.0))
    s.handle(Start(), at(0))
    intent = one(s.handle(Tick(), at(0)))
    assert intent == DeleteNotificationsBefore(created_before=at(-300))
    s.handle(IntentFailed(intent, TimeoutError()), at(1))  # type: ignore[arg-type]
    assert not s.breaker._trips


def test_reindexer_walks_indexes_on_schedule() -> None:
    s = reindexer(FixedRng(), indexes=("a", "b"))
    out = s.handle(Start(), at(0))
    assert out.next_deadline == datetime(2025, 1, 2, tzinfo=UTC)
    now = datetime(2025, 1, 2, tzinfo=UTC)
    intent = one(s.handle(Tick(), now))
    assert intent == IndexExists("a")
    intent = one(s.handle(IntentSucceeded(intent, True), now))  # type: ignore[arg-type]
    assert intent == ListReindexArtifacts("a")
    intent = one(s.handle(IntentSucceeded(intent, []), now))  # type: ignore[arg-type]
    assert intent == Reindex("a") and s.timeout_for(intent) == timedelta(minutes=1)  # type: ignore[arg-type]
    intent = one(s.handle(IntentSucceeded(intent, None), now))  # type: ignore[arg-type]
    assert intent == IndexExists("b")
    intent = one(s.handle(IntentSucceeded(intent, True), now))  # type: ignore[arg-type]
    out = s.handle(IntentSucceeded(intent, ["b_ccnew"]), now)  # type: ignore[arg-type]
    assert out.intents == () and out.next_deadline == datetime(2025, 1, 3, tzinfo=UTC)
    assert DailyAtMidnightUTC().next(datetime(2025, 1, 2, tzinfo=UTC)) == datetime(2025, 1, 3, tzinfo=UTC)


def test_stop_and_illegal_events() -> None:
    s = queue_cleaner(FixedRng())
    with pytest.raises(ProtocolError):
        s.handle(Tick(), at(0))
    with pytest.raises(ProtocolError):
        s.handle(IntentSucceeded(DeleteExpiredQueues(at(0), 1), []), at(0))
    s.handle(Start(), at(0))
    intent = one(s.handle(Tick(), at(1)))
    assert s.handle(Stop(), at(1)).stopped
    out = s.handle(IntentSucceeded(intent, []), at(2))  # type: ignore[arg-type]
    assert out.intents == () and out.runs == ()
    with pytest.raises(ProtocolError):
        s.handle(Start(), at(3))


def test_service_needs_interval_or_schedule() -> None:
    from river_protocol.machines.maintenance import MaintenanceService, QueueCleanerJob

    with pytest.raises(ValidationError):
        MaintenanceService("x", QueueCleanerJob(), FixedRng())


# ---------------------------------------------------------------- rescuer


def stuck(
    job_id: int = 1,
    kind: str = "k",
    attempt: int = 1,
    max_attempts: int = 25,
    metadata: dict[str, object] | None = None,
    attempted: float = -7200,
) -> JobRow:
    return JobRow(
        id=job_id,
        kind=kind,
        encoded_args=b"{}",
        state=JobState.RUNNING,
        attempt=attempt,
        max_attempts=max_attempts,
        attempted_at=at(attempted),
        scheduled_at=at(-9000),
        metadata=metadata or {},
    )


WORKERS = {"k": WorkerInfo()}


@pytest.mark.parametrize(
    ("job", "workers", "timeout", "expected"),
    [
        (stuck(metadata={"cancel_attempted_at": "2025-01-01T00:00:00Z"}), WORKERS, 60, JobState.CANCELLED),
        (stuck(kind="unknown"), WORKERS, 60, JobState.DISCARDED),
        (stuck(), {"k": WorkerInfo(args_valid=lambda j: False)}, 60, JobState.RETRYABLE),
        (stuck(attempt=25), {"k": WorkerInfo(args_valid=lambda j: False)}, 60, JobState.DISCARDED),
        (stuck(), WORKERS, -1, None),
        (stuck(), {"k": WorkerInfo(timeout=timedelta(hours=3))}, 60, None),
        (stuck(), {"k": WorkerInfo(timeout=timedelta(microseconds=-1))}, 60, None),
        (stuck(), WORKERS, 60, JobState.RETRYABLE),
        (stuck(attempt=25), WORKERS, 60, JobState.DISCARDED),
    ],
)
def test_rescue_decision(
    job: JobRow, workers: dict[str, WorkerInfo], timeout: int, expected: JobState | None
) -> None:
    update = rescue_decision(job, at(0), workers, timedelta(seconds=timeout), FixedPolicy(), FixedRng())
    if expected is None:
        assert update is None
        return
    assert update is not None and update.state is expected
    err = json.loads(update.error)
    assert err == {
        "at": "2025-01-01T12:00:00Z",
        "attempt": job.attempt,
        "error": "Stuck job rescued by JobRescuer",
        "trace": "",
    }
    assert update.metadata_updates == b"{}"  # the dialect increments river:rescue_count in SQL
    if expected is JobState.RETRYABLE:
        assert update.finalized_at is None and update.scheduled_at == at(100)
    else:
        assert update.finalized_at == at(0) and update.scheduled_at == at(-9000)


def test_rescue_decision_worker_next_retry_wins() -> None:
    update = rescue_decision(
        stuck(), at(0), {"k": WorkerInfo(next_retry=lambda j: at(42))}, timedelta(seconds=60),
        FixedPolicy(), FixedRng(),
    )
    assert update is not None and update.state is JobState.RETRYABLE and update.scheduled_at == at(42)


def test_rescue_decision_is_checked_against_the_states_table(monkeypatch: pytest.MonkeyPatch) -> None:
    from river_protocol.states import TRANSITIONS, Actor

    key = (JobState.RUNNING, Actor.RESCUER)
    monkeypatch.setitem(TRANSITIONS, key, TRANSITIONS[key] - {JobState.DISCARDED})
    kept = rescue_decision(stuck(), at(0), WORKERS, timedelta(seconds=60), FixedPolicy(), FixedRng())
    assert kept is not None and kept.state is JobState.RETRYABLE
    with pytest.raises(ProtocolError, match="illegal transition running -> discarded by rescuer"):
        rescue_decision(stuck(attempt=25), at(0), WORKERS, timedelta(seconds=60), FixedPolicy(), FixedRng())


def test_rescuer_pages_by_id_and_rescues() -> None:
    s = job_rescuer(FixedRng(0.0), WORKERS, FixedPolicy())
    s.breaker.open = True  # batch size 1000 keeps the page small in the test
    s.handle(Start(), at(0))
    intent = one(s.handle(Tick(), at(0)))
    assert intent == GetStuckJobs(stuck_horizon=at(-3600), limit=1000, after_id=0)
    page = [stuck(job_id=i) for i in range(1, 1001)]
    rescue = one(s.handle(IntentSucceeded(intent, page), at(0)))  # type: ignore[arg-type]
    assert isinstance(rescue, RescueJobs) and len(rescue.updates) == 1000
    out = s.handle(IntentSucceeded(rescue, None), at(0))
    assert out.intents == () and out.next_deadline == at(0.05)
    intent = one(s.handle(Tick(), at(0.05)))
    assert intent == GetStuckJobs(stuck_horizon=at(-3600), limit=1000, after_id=1000)
    out = s.handle(IntentSucceeded(intent, []), at(0.1))  # type: ignore[arg-type]
    assert out.runs[0].batches == 2 and out.next_deadline == at(30)


def test_rescue_after_for() -> None:
    assert rescue_after_for(None, None) == timedelta(hours=1)
    assert rescue_after_for(timedelta(minutes=5), None) == timedelta(hours=1, minutes=5)
    assert rescue_after_for(timedelta(minutes=5), timedelta(minutes=2)) == timedelta(minutes=2)
