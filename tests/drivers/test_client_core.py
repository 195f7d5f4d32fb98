"""The client's sans-IO pieces without a database: work outcomes, the Workers registry, ClientCore."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest

from river_protocol.args import arg_field
from river_protocol.client_core import (
    ClientConfig,
    ClientCore,
    EventKind,
    InsertManyParams,
    QueueConfig,
    default_client_id,
    event_kind_for,
    event_kind_for_completion,
    parse_event_kinds,
)
from river_protocol.constants import JOB_TIMEOUT_NONE
from river_protocol.errors import ValidationError
from river_protocol.job import JobRow
from river_protocol.machines.completer import CompletionReason
from river_protocol.machines.notifications import TOPIC_CONTROL, TOPIC_INSERT, build_cancel, build_pause
from river_protocol.machines.producer import ControlMessage, InsertNotification
from river_protocol.options import InsertOpts
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Interrupted, Snooze
from river_protocol.states import JobState
from river_protocol.unique import UniqueKeyRules, UniqueOpts
from river_protocol.work import (
    CancelCause,
    JobCancel,
    JobDiscard,
    JobSnooze,
    WorkCancelled,
    complete_in_tx_update,
    effective_timeout,
    error_text,
    finish_job,
    outcome_from_result,
    wants_error_handler,
)
from river_protocol.workers import Workers
from tests.drivers.test_client_support import Other, Task

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _row(**changes: object) -> JobRow:
    base = JobRow(id=7, kind="task", encoded_args=b'{"name":"n"}', state=JobState.RUNNING, attempt=1)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# ---------------------------------------------------------------- work.py


def test_outcome_from_result_maps_returns_and_exceptions() -> None:
    assert outcome_from_result("anything") == Completed()
    # A plain return (None) completes, whatever the token said (the work was done).
    assert outcome_from_result(None) == Completed()
    assert outcome_from_result(None, cancel_cause=CancelCause.STOP) == Completed()
    assert outcome_from_result(Snooze(timedelta(1))) == Snooze(timedelta(1))
    assert outcome_from_result(JobSnooze(timedelta(seconds=3))) == Snooze(timedelta(seconds=3))
    assert outcome_from_result(None, JobSnooze(timedelta(seconds=3))) == Snooze(timedelta(seconds=3))
    assert outcome_from_result(None, JobCancel("no")) == Cancel("no")
    assert outcome_from_result(None, JobCancel(None)).message == "JobCancelError: <nil>"  # type: ignore[union-attr]
    assert outcome_from_result(None, JobDiscard(ValueError("x"))) == Discard("ValueError: x")
    assert outcome_from_result(None, KeyError("k"), trace="tb") == Failed("KeyError: 'k'", "tb")


def test_token_exception_follows_its_cause() -> None:
    stop = WorkCancelled(CancelCause.STOP)
    assert outcome_from_result(None, stop, cancel_cause=CancelCause.STOP) == Interrupted()
    timed_out = outcome_from_result(None, WorkCancelled(CancelCause.TIMEOUT))
    assert timed_out == Failed("context deadline exceeded")
    try:
        try:
            raise WorkCancelled(CancelCause.STOP)
        except WorkCancelled as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert outcome_from_result(None, outer, cancel_cause=CancelCause.STOP) == Interrupted()
    # Unrelated errors keep their text even after a stop (Go: only context errors are interrupts).
    unrelated = outcome_from_result(None, ValueError("v"), cancel_cause=CancelCause.STOP)
    assert unrelated == Failed("ValueError: v")


def test_finish_job_reasons_and_remote_cancel() -> None:
    done = finish_job(_row(), Completed(), now=NOW, started_at=NOW)
    assert done.reason is CompletionReason.COMPLETED and done.update.state is JobState.COMPLETED
    remote = finish_job(_row(), Failed("context canceled"), now=NOW, started_at=NOW,
                        cancel_cause=CancelCause.REMOTE_CANCEL)
    assert remote.reason is CompletionReason.CANCELLED and remote.update.state is JobState.CANCELLED
    assert json.loads(remote.update.error or b"")["error"] == "JobCancelError: job cancelled remotely"
    interrupted = finish_job(_row(), Interrupted(), now=NOW, started_at=NOW, cancel_cause=CancelCause.STOP)
    assert (interrupted.update.state, interrupted.update.attempt) == (JobState.AVAILABLE, 0)
    with pytest.raises(ValidationError):
        finish_job(_row(), Interrupted(), now=NOW, started_at=NOW)
    retry = finish_job(_row(), Failed("e"), now=NOW, started_at=NOW, rand=0.5)
    assert retry.reason is CompletionReason.FAILED and retry.update.state is JobState.AVAILABLE


def test_small_helpers() -> None:
    assert error_text(ValueError()) == "ValueError" and error_text("x") == "x" and error_text(None) is None
    assert wants_error_handler(Failed("e"), None)
    assert not wants_error_handler(Failed("e"), CancelCause.REMOTE_CANCEL)
    assert not wants_error_handler(Cancel("c"), None)
    assert effective_timeout(None, timedelta(seconds=60)) == timedelta(seconds=60)
    assert effective_timeout(timedelta(seconds=2), timedelta(seconds=60)) == timedelta(seconds=2)
    assert effective_timeout(None, timedelta(microseconds=-1)) is None
    update = complete_in_tx_update(_row(), NOW, {"output": 1})
    assert update.state is JobState.COMPLETED and update.metadata_do_merge
    assert update.metadata_updates == b'{"output":1}'
    with pytest.raises(ValidationError):
        JobSnooze(5)  # type: ignore[arg-type]


# ---------------------------------------------------------------- workers.py


def test_workers_registry() -> None:
    workers = Workers()

    @workers.job(Task, timeout=timedelta(seconds=3))
    def one(args: Task) -> str:
        return args.name

    class OtherWorker:
        args_type = Other

        def work(self, ctx: object, args: Other) -> int:
            return args.n

        def next_retry(self, job: JobRow) -> datetime:
            return NOW

    workers.add(OtherWorker())
    assert workers.kinds == {"task", "other"} and len(workers) == 2 and "task" in workers
    task = workers.get("task")
    assert task is not None and not task.takes_context
    assert task.call(None, task.decode(_row())) == "n" and task.timeout(_row()) == timedelta(seconds=3)
    other = workers.get("other")
    assert other is not None and other.takes_context and other.next_retry(_row()) == NOW
    with pytest.raises(ValidationError, match="already registered"):
        workers.job(Task)(one)
    with pytest.raises(ValidationError, match="takes 3"):
        Workers().job(Task)(lambda a, b, c: None)

    @dataclasses.dataclass
    class Bad:
        kind: ClassVar[str] = "x"

    with pytest.raises(ValidationError):
        Workers().job(Bad)(one)


# ---------------------------------------------------------------- client_core.py


def _core(dialect: str = "postgres", **kwargs: object) -> ClientCore:
    workers = Workers()
    workers.job(Task)(lambda args: None)
    config = ClientConfig(client_id="c1", dialect=dialect, queues={"default": QueueConfig(max_workers=2)},
                          **kwargs)  # type: ignore[arg-type]
    return ClientCore(config, workers, random.Random(1))


@dataclasses.dataclass
class Dotted:
    kind: ClassVar[str] = "dotted"
    value: int = arg_field(json="a.b", default=1)


def test_plan_insert_builds_unique_keys_under_the_configured_rules() -> None:
    unique = [InsertManyParams(Dotted(), InsertOpts(unique_opts=UniqueOpts(by_args=True)))]
    with pytest.raises(ValidationError, match="unknown unique key rules"):
        _core("sqlite", unique_key_rules="v1")
    v043 = _core("sqlite", skip_unknown_job_check=True).plan_insert(unique, NOW).insert.jobs[0]
    core = _core("sqlite", skip_unknown_job_check=True, unique_key_rules=UniqueKeyRules.LATEST)
    latest = core.plan_insert(unique, NOW).insert.jobs[0]
    # v0.43 reads the name as a path that finds nothing, leaving invalid JSON; newer River doesn't.
    assert v043.unique_key == hashlib.sha256(b'&kind=dotted&args={"a":{"b":}}').digest()
    assert latest.unique_key == hashlib.sha256(b'&kind=dotted&args={"a.b":1}').digest()


def test_plan_insert_throttles_notifications_and_draws_a_nonce() -> None:
    core = _core("sqlite")
    plan = core.plan_insert([Task("a"), InsertManyParams(Task("b"), InsertOpts(queue="q2"))], NOW)
    assert [p.queue for p in plan.insert.jobs] == ["default", "q2"]
    assert len(plan.insert.nonce) == 16 and plan.available_queues == ("default", "q2")
    assert plan.notify is not None and plan.notify.topic == TOPIC_INSERT and len(plan.notify.payloads) == 2
    again = core.plan_insert([Task("c")], NOW + timedelta(milliseconds=1))
    assert again.notify is None and again.intents == (again.insert,)
    later = InsertOpts(scheduled_at=NOW + timedelta(hours=1))
    scheduled = core.plan_insert([InsertManyParams(Task("d"), later)], NOW + timedelta(seconds=1))
    assert scheduled.available_queues == () and scheduled.notify is None
    assert _core().plan_insert([Task("x")], NOW).insert.nonce == ""
    with pytest.raises(ValidationError, match="no jobs"):
        core.plan_insert([], NOW)
    with pytest.raises(ValidationError, match="not registered"):
        core.plan_insert([Other(1)], NOW)


def test_route_notification() -> None:
    core = _core()
    assert core.route_notification(TOPIC_INSERT, '{"queue":"default"}') == (
        ("default", InsertNotification("default")),)
    assert core.route_notification(TOPIC_INSERT, '{"queue":"elsewhere"}') == ()
    assert core.route_notification(TOPIC_INSERT, "not json") == ()
    (route,) = core.route_notification(TOPIC_CONTROL, build_pause("*"))
    assert route[0] == "default" and isinstance(route[1], ControlMessage)
    assert len(core.route_notification(TOPIC_CONTROL, build_cancel(5, "default"))) == 1


def test_route_own_control_gives_each_producer_its_own_ack() -> None:
    config = ClientConfig(client_id="c1", dialect="sqlite",
                          queues={"a": QueueConfig(max_workers=2), "b": QueueConfig(max_workers=2)})
    workers = Workers()
    workers.job(Task)(lambda args: None)
    core = ClientCore(config, workers, random.Random(1))
    made: list[object] = []

    def new_ack() -> object:
        made.append(object())
        return made[-1]

    routes = core.route_own_control(build_pause("*"), new_ack)
    assert [q for q, _ in routes] == ["a", "b"]
    assert [m.ack for _, m in routes] == made and made[0] is not made[1]
    assert all(m.payload.action == "pause" for _, m in routes)
    assert [q for q, _ in core.route_own_control(build_pause("b"), new_ack)] == ["b"]
    assert core.route_own_control("not json", new_ack) == () and len(made) == 3


def test_plan_job_and_finish() -> None:
    core = _core()
    plan = core.plan_job(_row())
    assert plan.immediate is None and plan.args == Task("n") and plan.timeout == timedelta(seconds=60)
    unknown = core.plan_job(_row(kind="mystery"))
    assert isinstance(unknown.immediate, Failed) and "mystery" in unknown.immediate.error
    undecodable = core.plan_job(_row(encoded_args=b'{"name": 5}'))
    assert isinstance(undecodable.immediate, Failed) and not undecodable.args_decoded
    poison = core.plan_job(_row(metadata={}, undecodable="metadata: not an object"))
    assert poison.immediate == Failed("job row couldn't be decoded: metadata: not an object")
    assert not poison.args_decoded and poison.args is None
    finish = core.finish_job(plan, Failed("x"), now=NOW, started_at=NOW)
    assert finish.update.state in (JobState.AVAILABLE, JobState.RETRYABLE)
    assert core.stuck_after(timedelta(seconds=1)) == timedelta(seconds=11)
    assert set(core.make_producers()) == {"default"} and core.make_completer() is not None


def test_finish_submit_is_finish_job_as_a_submit() -> None:
    """The completer request a client hands on is finish_job's, for every kind of outcome, with
    the run as its context and one rng draw per run, the plain success's shortcut included."""
    cases = [
        (Completed(), {}, None),
        (Completed(), {"output": 1}, None),
        (Failed("x", "trace"), {}, None),
        (Failed("context canceled"), {}, CancelCause.REMOTE_CANCEL),
        (Snooze(timedelta(seconds=3)), {}, None),
        (Cancel("stop"), {}, None),
        (Discard("bad"), {}, None),
        (Interrupted(), {}, CancelCause.STOP),
    ]
    for outcome, metadata, cause in cases:
        for job in (_row(), _row(undecodable="metadata: not an object", metadata={})):
            one, other = _core(), _core()
            plan = one.plan_job(job)
            context = object()
            submit = one.finish_submit(plan, outcome, now=NOW, started_at=NOW, cancel_cause=cause,
                                       metadata_updates=metadata, context=context)
            finish = other.finish_job(other.plan_job(job), outcome, now=NOW, started_at=NOW,
                                      cancel_cause=cause, metadata_updates=metadata)
            assert (submit.update, submit.reason) == (finish.update, finish.reason), outcome
            assert submit.context is context
            assert one._rng.random() == other._rng.random()  # the same draws so far
    core = _core()
    plan = core.plan_job(_row())
    with pytest.raises(ValidationError):
        core.finish_submit(plan, Interrupted(), now=NOW, started_at=NOW)


def test_plan_job_timeout_follows_the_config_it_is_planned_under() -> None:
    core = _core(job_timeout=timedelta(seconds=5))
    assert core.plan_job(_row()).timeout == timedelta(seconds=5)
    assert core.plan_job(_row()).timeout == timedelta(seconds=5)  # the remembered value
    core.config = dataclasses.replace(core.config, job_timeout=timedelta(seconds=9))
    assert core.plan_job(_row()).timeout == timedelta(seconds=9)
    core.config = dataclasses.replace(core.config, job_timeout=JOB_TIMEOUT_NONE)
    assert core.plan_job(_row()).timeout is None
    core.reconfigure(queues={"default": QueueConfig(max_workers=3)})
    assert core.plan_job(_row()).timeout is None


def test_config_validation_and_ids() -> None:
    with pytest.raises(ValidationError):
        ClientConfig(client_id="", dialect="postgres")
    with pytest.raises(ValidationError):
        ClientConfig(client_id="c", dialect="mysql")
    with pytest.raises(ValidationError):
        ClientConfig(client_id="c", dialect="sqlite", queues={"Bad Name": QueueConfig()})
    with pytest.raises(ValidationError, match="needs workers"):
        ClientCore(ClientConfig(client_id="c", dialect="sqlite", queues={"q": QueueConfig()}), None,
                   random.Random())
    stamp = datetime(2026, 8, 5, 12, 0, 0, 123456, tzinfo=UTC)
    assert default_client_id("web-1.example.com", stamp) == "web-1_example_com_2026_08_05T12_00_00_123456"
    assert default_client_id("", stamp).startswith("unknown_host_")
    assert parse_event_kinds(None) == frozenset(EventKind)
    assert parse_event_kinds(["job_failed"]) == {EventKind.JOB_FAILED}
    with pytest.raises(ValidationError, match="unknown event kind"):
        parse_event_kinds(["nope"])


def test_producers_follow_live_queues_and_reconfigure_before_start() -> None:
    from river_protocol.claim_filters import TagFilter
    from river_protocol.client_core import QueueConfig

    core = _core()
    core.add_queue("mail", QueueConfig(max_workers=3))
    core.remove_queue("default")
    assert set(core.make_producers()) == {"mail"}  # a removed queue is not worked
    core.reconfigure(queues={"gpu": QueueConfig(max_workers=2)}, tag_filter=TagFilter(("gpu",)))
    producers = core.make_producers()
    assert set(producers) == {"gpu"}
    assert producers["gpu"].config.max_workers == 2
    assert core.config.tag_filter == TagFilter(("gpu",))
    with pytest.raises(ValidationError, match="queue"):
        core.reconfigure(queues={"Bad Name": QueueConfig()})


@pytest.mark.parametrize(("reason", "persisted", "kind"), [
    # River 0.44.0: the row's unambiguous state wins over the requested transition.
    (CompletionReason.FAILED, JobState.COMPLETED, EventKind.JOB_COMPLETED),
    (CompletionReason.FAILED, JobState.CANCELLED, EventKind.JOB_CANCELLED),
    (CompletionReason.SNOOZED, JobState.CANCELLED, EventKind.JOB_CANCELLED),
    (CompletionReason.INTERRUPTED, JobState.COMPLETED, EventKind.JOB_COMPLETED),
    # Otherwise the reason decides.
    (CompletionReason.FAILED, JobState.RETRYABLE, EventKind.JOB_FAILED),
    (CompletionReason.FAILED, JobState.AVAILABLE, EventKind.JOB_FAILED),
    (CompletionReason.FAILED, JobState.DISCARDED, EventKind.JOB_FAILED),
    (CompletionReason.SNOOZED, JobState.SCHEDULED, EventKind.JOB_SNOOZED),
    (CompletionReason.SNOOZED, JobState.AVAILABLE, EventKind.JOB_SNOOZED),
    (CompletionReason.INTERRUPTED, JobState.AVAILABLE, EventKind.JOB_INTERRUPTED),
    (CompletionReason.COMPLETED, JobState.COMPLETED, EventKind.JOB_COMPLETED),
])
def test_event_kind_follows_the_persisted_outcome(
    reason: CompletionReason, persisted: JobState, kind: EventKind
) -> None:
    assert event_kind_for(reason, persisted) is kind


@pytest.mark.parametrize(("persisted", "stored", "kind"), [
    (CompletionReason.COMPLETED, JobState.COMPLETED, EventKind.JOB_COMPLETED),
    (CompletionReason.SNOOZED, JobState.SCHEDULED, EventKind.JOB_SNOOZED),
    # Not recorded: a row finalized elsewhere meanwhile is announced by its state...
    (None, JobState.DISCARDED, EventKind.JOB_FAILED),
    (None, JobState.COMPLETED, EventKind.JOB_COMPLETED),
    (None, JobState.CANCELLED, EventKind.JOB_CANCELLED),
    # ... and one moved back to a waiting state (rescued, retried) by nothing.
    (None, JobState.RETRYABLE, None),
    (None, JobState.AVAILABLE, None),
    (None, JobState.SCHEDULED, None),
])
def test_event_kind_for_completion(
    persisted: CompletionReason | None, stored: JobState, kind: EventKind | None
) -> None:
    assert event_kind_for_completion(persisted, stored) is kind
