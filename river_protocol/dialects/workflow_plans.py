"""The promotion of pending workflow tasks, one plan for both dialects.

A dialect supplies three statements (read the pending tasks with what their
deps' rows say, promote ids, cancel ids); the rule that decides between them is
``river_protocol.workflow.decide``, applied here to the rows read, so both
dialects promote exactly alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from river_protocol.dialects.base import Plan
from river_protocol.intents import PromoteWorkflowTasks, PromotionResult, Statement
from river_protocol.workflow import CancelDependent, PendingTask, Promote, decide

# How many times one promotion follows cancellations into the tasks they make final:
# a chain of failures deeper than this is finished by the next promotion.
MAX_CASCADE_ROUNDS = 100
CASCADE_LIMIT = 10_000


def _names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    decoded = json.loads(value) if isinstance(value, str | bytes) else value
    if not isinstance(decoded, list):
        return ()
    return tuple(v for v in decoded if isinstance(v, str))


def pending_task(row: Sequence[Any]) -> PendingTask:
    """A row of a dialect's read: (id, workflow id, task, attempt, deps JSON, ignore cancelled,
    ignore discarded, completed count, cancelled names JSON, discarded names JSON)."""
    return PendingTask(
        id=int(row[0]), workflow_id=str(row[1]), task=str(row[2]), attempt=int(row[3]),
        deps=_names(row[4]), ignore_cancelled_deps=bool(row[5]), ignore_discarded_deps=bool(row[6]),
        completed=int(row[7] or 0), cancelled=_names(row[8]), discarded=_names(row[9]),
    )


# A read of the pending tasks an intent names (its ``workflow_ids``, ``finished``, ``after_id``
# and ``limit``): a plan of its own (one statement on Postgres, two on SQLite) whose result is
# the rows ``pending_task`` reads.
Select = Callable[[PromoteWorkflowTasks], Plan[list[tuple[Any, ...]]]]
Update = Callable[[list[int]], Statement]
Cancel = Callable[[list[CancelDependent]], Statement]  # returns (id, workflow id, task) per row


def targets(intent: PromoteWorkflowTasks, candidate: Sequence[Any]) -> bool:
    """Whether a pending task (a candidate row: id, workflow id, task, attempt, deps JSON, ...)
    is one ``intent`` names: of one of its workflows, or depending on one of its finished tasks."""
    wid = str(candidate[1])
    if intent.sweep or intent.finished_since is not None:  # the read named these workflows already
        return True
    if intent.workflow_ids is not None and wid in intent.workflow_ids:
        return True
    done = {task for w, task in intent.finished or () if w == wid}
    return bool(done) and any(dep in done for dep in _names(candidate[4]))


def one_statement(statement: Statement) -> Plan[list[tuple[Any, ...]]]:
    """The plan of a read that is one statement."""
    rows = yield statement
    return rows


def dep_counts(candidate: Sequence[Any], final_states: dict[tuple[str, str], set[str]]) -> tuple[Any, ...]:
    """A ``pending_task`` row from a candidate (id, workflow id, task, attempt, deps JSON, ignore
    cancelled, ignore discarded) and the final states found per (workflow id, task name): what
    Postgres's read counts in SQL, for a dialect that reads the rows instead."""
    wid, deps = str(candidate[1]), dict.fromkeys(_names(candidate[4]))
    def named(state: str) -> list[str]:
        return [dep for dep in deps if state in final_states.get((wid, dep), ())]
    return (*candidate[:7], len(named("completed")), json.dumps(named("cancelled")),
            json.dumps(named("discarded")))


def counted(candidates: Sequence[Sequence[Any]], finals: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """``pending_task`` rows: each candidate with its deps counted from ``finals``, the final
    rows (workflow id, task name, state) of the candidates' workflows. Both dialects read a
    workflow's final rows once per promotion and count here: a lookup per dep (an index probe
    each) or a count per candidate costs a promotion as many reads as there are deps."""
    states: dict[tuple[str, str], set[str]] = {}
    for wid, task, state in finals:
        states.setdefault((str(wid), str(task)), set()).add(str(state))
    return [dep_counts(c, states) for c in candidates]


def promotion_plan(intent: PromoteWorkflowTasks, select: Select, promote: Update,
                   cancel: Cancel) -> Plan[PromotionResult]:
    rows = yield from select(intent)
    examined = len(rows)
    last_id = max((int(r[0]) for r in rows), default=0)
    promoted: list[tuple[int, str]] = []
    cancelled: list[tuple[int, str]] = []
    for _ in range(MAX_CASCADE_ROUNDS):
        decisions = [decide(pending_task(r)) for r in rows]
        ups = [d.id for d in decisions if isinstance(d, Promote)]
        downs = [d for d in decisions if isinstance(d, CancelDependent)]
        if ups:
            promoted += [(int(r[0]), str(r[1])) for r in (yield promote(ups))]
        if not downs:
            break
        done = [(int(r[0]), str(r[1]), str(r[2])) for r in (yield cancel(downs))]
        cancelled += [(i, w) for i, w, _ in done]
        if not done:
            break
        # The tasks just cancelled may be deps of other pending tasks: their dependents next.
        rows = yield from select(PromoteWorkflowTasks(now=intent.now, limit=CASCADE_LIMIT,
                                                      finished=tuple((w, t) for _, w, t in done)))
    return PromotionResult(examined, last_id, tuple(promoted), tuple(cancelled))
