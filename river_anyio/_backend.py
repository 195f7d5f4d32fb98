"""The few primitives the async client takes from its event loop directly, not through AnyIO.

Everything else in ``river_anyio`` is AnyIO and runs unchanged on trio and on
asyncio. What is here sits on a hot path (or has no AnyIO equivalent), so each
backend gets the fastest primitive it has:

- ``utcnow`` / ``current_time``: the loop's clock (trio's, so a
  ``trio.testing.MockClock`` drives every timer), read once or more per job;
- ``run_interruptible``: the executor's thread hop for one blocking call that a
  cancellation interrupts on the database server instead of abandoning (trio:
  ``start_thread_soon`` and ``wait_task_rescheduled`` with an abort hook;
  asyncio: a small cache of worker threads and a future);
- ``ParkingLot``: where idle job tasks wait for a run (``river_anyio.client._JobTasks``);
- ``CancelScope`` and ``Event``: the classes the job tasks, machine runners and
  subscriptions make on every wake-up (trio's own under trio, no AnyIO wrapper);
- the exception types a caller's channel or a busy connection raise;
- ``Event``, ``Lock``, ``sleep``, ``current_time``, ``wait_event``, ``wait_either``: what code
  generated into river_sync calls, ``river_sync._backend``'s names for threads' primitives.

``current()`` picks the running loop's backend (sniffio); ``named(name)`` a given
one. The trio backend imports trio when it is first built, i.e. only under trio,
so an asyncio process never loads trio.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import sniffio
from sniffio import current_async_library_cvar as _sniffio_cvar
from sniffio import thread_local as _sniffio_thread

from river_db.connect import wait_timed_out

T = TypeVar("T")

log = logging.getLogger(__name__)

# A cached worker thread with nothing to do for this long exits.
IDLE_THREAD_TIMEOUT = 10.0

Interrupt = Callable[[], Callable[[], None] | None]


_built: dict[str, Backend] = {}


def named(name: str) -> Backend:
    """The backend for ``name`` ('trio' or 'asyncio'), built on first use."""
    backend = _built.get(name)
    if backend is None:
        if name == "trio":
            backend = TrioBackend()
        elif name == "asyncio":
            backend = AsyncioBackend()
        else:
            raise ValueError(f"unsupported async backend {name!r}: river runs on 'trio' or 'asyncio'")
        _built[name] = backend
    return backend


def current() -> Backend:
    """The running event loop's backend."""
    # sniffio's own answer, without its per-call asyncio import and task lookup: this runs
    # more than once per job (utcnow), and that sniffing was most of an asyncio utcnow().
    name = _sniffio_thread.name or _sniffio_cvar.get()
    if name is None:
        name = "asyncio" if _asyncio_loop() is not None else sniffio.current_async_library()
    backend = _built.get(name)
    return backend if backend is not None else named(name)


def _asyncio_loop() -> Any:
    """The running asyncio loop, or None (also when asyncio is not loaded)."""
    aio = sys.modules.get("asyncio")
    return None if aio is None else aio._get_running_loop()


def utcnow() -> datetime:
    """Now on the running loop's clock (wall time at the run's first call plus loop time since)."""
    return current().utcnow()


def loop_deadline(when: datetime) -> float:
    """The loop clock reading at which ``utcnow()`` reaches ``when``."""
    return current().loop_deadline(when)


# ---------------------------------------------------------------- shared with river_sync._backend
# The names code generated into river_sync calls under the same name there (threads' primitives).

Event = anyio.Event
Lock = anyio.Lock
sleep = anyio.sleep


def current_time() -> float:
    """The running loop's clock, in seconds (what deadlines are counted on)."""
    return current().current_time()


async def wait_event(event: Any, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds (None: no limit) passed; whether it is set."""
    with anyio.move_on_after(timeout):
        await event.wait()
    # Not "returned inside the block": a set Event's wait still checkpoints, so a 0 s
    # deadline would report a set event as unset.
    return bool(event.is_set())


async def wait_either(first: Any, second: Any) -> None:
    """Return once ``first`` or ``second`` is set."""
    async with anyio.create_task_group() as nursery:
        async def wait(event: Any) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        for event in (first, second):
            nursery.start_soon(wait, event)


# ---------------------------------------------------------------- trio


class TrioBackend:
    """trio's primitives; built under trio only (``named``), so an asyncio process loads no trio."""

    name = "trio"

    def __init__(self) -> None:
        import outcome
        import trio

        self._trio, self._outcome = trio, outcome
        self.current_time: Callable[[], float] = trio.current_time
        self.checkpoint_if_cancelled: Callable[[], Awaitable[None]] = trio.lowlevel.checkpoint_if_cancelled
        self.current_task: Callable[[], object] = trio.lowlevel.current_task
        self.ParkingLot: Callable[[], Any] = trio.lowlevel.ParkingLot
        self.CancelScope: Callable[..., Any] = trio.CancelScope
        self.Event: Callable[[], Any] = trio.Event
        self.cancelled: type[BaseException] = trio.Cancelled

        class BusyConnectionError(anyio.BusyResourceError, trio.BusyResourceError):
            """Another task is using this connection (catchable as trio's and AnyIO's error)."""

        self.busy_error: type[Exception] = BusyConnectionError
        self.would_block: tuple[type[BaseException], ...] = (anyio.WouldBlock, trio.WouldBlock)
        self.closed_channel: tuple[type[BaseException], ...] = (
            anyio.BrokenResourceError, anyio.ClosedResourceError,
            trio.BrokenResourceError, trio.ClosedResourceError)
        # The run's (wall, loop) base pair and its clock's current_time, in a RunVar: kept so that
        # utcnow() (once or more per job) skips trio.current_time()'s two extra calls, and the
        # RunVar's bound get so that it skips an attribute lookup too.
        self._base_var: Any = trio.lowlevel.RunVar("river_async_clock_base")
        self._get_base: Callable[[], tuple[datetime, float, Callable[[], float]]] = self._base_var.get

    def _base(self) -> tuple[datetime, float, Callable[[], float]]:
        try:
            return self._get_base()
        except LookupError:
            current_time = self._trio.lowlevel.current_clock().current_time
            found = (datetime.now(UTC), current_time(), current_time)
            self._base_var.set(found)
            return found

    def utcnow(self) -> datetime:
        """Now on the run's clock: wall time at the run's first call plus loop time since."""
        try:
            wall, start, current_time = self._get_base()
        except LookupError:
            wall, start, current_time = self._base()
        # timedelta(days, seconds): the same value as seconds=, without the keyword parsing.
        return wall + timedelta(0, current_time() - start)

    def loop_deadline(self, when: datetime) -> float:
        wall, start, _ = self._base()
        return start + (when - wall).total_seconds()

    async def run_interruptible(self, work: Callable[[], T], interrupt: Interrupt) -> T:
        """``work()`` in a thread; a cancellation calls ``interrupt`` and still waits for ``work``."""
        trio, outcome = self._trio, self._outcome
        token = trio.lowlevel.current_trio_token()
        task = trio.lowlevel.current_task()
        cancel_done: Any = None

        def report(result: Any) -> None:
            # Wrapped once more: wait_task_rescheduled unwraps, we want the outcome itself.
            token.run_sync_soon(trio.lowlevel.reschedule, task, outcome.Value(result))

        def abort(_raise_cancel: Any) -> Any:
            nonlocal cancel_done
            if cancel_done is None:
                done = cancel_done = trio.Event()
                blocking = interrupt()
                if blocking is None:
                    done.set()
                else:
                    trio.lowlevel.start_thread_soon(
                        blocking, lambda _r: token.run_sync_soon(done.set), name="river-async-cancel")
            # The worker keeps the connection until it returns; we resume only then.
            return trio.lowlevel.Abort.FAILED

        trio.lowlevel.start_thread_soon(work, report, name="river-async-db")
        result = await trio.lowlevel.wait_task_rescheduled(abort)
        if cancel_done is not None:
            with trio.CancelScope(shield=True):
                await cancel_done.wait()
            if isinstance(result, outcome.Error):
                await trio.lowlevel.checkpoint()  # raises Cancelled unless the deadline moved
        return result.unwrap()  # type: ignore[no-any-return]


# ---------------------------------------------------------------- asyncio


class _ThreadCache:
    """Worker threads reused for blocking calls, as trio's thread cache: a call takes an idle
    thread or starts one, so a cancel request never queues behind the statements it cancels."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def start_soon(self, fn: Callable[[], None], name: str) -> None:
        """Run ``fn`` (which must not raise) in a worker thread."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put(fn)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            try:
                fn = inbox.get(timeout=IDLE_THREAD_TIMEOUT)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                continue  # taken just now: its call is on the way
            try:
                fn()
            except BaseException:  # e.g. the loop closed before the result could be handed back
                log.exception("river: a worker thread's call failed")
            with self._lock:
                self._idle.append(inbox)


class _AsyncioParkingLot:
    """trio's ``ParkingLot`` subset the job tasks use: ``park()``, ``unpark()`` (one, FIFO), ``bool``."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: deque[Any] = deque()

    def __bool__(self) -> bool:
        return bool(self._waiters)

    def unpark(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def park(self) -> None:
        import asyncio

        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.unpark()  # woken, then cancelled before resuming: the wake goes on
            else:
                waiter.cancel()
            raise


class AsyncioBackend:
    """asyncio's primitives (AnyIO's where asyncio has no faster one of its own)."""

    name = "asyncio"

    def __init__(self) -> None:
        import asyncio

        self._asyncio = asyncio
        self._get_running_loop = asyncio.get_running_loop
        self.checkpoint_if_cancelled: Callable[[], Awaitable[None]] = anyio.lowlevel.checkpoint_if_cancelled
        self.current_task: Callable[[], object] = asyncio.current_task
        self.ParkingLot: Callable[[], Any] = _AsyncioParkingLot
        self.CancelScope: Callable[..., Any] = anyio.CancelScope
        self.Event: Callable[[], Any] = anyio.Event
        self.cancelled: type[BaseException] = asyncio.CancelledError
        self.busy_error: type[Exception] = anyio.BusyResourceError
        self.would_block: tuple[type[BaseException], ...] = (anyio.WouldBlock,)
        self.closed_channel: tuple[type[BaseException], ...] = (anyio.BrokenResourceError,
                                                                anyio.ClosedResourceError)
        self._bases: weakref.WeakKeyDictionary[Any, tuple[datetime, float]] = weakref.WeakKeyDictionary()
        # The last loop's pair, kept beside the weak dictionary: a WeakKeyDictionary lookup makes a
        # weak reference each time, and utcnow() runs more than once per job.
        self._last_loop: Any = None  # a weak reference to that loop
        self._last_base: tuple[datetime, float] = (datetime.now(UTC), 0.0)
        self._threads = _ThreadCache()

    def current_time(self) -> float:
        return self._get_running_loop().time()

    def _base(self, loop: Any) -> tuple[datetime, float]:
        ref = self._last_loop
        if ref is not None and ref() is loop:
            return self._last_base
        found = self._bases.get(loop)
        if found is None:
            found = self._bases[loop] = (datetime.now(UTC), loop.time())
        self._last_loop, self._last_base = weakref.ref(loop), found
        return found

    def utcnow(self) -> datetime:
        """Now on the loop's clock: wall time at the loop's first call plus loop time since."""
        loop = self._get_running_loop()
        ref = self._last_loop
        if ref is not None and ref() is loop:  # _base()'s common case, without its call
            wall, start = self._last_base
        else:
            wall, start = self._base(loop)
        # timedelta(days, seconds): the same value as seconds=, without the keyword parsing.
        return wall + timedelta(0, loop.time() - start)

    def loop_deadline(self, when: datetime) -> float:
        wall, start = self._base(self._get_running_loop())
        return start + (when - wall).total_seconds()

    async def run_interruptible(self, work: Callable[[], T], interrupt: Interrupt) -> T:
        """``work()`` in a cached thread; a cancellation calls ``interrupt`` and still waits for ``work``."""
        asyncio, threads = self._asyncio, self._threads
        loop = asyncio.get_running_loop()
        done: Any = loop.create_future()  # an asyncio.Future of (value, error)

        def settle(value: Any, error: BaseException | None) -> None:
            if not done.done():
                done.set_result((value, error))

        def body() -> None:
            try:
                value, error = work(), None
            except BaseException as exc:
                value, error = None, exc
            loop.call_soon_threadsafe(settle, value, error)

        threads.start_soon(body, "river-async-db")
        try:
            value, error = await asyncio.shield(done)
        except asyncio.CancelledError:
            blocking = interrupt()
            with anyio.CancelScope(shield=True):
                if blocking is not None:
                    cancelled = loop.create_future()

                    def cancel_sent() -> None:
                        if not cancelled.done():
                            cancelled.set_result(None)

                    def cancel_body() -> None:
                        blocking()
                        loop.call_soon_threadsafe(cancel_sent)

                    threads.start_soon(cancel_body, "river-async-cancel")
                    await self._uncancellable(cancelled)
                value, error = await self._uncancellable(done)
            if error is not None:
                raise  # the cancellation: the statement was interrupted
            # It finished first: its result stands; AnyIO's scope cancels again at the next await.
            return value  # type: ignore[no-any-return]
        if error is not None:
            raise error
        return value  # type: ignore[no-any-return]

    async def _uncancellable(self, future: Any) -> Any:
        # A native task.cancel() inside AnyIO's shield still lands here: wait on regardless.
        while True:
            try:
                return await self._asyncio.shield(future)
            except self._asyncio.CancelledError:
                if future.done():
                    return future.result()


Backend = TrioBackend | AsyncioBackend  # one running loop's primitives (see the module docstring)


__all__ = ["AsyncioBackend", "Backend", "Event", "Lock", "TrioBackend", "current", "current_time",
           "loop_deadline", "named", "sleep", "utcnow", "wait_either", "wait_event"]


# ---------------------------------------------------------------- notifier (river_anyio.notifier)
# What the notifier takes from the loop where river_sync's takes threads (river_sync._backend's
# section of the same name): a dispatcher task behind a memory stream, the loop's socket wait
# in a cancel scope, and a worker thread for each blocking call.

checkpoint = anyio.lowlevel.checkpoint


async def run_blocking(fn: Callable[[], T]) -> T:
    """``fn()`` in a worker thread, waited for even when cancelled (a connection half-opened
    must not be abandoned)."""
    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=False)


class Stop:
    """A task is stopped by cancelling it: never set; ``sleep`` is the loop's (river_sync's
    is a flag its threads check)."""

    __slots__ = ()

    def is_set(self) -> bool:
        return False

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


TAKEN, FULL, CLOSED = "taken", "full", "closed"  # what Mailbox.put answers


class Mailbox(Generic[T]):
    """A bounded buffer one task drains, in order, into ``deliver`` while ``serve`` runs.

    ``put`` never waits: it answers ``TAKEN``, ``FULL`` (dropped) or ``CLOSED`` (dropped: no
    dispatcher, e.g. a poll that delivered while the notifier shut down)."""

    def __init__(self, size: int, deliver: Callable[[T], None]) -> None:
        self._size = size
        self._deliver = deliver
        self._send: Any = None  # the memory stream's send side while serve() runs

    def put(self, item: T) -> str:
        send = self._send
        if send is None:
            return CLOSED
        backend = current()
        try:
            send.send_nowait(item)
        except backend.would_block:
            return FULL
        except backend.closed_channel:
            return CLOSED
        return TAKEN

    async def serve(self, body: Callable[[], Awaitable[None]]) -> None:
        """Run the dispatcher task and ``body()`` together; both end when either does."""
        send, receive = anyio.create_memory_object_stream[T](self._size)
        self._send = send
        try:
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(self._drain, receive)
                    try:
                        await body()
                    finally:
                        group.cancel_scope.cancel()
            except BaseExceptionGroup as errors:
                # The task group is an implementation detail: callers see the error itself.
                if len(errors.exceptions) == 1:
                    raise errors.exceptions[0] from None
                raise
        finally:
            self._send = None
            send.close()

    async def _drain(self, receive: Any) -> None:
        async with receive:
            async for item in receive:
                self._deliver(item)


class SocketWait:
    """Waits for a socket to be readable until a deadline, cut short by ``wake()``: the wait runs
    in a cancel scope that ``wake`` cancels. ``open``/``close`` have nothing to do on a loop."""

    __slots__ = ("_scope",)

    def __init__(self) -> None:
        self._scope: anyio.CancelScope | None = None

    def open(self) -> None:
        """Nothing to open (river_sync's makes its wake-up socket pair)."""

    def close(self) -> None:
        """Nothing to close."""

    def wake(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def wait(self, fd: int, deadline: float, *, skip: bool = False) -> None:
        """Until ``fd`` is readable, ``deadline`` (on ``current_time``) passes or a wake; ``skip``:
        there is work already (a wake sent while no wait was on), return at the checkpoint."""
        with anyio.CancelScope(deadline=deadline) as scope:
            self._scope = scope
            if skip:
                scope.cancel()
            await anyio.wait_readable(fd)
        self._scope = None



# ---------------------------------------------------------------- pools (river_anyio.pools)
# What the pools take from the loop where river_sync's take threads: capacity limiters (a token
# per lease, so the worker threads never outnumber the connections), locks waited on in a cancel
# scope, shielded returns, the current task as a lock's owner.

Slots = anyio.CapacityLimiter


@asynccontextmanager
async def slot(slots: anyio.CapacityLimiter, timeout: float | None, what: str) -> AsyncIterator[None]:
    """One of ``slots`` for the block; TimeoutError naming ``what`` after ``timeout`` seconds."""
    # A token per lease, not per task: one task may hold several connections.
    borrower = object()
    with anyio.move_on_after(timeout) as scope:
        await slots.acquire_on_behalf_of(borrower)
    if scope.cancelled_caught:
        raise wait_timed_out(timeout, what)
    try:
        yield
    finally:
        slots.release_on_behalf_of(borrower)


def worker_slot(slots: anyio.CapacityLimiter) -> AbstractAsyncContextManager[None]:
    """A slot for the worker thread that runs a held connection's statements (no time limit)."""
    return slot(slots, None, "a worker thread")


def shielded() -> anyio.CancelScope:
    """A scope a cancellation does not interrupt: a connection is returned, never half-returned."""
    return anyio.CancelScope(shield=True)


async def acquire_lock(lock: anyio.Lock, timeout: float | None) -> bool:
    """Take ``lock`` within ``timeout`` seconds (None: no bound); whether it was taken."""
    with anyio.move_on_after(timeout) as scope:
        await lock.acquire()
    return not scope.cancelled_caught


def current_owner() -> object:
    """Who holds what this code takes: the running task (a thread's id in river_sync). The loop's
    own task object: anyio.get_current_task() builds a TaskInfo each call, once per writer lease."""
    return current().current_task()
