"""One synchronous face for every driver, so a behavioural test is written once.

``SyncHarness`` hands out ``river_sync.Client`` objects unchanged. ``AsyncHarness``
runs an event loop (trio for ``river_trio``, asyncio for ``river_asyncio``, both
through ``anyio.run``) in a background thread and hands out ``AsyncClientFace``
facades: every call goes into that loop (``anyio.from_thread.run``) and blocks
the calling thread until it is done, so the test reads exactly like a
``river_sync`` test. Clients run as tasks of the harness's task group
(``tg.start(client.run)``); an exception escaping a client's ``run`` is
recorded and raised again when the harness closes (the test's teardown).

Workers are written once as plain functions:

* ``h.worker(fn)``: on an async driver, a non-blocking ``fn`` becomes an
  ``async def`` running on the loop (the async path: a cancel scope around it);
  ``threaded=True`` keeps it a sync worker in a thread, as it must be when it
  blocks (waits on a ``threading.Event``).
* ``h.cancellable_worker(entered, causes)``: waits until its run is cancelled,
  in each driver's own way (the token in a thread; ``anyio.sleep`` interrupted
  by the run's cancel scope).
* ``h.call(fn, ...)`` calls a client or context method from a worker thread
  or the test (awaited in the loop when it is async).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

import river_sync
from river_protocol.lifecycle import ClientState
from river_protocol.workers import Workers
from river_sync.events import Event

WAIT = 15.0  # upper bound for anything a client does; never a sleep


def _arity(fn: Callable[..., Any]) -> int:
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


class SyncHarness:
    driver = "sync"

    def __init__(self) -> None:
        self._clients: list[river_sync.Client] = []

    def client(self, database: Any, **kwargs: Any) -> river_sync.Client:
        client = river_sync.Client(database, **kwargs)
        self._clients.append(client)
        return client

    def raw(self, client: Any) -> Any:
        return client

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def worker(self, fn: Callable[..., Any], *, threaded: bool = False) -> Callable[..., Any]:
        return fn

    def workers(self, fn: Callable[..., Any], args_type: type, *, threaded: bool = False,
                **kwargs: Any) -> Workers:
        workers = Workers()
        workers.job(args_type, **kwargs)(self.worker(fn, threaded=threaded))
        return workers

    def cancellable_worker(
        self, entered: threading.Event, causes: list[Any] | None = None
    ) -> Callable[..., Any]:
        def work(ctx: Any, args: Any) -> None:
            entered.set()
            try:
                ctx.token.wait(WAIT)
                ctx.raise_if_cancelled()
            finally:
                if causes is not None:
                    causes.append(ctx.cancel_cause)

        return work

    def gated_worker(self, gate: Any, then: Callable[[Any], None]) -> Callable[..., Any]:
        """Sets ``gate.entered``, waits for ``gate.release`` (not for its token), then ``then(args)``."""
        def work(args: Any) -> None:
            gate.entered.set()
            assert gate.release.wait(WAIT)
            then(args)

        return work

    def callback(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """A client callback (error handler) in the driver's own style."""
        return fn

    def middleware(self, before: Callable[[], None], after: Callable[[], None]) -> Callable[..., Any]:
        def mw(ctx: Any, args: Any, call_next: Any) -> Any:
            before()
            try:
                return call_next(ctx, args)
            finally:
                after()

        return mw

    def insert_middleware(self, change: Callable[[Any], Any]) -> Callable[..., Any]:
        """Insert middleware passing ``change(params)`` on, in the driver's own style."""
        def mw(params: Any, call_next: Any) -> Any:
            return call_next(change(params))

        return mw

    def transaction(self, client: Any) -> contextlib.AbstractContextManager[Any]:
        return river_sync.transaction(client)

    def close(self) -> None:
        for client in self._clients:
            client.stop()


# ---------------------------------------------------------------- trio and asyncio


def client_class(driver: str) -> Any:
    """The async driver's ``Client`` class (imported only when asked: asyncio must not load trio)."""
    if driver == "trio":
        import river_trio

        return river_trio.Client
    import river_asyncio

    return river_asyncio.Client


class AsyncHarness:
    """The blocking face over ``river_trio`` (``driver="trio"``) or ``river_asyncio`` (``"asyncio"``)."""

    def __init__(self, driver: str) -> None:
        self.driver = driver
        self._client_class = client_class(driver)
        self._ready = threading.Event()
        self._errors: list[BaseException] = []
        self._clients: list[Any] = []
        self._thread = threading.Thread(target=self._loop, name=f"{driver}-harness", daemon=True)
        self._thread.start()
        if not self._ready.wait(WAIT):
            raise RuntimeError(f"the {driver} harness loop did not start")

    def _loop(self) -> None:
        try:
            anyio.run(self._main, backend=self.driver)
        except BaseException as exc:  # reported by close()
            self._errors.append(exc)
            self._ready.set()

    async def _main(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._shutdown = anyio.Event()
        async with anyio.create_task_group() as nursery:
            self._nursery = nursery
            self._ready.set()
            await self._shutdown.wait()
            nursery.cancel_scope.cancel()

    # ---------------------------------------------------------------- calling into the loop

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` in the loop (awaiting it when it is async) and return its result here."""

        async def call() -> Any:
            result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result

        return anyio.from_thread.run(call, token=self._token)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self.run(fn, *args, **kwargs)

    # ---------------------------------------------------------------- clients

    def client(self, database: Any, **kwargs: Any) -> AsyncClientFace:
        raw = self.run(self._client_class, database, **kwargs)
        self._clients.append(raw)
        return AsyncClientFace(self, raw)

    def raw(self, client: Any) -> Any:
        return client.raw if isinstance(client, AsyncClientFace) else client

    async def _start(self, raw: Any) -> None:
        async def guarded(task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            started = False

            def report() -> None:
                nonlocal started
                started = True
                task_status.started()

            status = _Status(report)
            try:
                await raw.run(task_status=status)  # type: ignore[arg-type]
            except Exception as exc:
                if not started:
                    raise
                self._errors.append(exc)
            except BaseExceptionGroup as group:
                if not started:
                    raise
                self._errors.append(group)

        await self._nursery.start(guarded)

    # ---------------------------------------------------------------- workers

    def worker(self, fn: Callable[..., Any], *, threaded: bool = False) -> Callable[..., Any]:
        if threaded or inspect.iscoroutinefunction(fn):
            return fn
        takes_context = _arity(fn) != 1

        async def on_the_loop(ctx: Any, args: Any) -> Any:
            return fn(ctx, args) if takes_context else fn(args)

        return on_the_loop

    def workers(self, fn: Callable[..., Any], args_type: type, *, threaded: bool = False,
                **kwargs: Any) -> Workers:
        workers = Workers()
        workers.job(args_type, **kwargs)(self.worker(fn, threaded=threaded))
        return workers

    def cancellable_worker(
        self, entered: threading.Event, causes: list[Any] | None = None
    ) -> Callable[..., Any]:
        async def work(ctx: Any, args: Any) -> None:
            entered.set()
            try:
                await anyio.sleep(WAIT)
            finally:
                if causes is not None:
                    causes.append(ctx.cancel_cause)

        return work

    def gated_worker(self, gate: Any, then: Callable[[Any], None]) -> Callable[..., Any]:
        async def work(args: Any) -> None:
            gate.entered.set()
            with anyio.fail_after(WAIT):
                while not gate.release.is_set():  # on the loop: a soft stop must not interrupt it
                    await anyio.sleep(0.005)
            then(args)

        return work

    def callback(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        async def on_the_loop(*args: Any) -> Any:
            await anyio.lowlevel.checkpoint()
            return fn(*args)

        return on_the_loop

    def middleware(self, before: Callable[[], None], after: Callable[[], None]) -> Callable[..., Any]:
        async def mw(ctx: Any, args: Any, call_next: Any) -> Any:
            before()
            try:
                return await call_next(ctx, args)
            finally:
                after()

        return mw

    def insert_middleware(self, change: Callable[[Any], Any]) -> Callable[..., Any]:
        async def mw(params: Any, call_next: Any) -> Any:
            await anyio.lowlevel.checkpoint()
            return await call_next(change(params))

        return mw

    # ---------------------------------------------------------------- transactions

    @contextlib.contextmanager
    def transaction(self, client: Any) -> Iterator[Any]:
        """The driver's ``transaction`` held open by a task of the loop while the block runs here."""
        raw = self.raw(client)
        release = self.run(anyio.Event)
        finished = threading.Event()
        box: dict[str, Any] = {}

        class _Rollback(Exception):
            pass

        async def holder(task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> None:
            from river_anyio.transactions import transaction  # river_trio's and river_asyncio's

            try:
                async with transaction(raw) as conn:
                    task_status.started(conn)
                    await release.wait()
                    if box.get("rollback"):
                        raise _Rollback
            except _Rollback:
                pass
            except Exception as exc:
                box["error"] = exc
            finally:
                finished.set()

        conn = self.run(self._nursery.start, holder)
        try:
            yield conn
        except BaseException:
            box["rollback"] = True
            self.run(release.set)
            finished.wait(WAIT)
            raise
        self.run(release.set)
        if not finished.wait(WAIT):
            raise TimeoutError("the transaction did not end")
        if "error" in box:
            raise box["error"]

    # ---------------------------------------------------------------- shutdown

    def close(self) -> None:
        try:
            for raw in self._clients:
                if self._thread.is_alive() and not raw._stopped.is_set():
                    self.run(raw.stop_and_cancel if raw._stop_begun else raw.stop)
        finally:
            if self._thread.is_alive():
                anyio.from_thread.run_sync(self._shutdown.set, token=self._token)
            self._thread.join(WAIT)
        if self._errors:
            raise self._errors[0]


class _Status:
    """A task_status that tells the harness the client's run has started."""

    def __init__(self, report: Callable[[], None]) -> None:
        self._report = report

    def started(self, value: Any = None) -> None:
        self._report()


class _Proxy:
    """``client.jobs`` / ``queues`` / ``periodic_jobs``: every method runs (and is awaited) in the loop."""

    def __init__(self, harness: AsyncHarness, target: Any) -> None:
        self._harness = harness
        self._target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value
        return functools.partial(self._harness.run, value)

    def __len__(self) -> int:
        return int(self._harness.run(len, self._target))


class AsyncSubscriptionFace:
    """``river_sync.Subscription``'s blocking face over an async subscription."""

    def __init__(self, harness: AsyncHarness, sub: Any) -> None:
        self._harness = harness
        self._sub = sub

    @property
    def dropped(self) -> int:
        return self._sub.dropped

    @property
    def closed(self) -> bool:
        return self._sub.closed

    def get(self, timeout: float | None = None) -> Event:
        result: Event = self._harness.run(self._sub.get, timeout)
        return result

    def get_nowait(self) -> Event:
        result: Event = self._harness.run(self._sub.get_nowait)
        return result

    def __iter__(self) -> Iterator[Event]:
        while True:
            try:
                yield self.get()
            except EOFError:
                return

    def close(self) -> None:
        self._harness.run(self._sub.close)


class AsyncClientFace:
    """``river_sync.Client``'s blocking face over an async client running in the harness loop."""

    def __init__(self, harness: AsyncHarness, raw: Any) -> None:
        self._harness = harness
        self.raw = raw
        self.jobs = _Proxy(harness, raw.jobs)
        self.queues = _Proxy(harness, raw.queues)
        self.workflows = _Proxy(harness, raw.workflows)
        self.periodic_jobs = _Proxy(harness, raw.periodic_jobs)

    @property
    def client_id(self) -> str:
        return self.raw.client_id

    @property
    def schema(self) -> str | None:
        return self.raw.schema

    @property
    def is_leader(self) -> bool:
        return self.raw.is_leader

    @property
    def state(self) -> ClientState:
        return self.raw.state

    @property
    def dialect_name(self) -> str:
        return self.raw.dialect_name

    def stats(self) -> Any:
        return self._harness.run(self.raw.stats)

    def insert(self, args: Any, opts: Any = None, *, tx: Any = None) -> Any:
        return self._harness.run(self.raw.insert, args, opts, tx=tx)

    def insert_many(self, items: Iterable[Any], *, tx: Any = None) -> Any:
        return self._harness.run(self.raw.insert_many, list(items), tx=tx)

    def insert_workflow(self, workflow: Any, *, tx: Any = None) -> Any:
        return self._harness.run(self.raw.insert_workflow, workflow, tx=tx)

    def wait_job(self, job: Any, *, timeout: Any = None) -> Any:
        return self._harness.run(self.raw.wait_job, job, timeout=timeout)

    def wait_workflow(self, workflow: Any, *, timeout: Any = None) -> Any:
        return self._harness.run(self.raw.wait_workflow, workflow, timeout=timeout)

    def subscribe(self, kinds: Iterable[Any] | None = None, maxsize: int = 1000) -> AsyncSubscriptionFace:
        return AsyncSubscriptionFace(self._harness, self._harness.run(self.raw.subscribe, kinds, maxsize))

    def configure(self, **kwargs: Any) -> None:
        self._harness.run(self.raw.configure, **kwargs)  # type: ignore[attr-defined]

    def start(self) -> None:
        self._harness.run(self._harness._start, self.raw)

    def stop(self, timeout: timedelta | float | None = None) -> None:
        self._harness.run(self.raw.stop, timeout)

    def stop_and_cancel(self) -> None:
        self._harness.run(self.raw.stop_and_cancel)

    def wait(self, timeout: float | None = None) -> bool:
        result: bool = self._harness.run(self.raw.wait, timeout)
        return result

    def wait_leader(self, value: bool = True, timeout: float | None = None) -> bool:
        result: bool = self._harness.run(self.raw.wait_leader, value, timeout)
        return result

    def __enter__(self) -> AsyncClientFace:
        if self.raw.state is ClientState.NEW:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


Harness = SyncHarness | AsyncHarness

DRIVERS = ("sync", "trio", "asyncio")


def make_harness(driver: str) -> Harness:
    if driver == "sync":
        return SyncHarness()
    if driver in ("trio", "asyncio"):
        return AsyncHarness(driver)
    raise ValueError(f"unknown driver {driver!r}")
