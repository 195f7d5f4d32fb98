"""The promotion of pending workflow tasks, one plan for both dialects.

A dialect supplies three statements (read the pending tasks with what their
deps' rows say, promote ids, cancel ids); the rule that decides between them is
``river_protocol.workflow.decide``, applied here to the rows read, so both
dialects promote exactly alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
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


# A read of the pending tasks: a plan of its own (one statement on Postgres, two on SQLite)
# whose result is the rows ``pending_task`` reads.
Select = Callable[[tuple[str, ...] | None, int, int], Plan[list[tuple[Any, ...]]]]
Update = Callable[[list[int]], Statement]
Cancel = Callable[[list[CancelDependent]], Statement]


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


def promotion_plan(intent: PromoteWorkflowTasks, select: Select, promote: Update,
                   cancel: Cancel) -> Plan[PromotionResult]:
    rows = yield from select(intent.workflow_ids, intent.after_id, intent.limit)
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
        done = [(int(r[0]), str(r[1])) for r in (yield cancel(downs))]
        cancelled += done
        if not done:
            break
        # The tasks just cancelled may be deps of other pending tasks: look again at their workflows.
        rows = yield from select(tuple(sorted({w for _, w in done})), 0, CASCADE_LIMIT)
    return PromotionResult(examined, last_id, tuple(promoted), tuple(cancelled))
