"""The async executor: runs intents' plans on one DB-API connection without blocking the loop.

Statements run on the blocking connections in worker threads (one thread call
per intent: the whole plan runs in the worker), on trio and on asyncio alike;
the thread hop is the backend's (``river_anyio._backend.run_interruptible``).
How plans reach the connection is behind ``PlanRunner``; ``ThreadRunner`` is
the client's own, and a caller's asyncio-native transaction brings another
(``river_anyio.caller_tx``).

Cancellation never leaves a connection mid-statement. When the waiting task is
cancelled, the runner asks the database to stop (Postgres: a server-side cancel
request; SQLite: ``interrupt()``), waits for the worker to finish anyway and for
the cancel request to complete, rolls back a transaction the runner opened, and
only then raises the cancellation. If the statement finished before the
cancel took effect, its result is returned and the cancellation is delivered
at the caller's next checkpoint, the usual trio contract for work that cannot
be undone (AnyIO's cancel scopes keep it on asyncio too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, Protocol, TypeVar

import anyio

from river_anyio import _backend
from river_db.executor import execute_step
from river_protocol.dialects.base import Dialect, Plan, drive
from river_protocol.intents import CopyRows, Intent, Statement

R = TypeVar("R")
T = TypeVar("T")

# How long a Postgres cancel request may take before the connection is given up on.
CANCEL_TIMEOUT = 5.0


class PlanRunner(Protocol):
    """How plans reach one connection; the only thing a different I/O strategy replaces."""

    @property
    def broken(self) -> bool:
        """True once the connection must be discarded rather than reused."""
        ...

    async def run_plan(self, plan: Plan[R], *, begin: str | None = None) -> R:
        """Run every statement of ``plan``; with ``begin`` (the dialect's BEGIN) inside a
        transaction that commits when the plan returns and rolls back on any failure."""
        ...

    async def rollback(self) -> None:
        """End any open transaction, leaving the connection idle (or ``broken``)."""
        ...


class _Interrupted(Exception):
    """Raised in the worker when a cancel was requested before the next statement started."""


class _CallState:
    __slots__ = ("cancel_failed", "cancel_requested")

    def __init__(self) -> None:
        self.cancel_requested = False
        self.cancel_failed = False


def connection_kind(conn: Any) -> str:
    """'postgres' for a psycopg 3 connection, else 'sqlite' (sqlite3-style)."""
    module = type(conn).__module__
    return "postgres" if module.startswith("psycopg") else "sqlite"


def _single(step: Statement | CopyRows) -> Plan[list[tuple[Any, ...]]]:
    rows = yield step
    return rows


class ThreadRunner:
    """Runs plans on ``conn`` in worker threads, one call at a time.

    The connection must tolerate use from any thread (psycopg always does;
    SQLite needs ``check_same_thread=False``).
    """

    def __init__(self, conn: Any, *, kind: str | None = None) -> None:
        self.conn = conn
        self.kind = kind or connection_kind(conn)
        self._broken = False
        self._busy = False

    @property
    def broken(self) -> bool:
        return self._broken

    async def run_plan(self, plan: Plan[R], *, begin: str | None = None) -> R:
        return await self.call(lambda state: self._run_sync(plan, begin, state))

    async def rollback(self) -> None:
        await self.call(lambda _state: self._rollback_sync())

    # --- the worker side

    def _execute(self, state: _CallState, step: Statement | CopyRows) -> list[tuple[Any, ...]]:
        if state.cancel_requested:
            raise _Interrupted("cancelled before the statement started")
        return execute_step(self.conn, step)

    def _run_sync(self, plan: Plan[R], begin: str | None, state: _CallState) -> R:
        def execute(step: Statement | CopyRows) -> list[tuple[Any, ...]]:
            return self._execute(state, step)

        try:
            if begin is None:
                return drive(plan, execute)
            execute(Statement(begin, fetch=False))
            try:
                result = drive(plan, execute)
                # A cancel that lands before COMMIT starts rolls back, so "cancelled" means
                # "not committed" whenever the cancel won the race.
                execute(Statement("COMMIT", fetch=False))
            except BaseException:
                self._rollback_sync()
                raise
            return result
        finally:
            plan.close()

    def _in_transaction(self) -> bool:
        if self.kind == "postgres":
            from psycopg.pq import TransactionStatus

            return bool(self.conn.pgconn.transaction_status != TransactionStatus.IDLE)
        return bool(self.conn.in_transaction)

    def _rollback_sync(self) -> None:
        # Never subject to the cancel flag: this is how a cancelled call cleans up.
        try:
            if self.kind == "postgres" and (self.conn.closed or self.conn.broken):
                self._broken = True
                return
            if self._in_transaction():
                execute_step(self.conn, Statement("ROLLBACK", fetch=False))
        except Exception:
            self._broken = True
            return
        # A statement still ACTIVE after ROLLBACK means the protocol state is lost.
        with suppress(Exception):
            if self.kind == "postgres" and self._in_transaction():
                self._broken = True

    # --- the event loop's side

    async def call(self, work: Callable[[_CallState], T]) -> T:
        """Run ``work(state)`` in a worker thread; cancellation interrupts it on the server
        and waits for it (see the module docstring)."""
        backend = _backend.current()
        await backend.checkpoint_if_cancelled()
        if self._busy:
            raise backend.busy_error("another task is already using this executor's connection")
        self._busy = True
        state = _CallState()
        try:
            return await backend.run_interruptible(lambda: work(state), lambda: self._interrupt(state))
        finally:
            self._busy = False
            if state.cancel_failed:
                # The cancel may still arrive and hit a later statement: retire the connection.
                self._broken = True

    def _interrupt(self, state: _CallState) -> Callable[[], None] | None:
        """On the loop, once the waiting task is cancelled: stop starting statements, and the
        blocking cancel request to send from another thread (None when done already)."""
        state.cancel_requested = True
        if self.kind != "postgres":
            # sqlite3_interrupt is thread-safe and returns at once.
            with suppress(Exception):
                self.conn.interrupt()
            return None
        conn = self.conn

        def cancel() -> None:
            try:
                conn.cancel_safe(timeout=CANCEL_TIMEOUT)
            except Exception:
                state.cancel_failed = True

        return cancel


class AsyncExecutor:
    """Runs intents on one connection (autocommit, explicit transactions), like
    ``river_db.executor.Executor`` with awaits. Inside a caller's transaction
    (``in_caller_tx=True``) no BEGIN/COMMIT/ROLLBACK is issued: the caller owns it.

    One task at a time: concurrent use raises ``anyio.BusyResourceError`` (under trio one
    that is also a ``trio.BusyResourceError``).
    """

    def __init__(
        self,
        conn: Any,
        dialect: Dialect,
        *,
        in_caller_tx: bool = False,
        runner: PlanRunner | None = None,
    ) -> None:
        self.conn = conn
        self.dialect = dialect
        self.runner: PlanRunner = runner if runner is not None else ThreadRunner(conn)
        self._in_tx = in_caller_tx
        self._caller_tx = in_caller_tx

    @property
    def broken(self) -> bool:
        return self.runner.broken

    async def execute(self, step: Statement | CopyRows) -> list[tuple[Any, ...]]:
        return await self.runner.run_plan(_single(step))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncExecutor]:
        """BEGIN..COMMIT around the block; any exception (cancellation included) rolls back."""
        if self._in_tx:
            yield self
            return
        await self.execute(Statement(self.dialect.begin_sql, fetch=False))
        self._in_tx = True
        try:
            yield self
            await self.execute(Statement("COMMIT", fetch=False))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.runner.rollback()
            raise
        finally:
            self._in_tx = False

    async def run(self, intent: Intent) -> Any:
        plan = self.dialect.plan(intent)
        if not self._in_tx and self.dialect.needs_transaction(intent):
            return await self.runner.run_plan(plan, begin=self.dialect.begin_sql)
        return await self.runner.run_plan(plan)
