"""What a dialect is: a function from intents to plans.

A *plan* is a generator (psycopg 3's generators are the model): it yields a
``Statement`` (or ``CopyRows``), receives the list of result rows as tuples,
and finally returns the intent's parsed result. A driver runs a plan with its
own way of waiting; ``drive`` is the plain synchronous loop.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator
from typing import Any, ClassVar, TypeVar

from river_protocol.errors import ValidationError
from river_protocol.intents import CopyRows, Intent, Statement

R = TypeVar("R")
Plan = Generator[Statement | CopyRows, list[tuple[Any, ...]], R]
Planner = Callable[[Any, Any], Plan[Any]]


class Dialect:
    """Base. A dialect's planners live in the modules named by ``planner_modules``; each
    exposes ``PLANNERS: dict[type[Intent], planner(dialect, intent)]``. Keeping them in
    separate modules lets job, queue, leader and migration statements grow independently."""

    name: ClassVar[str] = ""
    paramstyle: ClassVar[str] = ""
    begin_sql: ClassVar[str] = "BEGIN"
    planner_modules: ClassVar[tuple[str, ...]] = ()
    _planners: ClassVar[dict[type[Intent], Planner] | None] = None

    def __init__(self, schema: str | None = None) -> None:
        self.schema = schema

    @classmethod
    def planners(cls) -> dict[type[Intent], Planner]:
        if cls.__dict__.get("_planners") is None:
            table: dict[type[Intent], Planner] = {}
            for module_name in cls.planner_modules:
                try:
                    module = importlib.import_module(module_name)
                except ModuleNotFoundError as exc:
                    if exc.name is None or not module_name.startswith(exc.name):
                        raise
                    continue
                table.update(module.PLANNERS)
            cls._planners = table
        return cls.__dict__["_planners"]  # type: ignore[no-any-return]

    def needs_transaction(self, intent: Intent) -> bool:
        """Whether the executors wrap ``intent``'s plan in BEGIN..COMMIT (outside a caller's
        transaction): as the intent says, unless this dialect plans it as one statement."""
        return intent.transactional

    def plan(self, intent: Intent) -> Plan[Any]:
        planner = self.planners().get(type(intent))
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
