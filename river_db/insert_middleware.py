"""Insert middleware around every insert a client makes, for both drivers.

A client's own ``insert``/``insert_many`` and the periodic enqueuer's inserts
pass through the same chain, so whatever a middleware adds (river_otel's
producer span and trace context, a tenant tag) is on every job, whoever
enqueued it.

The chain is built alike for plain and async functions: each link returns what
the next returns, and the driver awaits the outermost result or not. So one
piece serves river_sync and river_anyio, and nothing here waits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from river_protocol.intents import InsertJobs, InsertParams, Intent
from river_protocol.middleware import replace_insert_jobs

InsertCall = Callable[[Sequence[InsertParams]], Any]


def insert_chain(middleware: Sequence[Callable[..., Any]], innermost: InsertCall) -> InsertCall:
    """``innermost`` wrapped in ``middleware``, the first outermost: ``mw(jobs, call_next)`` each."""
    call = innermost
    for mw in reversed(middleware):
        call = (lambda m, nxt: lambda jobs: m(jobs, nxt))(mw, call)
    return call


class InsertMiddlewareDatabase:
    """A driver's database for a machine runner, whose ``InsertJobs`` go through ``middleware``
    (the rows it passes on are checked against the planned insert); other intents go straight
    through. ``run`` returns what the database's does, awaitable for an async one."""

    def __init__(self, database: Any, middleware: Sequence[Callable[..., Any]]) -> None:
        self._database = database
        self._middleware = tuple(middleware)

    @property
    def closed(self) -> bool:
        return bool(self._database.closed)

    def run(self, intent: Intent, *, readonly: bool = False) -> Any:
        if not self._middleware or not isinstance(intent, InsertJobs):
            return self._database.run(intent, readonly=readonly)

        def innermost(jobs: Sequence[InsertParams]) -> Any:
            return self._database.run(replace_insert_jobs(intent, jobs), readonly=readonly)

        return insert_chain(self._middleware, innermost)(intent.jobs)
