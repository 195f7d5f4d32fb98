"""The completer's promoter: right after this client recorded the end of workflow
tasks, move on their dependents (``PromoteWorkflowTasks`` for those workflows).

One promotion runs at a time; tasks finalized meanwhile wait in a set and go
together in the next one, so a burst of completions costs a few promotions, not
one each. A promotion that looked at pending tasks and moved none (a wide fan-in
whose deps are still running: each look reads all of them) holds the next one
back, 5 ms doubling to ``MAX_HOLD`` (100 ms); one that moves a task releases it.
A failed promotion is not retried here: the workflow sweeper
(``river_protocol.machines.workflow_sweeper``) promotes whatever any client, Go included,
finalized.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from river_protocol.constants import FETCH_COOLDOWN_DEFAULT
from river_protocol.intents import Intent, Notify, PromoteWorkflowTasks, PromotionResult
from river_protocol.job import JobRow
from river_protocol.machines.base import (
    Batches,
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Stop,
    Table,
    Tick,
    to,
)
from river_protocol.machines.notifications import TOPIC_FINISHED, build_finished
from river_protocol.machines.throttle import InsertNotifyThrottle
from river_protocol.workflow import TASK, WORKFLOW_ID

PROMOTION_TIMEOUT = timedelta(seconds=30)
FIRST_HOLD = timedelta(milliseconds=5)
MAX_HOLD = timedelta(milliseconds=100)


def finalized_tasks(jobs: Iterable[JobRow]) -> tuple[tuple[str, str], ...]:
    """(workflow id, task name) of the finalized workflow tasks among ``jobs`` (first-seen order)."""
    seen: dict[tuple[str, str], None] = {}
    for job in jobs:
        if job.state.finalized:
            wid, task = job.metadata.get(WORKFLOW_ID), job.metadata.get(TASK)
            if isinstance(wid, str) and isinstance(task, str):
                seen[(wid, task)] = None
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class TasksFinalized(Event):
    """Workflow tasks that ended (their dependents may move on), or whole workflows to look at
    (grown or retried)."""

    tasks: tuple[tuple[str, str], ...] = ()
    workflow_ids: tuple[str, ...] = ()


def _merge(events: tuple[Any, ...]) -> TasksFinalized:
    return TasksFinalized(tuple(dict.fromkeys(t for e in events for t in e.tasks)),
                          tuple(dict.fromkeys(w for e in events for w in e.workflow_ids)))


class PromoterState(enum.Enum):
    IDLE = "idle"
    BUSY = "busy"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class PromoterOutput(Output):
    promoted_queues: tuple[str, ...] = ()  # queues that got available tasks: poke their producers
    result: PromotionResult | None = None
    error: BaseException | None = None


_S = PromoterState
_OK, _FAIL = IntentSucceeded, IntentFailed


class WorkflowPromoter(Machine):
    INITIAL: ClassVar[PromoterState] = _S.IDLE
    BATCHES: ClassVar[Batches] = {TasksFinalized: _merge}
    state: PromoterState

    TABLE: ClassVar[Table] = {
        (_S.IDLE, TasksFinalized): to(_S.IDLE, _S.BUSY, via="_on_finalized"),
        (_S.BUSY, TasksFinalized): to(_S.BUSY, via="_on_finalized"),
        (_S.BUSY, (_OK, PromoteWorkflowTasks)): to(_S.IDLE, _S.BUSY, via="_on_result"),
        (_S.BUSY, (_FAIL, PromoteWorkflowTasks)): to(_S.IDLE, _S.BUSY, via="_on_result"),
        **{(s, (r, Notify)): to(s, via="_ignore") for s in _S for r in (_OK, _FAIL)},
        **{(s, (r, PromoteWorkflowTasks)): to(s, via="_ignore") for s in (_S.IDLE, _S.STOPPED)
           for r in (_OK, _FAIL)},
        (_S.IDLE, Tick): to(_S.IDLE, _S.BUSY, via="_on_tick"),
        (_S.BUSY, Tick): to(_S.BUSY, via="_ignore"),
        (_S.STOPPED, Tick): to(_S.STOPPED, via="_ignore"),
        **{(s, Stop): to(_S.STOPPED, via="_on_stop") for s in _S},
        (_S.STOPPED, TasksFinalized): to(_S.STOPPED, via="_ignore"),
    }

    def __init__(self, cooldown: timedelta = FETCH_COOLDOWN_DEFAULT, *, announce: bool = False) -> None:
        """``announce``: after each promotion, name the workflows it was about on
        ``river_py_finished`` (Postgres with a listener: waits elsewhere wake at once)."""
        super().__init__()
        self._announce = announce
        self._tasks: dict[tuple[str, str], None] = {}
        self._workflows: dict[str, None] = {}
        self._throttle = InsertNotifyThrottle(cooldown)
        self._queues: tuple[str, ...] = ()
        self._result: PromotionResult | None = None
        self._error: BaseException | None = None
        self._hold = timedelta(0)  # how long a promotion that moved nothing holds the next back

    def handle(self, event: Event, now: datetime) -> PromoterOutput:
        out: PromoterOutput = super().handle(event, now)
        return out

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> PromoterOutput:
        out = PromoterOutput(intents, deadline, self._queues, self._result, self._error)
        self._queues, self._result, self._error = (), None, None
        return out

    def _on_finalized(self, event: TasksFinalized, now: datetime) -> None:
        self._tasks.update(dict.fromkeys(event.tasks))
        self._workflows.update(dict.fromkeys(event.workflow_ids))
        if self._flight_of(PromoteWorkflowTasks) is None:  # else it goes with the next promotion
            self._send(now)

    def _on_tick(self, event: Tick, now: datetime) -> None:
        self._send(now)

    def _send(self, now: datetime) -> None:
        held = self._timers.get("hold")
        if held is not None and held > now:
            self._enter(_S.IDLE)  # the timer's tick sends what waits
            return
        self._timers.pop("hold", None)
        if not self._tasks and not self._workflows:
            self._enter(_S.IDLE)
            return
        tasks, workflows = tuple(self._tasks), tuple(self._workflows)
        self._tasks, self._workflows = {}, {}
        self._enter(_S.BUSY)
        self._emit(PromoteWorkflowTasks(now=now, workflow_ids=workflows or None, finished=tasks or None),
                   PROMOTION_TIMEOUT)

    def _on_result(self, event: IntentSucceeded | IntentFailed, now: datetime) -> None:
        intent = event.intent
        assert isinstance(intent, PromoteWorkflowTasks)
        if self._announce:  # the ends are committed whatever the promotion did
            ended = (*(intent.workflow_ids or ()), *(w for w, _ in intent.finished or ()))
            if ended:
                self._emit(Notify(topic=TOPIC_FINISHED, payloads=build_finished(ended)), PROMOTION_TIMEOUT)
        if isinstance(event, IntentFailed):
            self._error = event.error
        else:
            result: PromotionResult = event.result
            self._result = result
            if result.examined and not result.promoted and not result.cancelled:
                self._hold = min(max(self._hold * 2, FIRST_HOLD), MAX_HOLD)
                self._timers["hold"] = now + self._hold
            else:
                self._hold = timedelta(0)
            queues = tuple(dict.fromkeys(q for _, q in result.promoted))
            self._queues = queues
            notify = self._throttle.notify_for_queues(queues, now)
            if notify is not None:
                self._emit(notify, PROMOTION_TIMEOUT)
        self._send(now)

    def _on_stop(self, event: Stop, now: datetime) -> None:
        self._tasks, self._workflows = {}, {}
        self._timers.clear()
