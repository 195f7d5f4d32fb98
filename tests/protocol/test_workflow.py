"""Workflows' pure core: the builder and its validation, insert items, the promotion rule,
the promotion plan, the completer's promoter machine and the sweeper's sweep."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from river_protocol.client_core import ClientConfig, ClientCore
from river_protocol.dialects.workflow_plans import (
    dep_counts,
    one_statement,
    pending_task,
    promotion_plan,
    targets,
)
from river_protocol.errors import JobNotFoundError, ValidationError
from river_protocol.intents import Notify, PromoteWorkflowTasks, PromotionResult, Statement
from river_protocol.job import AttemptError, JobRow
from river_protocol.machines.base import IntentFailed, IntentSucceeded, Stop
from river_protocol.machines.maintenance import WorkflowPromoterJob
from river_protocol.machines.throttle import InsertNotifyThrottle
from river_protocol.machines.workflow_promoter import (
    PromoterState,
    TasksFinalized,
    WorkflowPromoter,
    finalized_tasks,
)
from river_protocol.metadata_keys import OUTPUT
from river_protocol.options import InsertOpts
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts
from river_protocol.workflow import (
    DEPS,
    IGNORE_CANCELLED_DEPS,
    TASK,
    WORKFLOW_ID,
    WORKFLOW_NAME,
    Backoff,
    CancelDependent,
    PendingTask,
    Promote,
    TaskRef,
    WaitTimeoutError,
    Workflow,
    WorkflowInsertResult,
    WorkflowSummary,
    WorkflowTaskFailedError,
    completed_outputs,
    decide,
    list_workflows_intent,
    task_info,
    task_output,
    tasks_by_name,
    topological_order,
    validate_workflow_id,
    wait_outcome,
    workflow_items,
    workflow_wait_outcome,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclasses.dataclass
class Args:
    kind: ClassVar[str] = "wf_args"
    n: int = 0


# ---------------------------------------------------------------- builder


def test_add_returns_refs_and_refuses_duplicates_and_foreign_refs() -> None:
    wf = Workflow(name="w")
    a = wf.add("a", Args(1))
    assert a == TaskRef("a")
    with pytest.raises(ValidationError, match="already has a task named 'a'"):
        wf.add("a", Args(2))
    other = Workflow(name="other").add("x", Args())
    with pytest.raises(ValidationError, match="belongs to another workflow"):
        wf.add("b", Args(), deps=[other])
    with pytest.raises(ValidationError, match="cannot depend on itself"):
        wf.add("c", Args(), deps=["c"])
    with pytest.raises(ValidationError, match="non-empty string"):
        wf.add("", Args())
    with pytest.raises(ValidationError, match="pending=True"):
        wf.add("d", Args(), opts=InsertOpts(pending=True))
    with pytest.raises(ValidationError, match="unique options are not accepted"):
        wf.add("u", Args(), opts=InsertOpts(unique_opts=UniqueOpts(by_args=True)))
    with pytest.raises(ValidationError, match="a TaskRef or a task name"):
        wf.add("e", Args(), deps=[3])  # type: ignore[list-item]
    assert [t.name for t in wf.tasks] == ["a"] and len(wf) == 1


def test_validate_finds_unknown_deps_cycles_and_empty_workflows() -> None:
    with pytest.raises(ValidationError, match="no tasks"):
        Workflow(name="empty").validate()
    wf = Workflow()
    wf.add("a", Args(), deps=["missing"])
    with pytest.raises(ValidationError, match="unknown task 'missing'"):
        wf.validate()
    cyc = Workflow()
    cyc.add("a", Args(), deps=["c"])
    cyc.add("b", Args(), deps=["a"])
    cyc.add("c", Args(), deps=["b"])
    cyc.add("free", Args())
    with pytest.raises(ValidationError, match=r"cycle among tasks \['a', 'b', 'c'\]"):
        cyc.validate()


def test_order_puts_deps_first_and_keeps_add_order() -> None:
    wf = Workflow()
    wf.add("late", Args(), deps=["early", "mid"])  # forward references by name
    wf.add("early", Args())
    wf.add("mid", Args(), deps="early")
    assert [t.name for t in wf.validate()] == ["early", "mid", "late"]
    assert [t.name for t in topological_order({t.name: t for t in wf.tasks})] == ["early", "mid", "late"]


def test_existing_names_count_as_deps_of_a_growing_workflow() -> None:
    grow = Workflow(name="w", id="wid", existing={"root"})
    grow.add("part", Args(), deps=["root"])
    with pytest.raises(ValidationError, match="already has a task named 'root'"):
        grow.add("root", Args())
    (item,) = workflow_items(grow, "wid")
    assert item.opts.pending and item.opts.metadata == {
        WORKFLOW_ID: "wid", TASK: "part", WORKFLOW_NAME: "w", DEPS: ["root"]}


def test_items_carry_our_metadata_keys_and_the_task_options() -> None:
    wf = Workflow(name="album")
    thumbs = [wf.add(f"t{i}", Args(i)) for i in range(2)]
    wf.add("album", Args(), deps=thumbs, opts=InsertOpts(queue="q", priority=2, tags=("x_y",),
                                                        metadata={"mine": 1}),
           ignore_cancelled_deps=True)
    items = {i.task: i for i in workflow_items(wf, "w-1")}
    assert not items["t0"].opts.pending and items["album"].opts.pending
    meta = items["album"].opts.metadata
    assert meta == {"mine": 1, WORKFLOW_ID: "w-1", TASK: "album", WORKFLOW_NAME: "album",
                    DEPS: ["t0", "t1"], IGNORE_CANCELLED_DEPS: True}
    assert (items["album"].opts.queue, items["album"].opts.priority) == ("q", 2)
    assert all(not k.startswith("river:") and k not in ("workflow_id", "task", "deps") for k in meta)


def test_user_metadata_may_not_use_our_prefix() -> None:
    wf = Workflow()
    wf.add("a", Args(), opts=InsertOpts(metadata=b'{"river_py:task": "spoof"}'))
    with pytest.raises(ValidationError, match="reserved for workflows"):
        workflow_items(wf, "w")


def test_workflow_ids_are_checked() -> None:
    assert validate_workflow_id("2026_abc-1:x.y") == "2026_abc-1:x.y"
    for bad in ("", "a b", "x" * 101, 5):
        with pytest.raises(ValidationError, match="workflow id"):
            validate_workflow_id(bad)
    with pytest.raises(ValidationError):
        Workflow(id="no spaces")
    with pytest.raises(ValidationError, match="workflow name must be a string"):
        Workflow(name=3)  # type: ignore[arg-type]


def test_client_core_plans_one_insert_with_pending_dependents() -> None:
    core = ClientCore(ClientConfig(client_id="c", dialect="sqlite"), None, random.Random(7))
    wf = Workflow(name="w")
    wf.add("b", Args(), deps=["a"])
    wf.add("a", Args())
    workflow_id, tasks, plan = core.plan_workflow(wf, T0)
    assert workflow_id.startswith("20260101T000000_") and len(workflow_id) == 32
    assert tasks == ("a", "b")
    assert [j.state for j in plan.insert.jobs] == [JobState.AVAILABLE, JobState.PENDING]
    assert plan.available_queues == ("default",)
    fixed = Workflow(name="w", id="mine")
    fixed.add("only", Args())
    assert core.plan_workflow(fixed, T0)[0] == "mine"
    with pytest.raises(ValidationError, match="takes a Workflow"):
        core.plan_workflow("nope", T0)  # type: ignore[arg-type]


def test_task_info_reads_metadata_and_ignores_others() -> None:
    info = task_info({WORKFLOW_ID: "w", TASK: "t", DEPS: ["a"], IGNORE_CANCELLED_DEPS: True})
    assert info is not None and info.deps == ("a",) and info.ignore_cancelled_deps
    assert not info.ignore_discarded_deps
    assert task_info({"workflow_id": "w", "task": "t"}) is None  # River Pro's keys are not ours
    assert task_info({WORKFLOW_ID: "w", TASK: "t", DEPS: "bad"}).deps == ()  # type: ignore[union-attr]


# ---------------------------------------------------------------- the rule


def pending(deps: dict[str, JobState | None], **flags: Any) -> PendingTask:
    states = {k: v for k, v in deps.items() if v is not None}
    return PendingTask.from_states(1, "w", "t", list(deps), states, **flags)


C, X, D, R = JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED, JobState.RUNNING


@pytest.mark.parametrize(("deps", "flags", "expected"), [
    ({"a": C, "b": C}, {}, Promote(1)),
    ({"a": C, "b": R}, {}, None),
    ({"a": C, "b": None}, {}, None),  # no row (yet): wait
    ({"a": D, "b": R}, {}, "'a' was discarded"),  # cancelled at once, not after b
    ({"a": X, "b": C}, {}, "'a' was cancelled"),
    ({"a": X, "b": C}, {"ignore_cancelled_deps": True}, Promote(1)),
    ({"a": D, "b": C}, {"ignore_cancelled_deps": True}, "'a' was discarded"),
    ({"a": D, "b": R}, {"ignore_discarded_deps": True}, None),
    ({"a": D, "b": X}, {"ignore_discarded_deps": True, "ignore_cancelled_deps": True}, Promote(1)),
])
def test_decide(deps: dict[str, Any], flags: dict[str, bool], expected: Any) -> None:
    decision = decide(pending(deps, **flags))
    if isinstance(expected, str):
        assert isinstance(decision, CancelDependent) and expected in decision.reason
        assert decision.reason.startswith("workflow dependency")
    else:
        assert decision == expected


def test_wait_outcomes() -> None:
    done = JobRow(id=1, kind="k", encoded_args=b"{}", state=JobState.COMPLETED)
    assert wait_outcome(done) is done
    assert wait_outcome(dataclasses.replace(done, state=JobState.RUNNING)) is None
    failed = dataclasses.replace(done, state=JobState.DISCARDED, errors=(AttemptError(T0, 1, "boom"),))
    error = wait_outcome(failed)
    assert isinstance(error, WorkflowTaskFailedError) and error.job is failed
    assert "was discarded: boom" in str(error)
    tasks = [dataclasses.replace(done, id=i, metadata={WORKFLOW_ID: "w", TASK: f"t{i}"}) for i in range(3)]
    assert workflow_wait_outcome(tasks) == tuple(tasks)
    assert workflow_wait_outcome([]) is None
    # A wait naming a workflow that has no rows at all is told so (the clients raise it).
    missing = workflow_wait_outcome([], "wf-missing")
    assert isinstance(missing, JobNotFoundError) and "wf-missing" in str(missing)
    assert workflow_wait_outcome([*tasks, dataclasses.replace(done, state=JobState.PENDING)]) is None
    mixed = workflow_wait_outcome([*tasks[:2], dataclasses.replace(tasks[2], state=JobState.CANCELLED)])
    assert isinstance(mixed, WorkflowTaskFailedError) and "'t2' cancelled" in str(mixed)
    assert issubclass(WaitTimeoutError, TimeoutError)


def test_a_task_reads_its_workflows_outputs() -> None:
    def row(id: int, task: str | None, state: JobState, **meta: Any) -> JobRow:
        workflow = {WORKFLOW_ID: "w", TASK: task} if task is not None else {}
        return JobRow(id=id, kind="k", encoded_args=b"{}", state=state, metadata={**workflow, **meta})

    rows = [
        row(1, "a", JobState.COMPLETED, **{OUTPUT: {"n": 1}}),
        row(2, "b", JobState.COMPLETED),  # recorded no output
        row(3, "c", JobState.CANCELLED),
        row(4, "d", JobState.RUNNING),
        row(5, None, JobState.COMPLETED),  # not a task: left out
    ]
    tasks = tasks_by_name(rows)
    assert list(tasks) == ["a", "b", "c", "d"] and tasks["c"] is rows[2]
    assert task_output("w", "a", tasks) == {"n": 1}
    assert task_output("w", "b", tasks) is None
    with pytest.raises(JobNotFoundError, match="workflow w has no task 'x'"):
        task_output("w", "x", tasks)
    with pytest.raises(WorkflowTaskFailedError, match="was cancelled"):
        task_output("w", "c", tasks)
    with pytest.raises(ValidationError, match="task 'd' has not completed \\(it is running\\)"):
        task_output("w", "d", tasks)
    # A fan-in's inputs: only the deps that completed, in the order asked, missing ones left out.
    assert completed_outputs(("b", "c", "a", "d", "x"), tasks) == {"b": None, "a": {"n": 1}}
    assert list(completed_outputs(("b", "a"), tasks)) == ["b", "a"]


def test_backoff_is_bounded() -> None:
    b = Backoff(first=0.01, cap=0.05)
    assert [b.next() for _ in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    b.reset()
    assert b.next() == 0.01


def test_summary_state_and_insert_result() -> None:
    running = WorkflowSummary("w", "n", {JobState.COMPLETED: 2, JobState.PENDING: 1})
    assert running.state == "running" and running.total == 3
    assert WorkflowSummary("w", "n", {JobState.COMPLETED: 2, JobState.CANCELLED: 1}).state == "failed"
    assert WorkflowSummary("w", "n", {JobState.COMPLETED: 2}).state == "completed"
    result = WorkflowInsertResult("w", "n", {})
    with pytest.raises(ValidationError, match="no task 'x'"):
        result.job("x")


# ---------------------------------------------------------------- the plan (SQL stubbed by markers)


def _marker(kind: str, *params: Any) -> Statement:
    return Statement(kind, params)


def test_promotion_plan_promotes_cancels_and_follows_the_cascade() -> None:
    intent = PromoteWorkflowTasks(now=T0, workflow_ids=("w",))
    plan = promotion_plan(intent,
                          lambda scope: one_statement(_marker("select", scope)),
                          lambda ids: _marker("promote", ids), lambda downs: _marker("cancel", downs))
    first = next(plan)
    assert first.sql == "select" and first.params == (intent,)
    row = ("w", "t", 0, '["a"]', False, False)
    step = plan.send([(5, *row, 1, "[]", "[]"), (6, "w", "u", 0, '["b"]', False, False, 0, "[]", '["b"]')])
    assert step.sql == "promote" and step.params == ([5],)
    step = plan.send([(5, "q1")])
    assert step.sql == "cancel" and [c.id for c in step.params[0]] == [6]
    step = plan.send([(6, "w", "u")])
    (cascade,) = step.params  # the cascade's read: the dependents of what it cancelled
    assert step.sql == "select" and cascade.finished == (("w", "u"),) and cascade.limit == 10_000
    with pytest.raises(StopIteration) as done:
        plan.send([])
    assert done.value.value == PromotionResult(2, 6, ((5, "q1"),), ((6, "w"),))


def test_pending_task_reads_a_row_leniently() -> None:
    task = pending_task((1, "w", "t", 2, '["a", 3]', 1, 0, None, None, "{}"))
    assert task.deps == ("a",) and task.attempt == 2 and task.completed == 0
    assert task.ignore_cancelled_deps and not task.discarded


# ---------------------------------------------------------------- machines


def test_finalized_tasks_picks_final_workflow_rows() -> None:
    def job(i: int, state: JobState, wid: str | None) -> JobRow:
        meta = {WORKFLOW_ID: wid, TASK: f"t{i}"} if wid else {}
        return JobRow(id=i, kind="k", encoded_args=b"{}", state=state, metadata=meta)

    rows = [job(1, JobState.COMPLETED, "a"), job(2, JobState.RETRYABLE, "b"), job(3, JobState.DISCARDED, "c"),
            job(4, JobState.COMPLETED, None), job(5, JobState.CANCELLED, "a"),
            job(1, JobState.COMPLETED, "a")]
    assert finalized_tasks(rows) == (("a", "t1"), ("c", "t3"), ("a", "t5"))


def test_targets_names_the_intents_candidates() -> None:
    row = (1, "w", "t", 0, '["a", "b"]', False, False)
    assert targets(PromoteWorkflowTasks(now=T0), row)
    assert targets(PromoteWorkflowTasks(now=T0, workflow_ids=("w",)), row)
    assert targets(PromoteWorkflowTasks(now=T0, finished=(("w", "b"),)), row)
    assert not targets(PromoteWorkflowTasks(now=T0, finished=(("w", "c"), ("x", "a"))), row)
    assert not targets(PromoteWorkflowTasks(now=T0, workflow_ids=("x",)), row)


def test_promoter_runs_one_promotion_at_a_time_and_batches_the_rest() -> None:
    m = WorkflowPromoter(timedelta(milliseconds=100))
    out = m.handle(TasksFinalized(tasks=(("a", "x"),)), T0)
    (first,) = out.intents
    assert isinstance(first, PromoteWorkflowTasks) and first.finished == (("a", "x"),)
    assert first.workflow_ids is None and m.state is PromoterState.BUSY
    assert m.handle(TasksFinalized(workflow_ids=("b",)), T0).intents == ()
    assert m.handle(TasksFinalized(tasks=(("c", "y"),), workflow_ids=("b",)), T0).intents == ()
    out = m.handle(IntentSucceeded(first, PromotionResult(1, 1, ((1, "q"),), ())), T0)
    notify, second = out.intents
    assert isinstance(notify, Notify) and out.promoted_queues == ("q",)
    assert isinstance(second, PromoteWorkflowTasks) and second.workflow_ids == ("b",)
    assert second.finished == (("c", "y"),)
    out = m.handle(IntentFailed(second, RuntimeError("down")), T0)
    assert out.intents == () and isinstance(out.error, RuntimeError) and m.state is PromoterState.IDLE
    assert m.handle(IntentSucceeded(notify), T0).intents == ()
    m.handle(Stop(), T0)
    assert m.handle(TasksFinalized(tasks=(("d", "z"),)), T0).intents == ()
    assert m.state is PromoterState.STOPPED


def test_sweep_pages_through_pending_tasks() -> None:
    job = WorkflowPromoterJob(InsertNotifyThrottle(timedelta(seconds=1)))
    job.begin(T0)
    first = job.first(T0, 2)
    assert isinstance(first, PromoteWorkflowTasks) and first.workflow_ids is None and first.after_id == 0
    step = job.on_result(first, PromotionResult(2, 9, ((9, "q"),)), T0, 2)
    assert step.full and isinstance(step.side[0], Notify)
    nxt = job.first(T0, 2)
    assert isinstance(nxt, PromoteWorkflowTasks) and nxt.after_id == 9
    assert not job.on_result(nxt, PromotionResult(1, 12), T0, 2).full
    later = T0 + timedelta(seconds=1)
    job.begin(later)  # between full sweeps: only workflows with an end since the last run began
    between = job.first(later, 2)
    assert isinstance(between, PromoteWorkflowTasks) and between.after_id == 0
    assert between.finished_since == T0 - WorkflowPromoterJob.SINCE_MARGIN and not between.sweep
    full = T0 + WorkflowPromoterJob.FULL_SWEEP_EVERY
    job.begin(full)
    again = job.first(full, 2)
    assert isinstance(again, PromoteWorkflowTasks) and again.sweep


def test_core_makes_the_completers_promoter_and_keeps_the_sweep_out_of_the_leaders_services() -> None:
    """The sweep is the workflow sweeper's (tests/protocol/test_workflow_sweeper.py), run
    whoever leads River: none of River's leader services."""
    core = ClientCore(ClientConfig(client_id="c", dialect="postgres"), None, random.Random(1))
    assert "workflow_promoter" not in core.make_maintenance_services()
    assert isinstance(core.make_workflow_promoter(), WorkflowPromoter)


def test_dep_counts_count_final_states_as_postgres_does() -> None:
    candidate = (7, "w", "t", 1, '["a", "b", "c", "a"]', False, True)
    states = {("w", "a"): {"completed"}, ("w", "b"): {"discarded"}, ("other", "c"): {"completed"}}
    row = dep_counts(candidate, states)
    assert row == (7, "w", "t", 1, '["a", "b", "c", "a"]', False, True, 1, "[]", '["b"]')
    task = pending_task(row)
    assert (task.completed, task.discarded, task.ignore_discarded_deps) == (1, ("b",), True)
    assert decide(task) is None  # c has no final row in w: wait


def test_finished_payloads_round_trip_and_stay_under_postgres_limit() -> None:
    from river_protocol.machines.notifications import PAYLOAD_LIMIT_BYTES, build_finished, parse_finished

    assert build_finished(("a", "b", "a")) == ('["a","b"]',)
    many = tuple(f"20260101T000000_{i:016x}" for i in range(1000))
    payloads = build_finished(many)
    assert len(payloads) > 1 and all(len(p.encode()) <= PAYLOAD_LIMIT_BYTES for p in payloads)
    assert tuple(w for p in payloads for w in parse_finished(p)) == many
    assert parse_finished("not json") == () and parse_finished('{"a": 1}') == ()
    assert parse_finished('["a", 3]') == ("a",)


def test_an_announcing_promoter_names_the_workflows_after_each_promotion() -> None:
    from river_protocol.machines.notifications import TOPIC_FINISHED

    m = WorkflowPromoter(timedelta(milliseconds=100), announce=True)
    (first,) = m.handle(TasksFinalized(tasks=(("a", "x"),), workflow_ids=("b",)), T0).intents
    out = m.handle(IntentFailed(first, RuntimeError("down")), T0)
    (announce,) = out.intents
    assert isinstance(announce, Notify) and announce.topic == TOPIC_FINISHED
    assert announce.payloads == ('["b","a"]',)
    core = ClientCore(ClientConfig(client_id="c", dialect="sqlite"), None, random.Random(1))
    assert not core.make_workflow_promoter()._announce
    pg = ClientCore(ClientConfig(client_id="c", dialect="postgres"), None, random.Random(1))
    assert pg.make_workflow_promoter()._announce


def test_a_promotion_that_moved_nothing_holds_the_next_back() -> None:
    from river_protocol.machines.base import Tick
    from river_protocol.machines.workflow_promoter import FIRST_HOLD, MAX_HOLD

    m = WorkflowPromoter(timedelta(milliseconds=100))
    (first,) = m.handle(TasksFinalized(tasks=(("w", "p1"),)), T0).intents
    m.handle(TasksFinalized(tasks=(("w", "p2"),)), T0)
    out = m.handle(IntentSucceeded(first, PromotionResult(1, 9)), T0)  # looked at the fan-in, moved nothing
    assert out.intents == () and out.next_deadline == T0 + FIRST_HOLD and m.state is PromoterState.IDLE
    assert m.handle(TasksFinalized(tasks=(("w", "p3"),)), T0).intents == ()  # still held
    (second,) = m.handle(Tick(), T0 + FIRST_HOLD).intents
    assert isinstance(second, PromoteWorkflowTasks) and second.finished == (("w", "p2"), ("w", "p3"))
    out = m.handle(IntentSucceeded(second, PromotionResult(1, 9)), T0)
    assert out.next_deadline == T0 + 2 * FIRST_HOLD  # doubles
    at = T0
    for _ in range(10):
        at += MAX_HOLD  # the hold is over: the next end goes at once
        (nxt,) = m.handle(TasksFinalized(tasks=(("w", "p4"),)), at).intents
        out = m.handle(IntentSucceeded(nxt, PromotionResult(1, 9)), at)
    assert out.next_deadline == at + MAX_HOLD  # capped
    later = T0 + timedelta(seconds=2)
    (moving,) = m.handle(TasksFinalized(tasks=(("w", "p5"),)), later).intents
    m.handle(IntentSucceeded(moving, PromotionResult(1, 9, ((9, "q"),))), later)  # moved one: released
    (free,) = m.handle(TasksFinalized(tasks=(("w", "p6"),)), later).intents
    m.handle(IntentSucceeded(free, PromotionResult(0, 0)), later)  # looked at nothing: no hold
    assert len(m.handle(TasksFinalized(tasks=(("w", "p7"),)), later).intents) == 1


def test_list_workflows_intent_checks_the_page_and_the_cursor_time() -> None:
    intent = list_workflows_intent(10, T0)
    assert (intent.limit, intent.before_created_at) == (10, T0)
    assert list_workflows_intent().before_created_at is None
    with pytest.raises(ValidationError, match="limit must be 1 to 10000"):
        list_workflows_intent(0)
    with pytest.raises(ValidationError, match="before must carry its offset, got 2026-01-01T00:00:00"):
        list_workflows_intent(10, T0.replace(tzinfo=None))
    with pytest.raises(ValidationError, match="before must be a datetime, got str"):
        list_workflows_intent(10, "2026-01-01")  # type: ignore[arg-type]
