"""A stand-in ``river_asyncio`` for the tools' tests, until the real package is on this branch.

``river_sync``'s threaded client behind the async client's API (``run`` with a
task status, ``stop``, ``stop_and_cancel``, ``wait``, ``insert``, ``subscribe``,
``async with``) and ``ANYIO_BACKEND = "asyncio"``. Every async method first checks
that it runs in an asyncio event loop, so a tool that dispatched it to the wrong
backend fails; ``run`` says on stderr which event loop module ran it (asyncio's
own or uvloop) and how many trio modules the process has loaded (an asyncio
process should load none). Put this directory first on ``PYTHONPATH`` to use it. It tests the
tools' dispatch, not an asyncio client: jobs run on river_sync's threads.
"""

from __future__ import annotations

import asyncio
import functools
import math
import sys
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import anyio
import sniffio

import river_sync
from river_db.events import SubscriptionTimeoutError
from river_sync import *  # noqa: F403  (the package mirrors river_sync's names)

T = TypeVar("T")
POLL = 0.01  # seconds between looks at the threaded client


def _on_asyncio() -> None:
    running = sniffio.current_async_library()
    if running != "asyncio":
        raise RuntimeError(f"fake river_asyncio used under {running}, not asyncio")


async def _in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    _on_asyncio()
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


class Subscription:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def dropped(self) -> int:
        return int(self._inner.dropped)

    def get_nowait(self) -> Any:
        return self._inner.get_nowait()

    def close(self) -> None:
        self._inner.close()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Any:
        _on_asyncio()
        while True:
            try:
                return self._inner.get_nowait()
            except SubscriptionTimeoutError:
                await anyio.sleep(POLL / 10)
            except EOFError:
                raise StopAsyncIteration from None


class Client:
    ANYIO_BACKEND: ClassVar[str] = "asyncio"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._sync = river_sync.Client(*args, **kwargs)
        self._database_arg = args[0] if args else kwargs.get("database")  # as river_trio keeps it
        self._subscriptions: list[Subscription] = []

    def __getattr__(self, name: str) -> Any:  # configure, queues, jobs, client_id, dialect_name, state
        return getattr(self._sync, name)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        _on_asyncio()
        loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
        trio = sorted(name for name in sys.modules if name == "trio" or name.startswith("trio."))
        print(f"fake river_asyncio: running on {loop}; trio modules loaded: {len(trio)}", file=sys.stderr,
              flush=True)
        await _in_thread(self._sync.start)
        task_status.started()
        await self.wait()

    async def stop(self, timeout: Any = None) -> None:
        await _in_thread(self._sync.stop, timeout=timeout)
        for sub in self._subscriptions:  # as the async clients do: stopping ends subscriptions
            sub.close()

    async def stop_and_cancel(self) -> None:
        await _in_thread(self._sync.stop_and_cancel)

    async def wait(self, timeout: float | None = None) -> bool:
        _on_asyncio()
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            while not self._sync.wait(0):
                await anyio.sleep(POLL)
        return bool(self._sync.wait(0))

    async def aclose(self) -> None:
        await _in_thread(self._sync.stop)

    async def insert(self, *args: Any, **kwargs: Any) -> Any:
        return await _in_thread(self._sync.insert, *args, **kwargs)

    async def insert_many(self, *args: Any, **kwargs: Any) -> Any:
        return await _in_thread(self._sync.insert_many, *args, **kwargs)

    def subscribe(self, *args: Any, **kwargs: Any) -> Subscription:
        sub = Subscription(self._sync.subscribe(*args, **kwargs))
        self._subscriptions.append(sub)
        return sub

    async def __aenter__(self) -> Client:
        await _in_thread(self._sync.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
