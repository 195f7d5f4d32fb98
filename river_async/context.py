"""What a worker receives besides its args: ``WorkContext`` and its cancellation token.

Async workers (``async def``) run in the client's long-lived job tasks, inside
a cancel scope the run's token holds while it runs. The token cancels that
scope on the job's timeout (a deadline on the loop's clock),
on a remote cancel and on a hard stop, so a worker is interrupted at its next
checkpoint; the token records why (``ctx.cancel_cause``) and the client maps
the interruption to the same outcome ``river_sync`` records for a worker that
raised ``WorkCancelled``. A worker that catches the cancellation (``trio.Cancelled``,
``asyncio.CancelledError``) and returns normally completes its job, as in the threaded driver.

Sync (blocking) workers run in a worker thread and are cooperative only, as
in ``river_sync``: the token is set and the worker must check it
(``ctx.cancelled``, ``ctx.token.wait(seconds)``, ``ctx.raise_if_cancelled()``).
From that thread, client calls go through ``anyio.from_thread.run`` (or
``trio.from_thread.run`` under trio).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from river_async.runner import utcnow
from river_db.resumable import UNSET, Step, positional_count
from river_db.work_context import WorkContextBase
from river_protocol.intents import SetStateIfRunning
from river_protocol.job import JobRow
from river_protocol.work import CancelCause, WorkCancelled, complete_in_tx_update

if TYPE_CHECKING:
    from river_async.client import Client

# One lock for every token rather than one per token (per job): it is held only to read or set
# a token's cause and event, never across a wait or a call out, so tokens barely contend for it.
_TOKEN_LOCK = threading.Lock()


class CancellationToken:
    """Why a run was told to stop (the first cause wins); cancels the run's scope for async workers."""

    __slots__ = ("_event", "cause", "scope")

    def __init__(self) -> None:
        # The Event sync workers wait on is made on first wait(): most jobs never wait, and an
        # Event (a Condition and two locks) per job showed up in the burn-down profile.
        self._event: threading.Event | None = None
        self.cause: CancelCause | None = None
        self.scope: Any = None  # the run's cancel scope (trio's or AnyIO's), while it runs

    def cancel(self, cause: CancelCause) -> bool:
        """Set the token (call from the event loop's thread); False when it was already set."""
        with _TOKEN_LOCK:
            if self.cause is not None:
                return False
            self.cause = cause
            event = self._event
        if event is not None:
            event.set()
        if self.scope is not None:
            self.scope.cancel()
        return True

    def is_set(self) -> bool:
        return self.cause is not None

    def wait(self, timeout: float | None = None) -> bool:
        """For sync workers (blocks its thread): sleep up to ``timeout`` s, waking when cancelled."""
        with _TOKEN_LOCK:
            if self.cause is not None:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise ``WorkCancelled`` when set: the way to give up that records the right outcome."""
        cause = self.cause
        if cause is not None:
            raise WorkCancelled(cause)


class AsyncStep(Step):
    """A resumable step for async code.

    ``async with ctx.step("x") as step`` or ``await ctx.step("x").run(fn)``.
    """

    async def __aenter__(self) -> AsyncStep:
        self.__enter__()
        return self

    async def __aexit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(typ, exc, tb)

    async def run(self, fn: Callable[..., Awaitable[Any] | Any]) -> Any:
        """Run ``fn`` (async or sync; optionally taking the cursor) unless the step is skipped."""
        async with self as step:
            if step.skip:
                return None
            takes_cursor = positional_count(fn) >= 1
            result = fn(step.cursor) if takes_cursor else fn()
            if inspect.isawaitable(result):
                result = await result
            return result


class WorkContext(WorkContextBase):
    """Per-run context: the job row, decoded args, the client and the cancellation token.

    Resumable steps: ``step`` (an ``AsyncStep``, also usable with ``with`` and as
    a decorator of a sync function), ``cursor``, ``set_cursor`` and the async
    ``checkpoint(tx)``.
    """

    client: Client
    token: CancellationToken

    def step(self, name: str) -> AsyncStep:
        return AsyncStep(self, name)

    async def complete_in(self, tx: Any) -> JobRow | None:
        """Mark this job completed inside the caller's transaction ``tx`` (docs/protocol.md §7.5).

        ``tx`` is a psycopg connection, SQLAlchemy Connection/Session or sqlite3
        connection with an open transaction; the job is completed only if it
        commits. Returns the row as updated (None if the job no longer exists).
        """
        from river_async.txadapt import executor_for_caller_tx

        update = complete_in_tx_update(self.job, utcnow(), self.metadata_updates)
        executor = await executor_for_caller_tx(tx, schema=self.client.schema)
        rows = await executor.run(SetStateIfRunning(updates=(update,)))
        self.completed_in_tx = True
        return rows[0] if rows else None

    async def checkpoint(self, tx: Any, *, cursor: Any = UNSET) -> JobRow | None:
        """Store the current step (and cursor) inside ``tx`` now; returns the updated row."""
        from river_async.txadapt import executor_for_caller_tx

        intent, updates = self._checkpoint_intent(cursor)
        executor = await executor_for_caller_tx(tx, schema=self.client.schema)
        row: JobRow = await executor.run(intent)
        self.metadata_updates.update(updates)
        return row
