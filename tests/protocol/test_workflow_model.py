"""A model of workflow promotion (hypothesis): random DAGs, several promoters whose statements
interleave with workers that complete, fail, crash and get rescued.

The promoters are the real ``promotion_plan`` (the one both dialects run) with its three
statements answered from an in-memory table, and the real ``decide``; a promoter may crash
between statements (its generator is dropped). The claims checked:

* a task leaves ``pending`` for ``available`` only when every dep is final in a state it
  accepts (completed, or cancelled/discarded with the matching ``ignore_*`` option);
* it does so at most once, whatever the number of promoters, and it runs only after that;
* once everything has run to the end (promoters and workers keep going), every task is final
  and none is left ``pending``.

Several sweeps at once are among the interleavings: the workflow sweeper's lease keeps the
sweep to one client for its cost, and this model is why two at once, while the lease changes
hands, are safe (tests/protocol/test_workflow_sweeper.py models the lease itself).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from river_protocol.dialects.workflow_plans import one_statement, promotion_plan, targets
from river_protocol.intents import PromoteWorkflowTasks, Statement
from river_protocol.states import JobState
from river_protocol.workflow import CancelDependent

NOW = datetime(2026, 1, 1, tzinfo=UTC)
P, A, R, C, X, D = (JobState.PENDING, JobState.AVAILABLE, JobState.RUNNING, JobState.COMPLETED,
                    JobState.CANCELLED, JobState.DISCARDED)


@dataclass
class Task:
    id: int
    workflow: str
    deps: tuple[int, ...]
    ignore_cancelled: bool
    ignore_discarded: bool
    state: JobState
    promotions: int = 0
    runs: int = 0
    final_at: datetime | None = None  # when it last became final (a model time)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name == "state" and value.finalized:
            object.__setattr__(self, "final_at", NOW + timedelta(microseconds=next(_TICKS)))


_TICKS = itertools.count(1)  # model time: every end is later than the ones before


@dataclass
class Table:
    tasks: dict[int, Task] = field(default_factory=dict)

    def name(self, i: int) -> str:
        return f"t{i}"

    def accepted(self, task: Task) -> bool:
        for dep in task.deps:
            state = self.tasks[dep].state
            ok = (state is C or (state is X and task.ignore_cancelled)
                  or (state is D and task.ignore_discarded))
            if not ok:
                return False
        return True

    # -- the three statements of a promotion, answered as the dialects' SQL does
    def select(self, intent: PromoteWorkflowTasks) -> list[tuple[Any, ...]]:
        def names(tasks: Any) -> str:
            return json.dumps([self.name(t.id) for t in tasks])

        rows = []
        for task in sorted(self.tasks.values(), key=lambda t: t.id):
            if task.state is not P or task.id <= intent.after_id:
                continue
            deps = [self.tasks[d] for d in task.deps]
            candidate = (task.id, task.workflow, self.name(task.id), 0, names(deps))
            if not targets(intent, candidate):
                continue
            since = intent.finished_since
            if since is not None and not any(t.workflow == task.workflow and t.final_at is not None
                                             and t.final_at >= since for t in self.tasks.values()):
                continue
            rows.append((
                task.id, task.workflow, self.name(task.id), 0, names(deps),
                task.ignore_cancelled, task.ignore_discarded, sum(1 for d in deps if d.state is C),
                names(d for d in deps if d.state is X), names(d for d in deps if d.state is D),
            ))
        return rows[:intent.limit]

    def promote(self, ids: list[int]) -> list[tuple[Any, ...]]:
        out = []
        for i in ids:
            task = self.tasks[i]
            if task.state is P:  # the guard: state = 'pending'
                assert self.accepted(task), f"task {i} promoted before its deps allow it"
                task.state = A
                task.promotions += 1
                out.append((i, "default"))
        return out

    def cancel(self, downs: list[CancelDependent]) -> list[tuple[Any, ...]]:
        out = []
        for down in downs:
            task = self.tasks[down.id]
            if task.state is P:
                task.state = X
                out.append((task.id, task.workflow, self.name(task.id)))
        return out

    def execute(self, statement: Statement) -> list[tuple[Any, ...]]:
        kind, params = statement.sql, statement.params
        if kind == "select":
            return self.select(*params)
        if kind == "promote":
            return self.promote(*params)
        return self.cancel(*params)


def start_promoter(intent: PromoteWorkflowTasks) -> Generator[Statement, Any, Any]:
    return promotion_plan(
        intent,
        lambda scope: one_statement(Statement("select", (scope,))),
        lambda ids: Statement("promote", (ids,)),
        lambda downs: Statement("cancel", (downs,)),
    )


@st.composite
def dags(draw: st.DrawFn) -> Table:
    table = Table()
    n_workflows = draw(st.integers(1, 2))
    n = draw(st.integers(2, 12))
    for i in range(n):
        workflow = f"w{i % n_workflows}"
        earlier = [j for j in range(i) if f"w{j % n_workflows}" == workflow]
        deps = tuple(sorted(draw(st.sets(st.sampled_from(earlier), max_size=3)) if earlier else ()))
        table.tasks[i] = Task(i, workflow, deps, draw(st.booleans()), draw(st.booleans()), P if deps else A)
    return table


ACTIONS = ("step_promoter", "start_promoter", "crash_promoter", "claim", "complete", "discard",
           "cancel", "crash_worker", "rescue")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=dags(), data=st.data())
def test_promotion_model(table: Table, data: st.DataObject) -> None:
    workflows = tuple(sorted({t.workflow for t in table.tasks.values()}))
    promoters: dict[int, tuple[Generator[Statement, Any, Any], Statement]] = {}
    crashed: set[int] = set()  # running tasks whose worker died: only the rescuer moves them
    serial = 0

    def advance(key: int) -> None:
        plan, pending = promoters[key]
        try:
            promoters[key] = (plan, plan.send(table.execute(pending)))
        except StopIteration:
            del promoters[key]

    def launch(kind: str) -> None:
        nonlocal serial
        if kind == "sweep":
            intent = PromoteWorkflowTasks(now=NOW, limit=3)
        elif kind == "since":  # the sweeper's run between full sweeps: ends of the last few ticks
            recent = max((t.final_at for t in table.tasks.values() if t.final_at), default=NOW)
            intent = PromoteWorkflowTasks(now=NOW, limit=3, finished_since=recent - timedelta(microseconds=2))
        elif kind == "workflows":
            intent = PromoteWorkflowTasks(now=NOW, workflow_ids=workflows, limit=3)
        else:  # a completer's: the dependents of some tasks that ended
            ended = [(t.workflow, table.name(t.id)) for t in table.tasks.values() if t.state.finalized]
            intent = PromoteWorkflowTasks(now=NOW, finished=tuple(ended[-3:]) or (("w0", "none"),))
        plan = start_promoter(intent)
        serial += 1
        promoters[serial] = (plan, next(plan))

    def running() -> list[Task]:
        return [t for t in table.tasks.values() if t.state is R]

    for _ in range(data.draw(st.integers(0, 60))):
        action = data.draw(st.sampled_from(ACTIONS))
        if action == "start_promoter" and len(promoters) < 3:
            launch(data.draw(st.sampled_from(("sweep", "since", "workflows", "finished"))))
        elif action == "step_promoter" and promoters:
            advance(data.draw(st.sampled_from(sorted(promoters))))
        elif action == "crash_promoter" and promoters:
            del promoters[data.draw(st.sampled_from(sorted(promoters)))]
        elif action == "claim":
            ready = [t for t in table.tasks.values() if t.state is A]
            if ready:
                task = data.draw(st.sampled_from(ready))
                assert not task.deps or task.promotions == 1, "a task with deps ran without promotion"
                task.state, task.runs = R, task.runs + 1
        elif action in ("complete", "discard", "cancel"):
            live = [t for t in running() if t.id not in crashed]
            if live:
                data.draw(st.sampled_from(live)).state = {"complete": C, "discard": D, "cancel": X}[action]
        elif action == "crash_worker":
            live = [t for t in running() if t.id not in crashed]
            if live:
                crashed.add(data.draw(st.sampled_from(live)).id)
        elif action == "rescue" and crashed:
            task = table.tasks[data.draw(st.sampled_from(sorted(crashed)))]
            crashed.discard(task.id)
            task.state = data.draw(st.sampled_from((A, D)))  # retried, or out of attempts

    # Drain: promoters finish or die, the rest runs to the end with the sweeper's sweeps.
    for key in list(promoters):
        while key in promoters:
            advance(key)
    for task in running():
        task.state = C
    for _ in range(len(table.tasks) + 1):
        launch("sweep")
        while promoters:
            advance(next(iter(promoters)))
        for task in table.tasks.values():
            if task.state is A:
                assert not task.deps or task.promotions == 1
                task.state, task.runs = C, task.runs + 1

    for task in table.tasks.values():
        assert task.state.finalized, f"task {task.id} ended {task.state.value}"
        assert task.promotions <= 1
        if task.deps and task.runs:
            assert task.promotions == 1
        if task.deps and task.state is C:
            assert table.accepted(task)
