"""What a dialect is: a function from intents to plans.

A *plan* is a generator (psycopg 3's generators are the model): it yields a
``Statement`` (or ``CopyRows``), receives the list of result rows as tuples,
and finally returns the intent's parsed result. A driver runs a plan with its
own way of waiting; ``drive`` is the plain synchronous loop.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

from river_protocol.errors import ValidationError
from river_protocol.intents import CopyRows, Intent, Statement

R = TypeVar("R")
Plan = Generator[Statement | CopyRows, list[tuple[Any, ...]], R]
Planner = Callable[[Any, Any], Plan[Any]]


class Dialect:
    """Base: subclasses fill ``planners`` with ``{IntentType: planner(dialect, intent)}``."""

    name: str = ""
    paramstyle: str = ""
    begin_sql: str = "BEGIN"
    planners: dict[type[Intent], Planner] = {}

    def __init__(self, schema: str | None = None) -> None:
        self.schema = schema

    def plan(self, intent: Intent) -> Plan[Any]:
        planner = self.planners.get(type(intent))
        if planner is None:
            raise ValidationError(f"{self.name} dialect cannot render {type(intent).__name__}")
        return planner(self, intent)


def drive(plan: Plan[R], execute: Callable[[Statement | CopyRows], list[tuple[Any, ...]]]) -> R:
    """Run ``plan`` to completion, executing each statement with ``execute``."""
    try:
        step = next(plan)
        while True:
            step = plan.send(execute(step))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
