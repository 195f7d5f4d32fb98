"""Running an async River client (``river_trio``, ``river_asyncio``) from the tools, on AnyIO.

Both async clients have the same API (``await task_group.start(client.run)``,
``await client.stop()``, ``await client.stop_and_cancel()``, ``await client.wait()``)
and name the AnyIO backend they need in the class attribute ``ANYIO_BACKEND``
("trio" or "asyncio"). A client without that attribute is a ``river_trio`` one
from before it was added, so it counts as "trio". Nothing here imports trio or
``river_asyncio``: an asyncio worker process loads no trio module.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import signal
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio

log = logging.getLogger("river.work")

DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGTERM)
BACKENDS = ("trio", "asyncio")
LOOPS = ("default", "uvloop")  # the asyncio backend's event loops

T = TypeVar("T")

PACKAGES = {"trio": "river_trio", "asyncio": "river_asyncio"}  # backend -> the package of its Client


class DriverUnavailableError(RuntimeError):
    """The River package for an async backend cannot be imported here."""


def client_package(backend: str, *, needed_by: str | None = None) -> Any:
    """The River package whose Client runs on ``backend``, imported only now (so an asyncio
    process loads no trio); ``DriverUnavailableError`` when it is not installed, saying that
    ``needed_by`` (default: "the <backend> client") needs it."""
    package = PACKAGES.get(backend)
    if package is None:
        raise ValueError(f"no River client for {backend!r}; backends: {', '.join(PACKAGES)}")
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as exc:
        if exc.name != package:
            raise
        needer = needed_by or f"the {backend} client"
        raise DriverUnavailableError(f"{package} is not installed: {needer} needs it") from None

# What makes an object an async River client, as far as the tools use one.
_ASYNC_METHODS = ("run", "stop", "stop_and_cancel", "wait")


def is_async_client(value: Any) -> bool:
    """True for a ``river_trio`` / ``river_asyncio`` Client (duck-typed: its lifecycle methods are async)."""
    if isinstance(value, type):
        return False
    return all(inspect.iscoroutinefunction(getattr(value, name, None)) for name in _ASYNC_METHODS)


def backend_of(client: Any) -> str:
    """The AnyIO backend ``client`` (or a client class) runs on: its class's ``ANYIO_BACKEND``,
    else "trio"."""
    cls = client if isinstance(client, type) else type(client)
    backend = getattr(cls, "ANYIO_BACKEND", "trio")
    if backend not in BACKENDS:
        raise ValueError(f"{cls.__qualname__}.ANYIO_BACKEND is {backend!r}, not one of {BACKENDS}")
    return str(backend)


def backend_options(backend: str, loop: str = "default") -> dict[str, Any]:
    """``anyio.run``'s ``backend_options`` for ``loop`` (``uvloop`` only exists for asyncio)."""
    if loop not in LOOPS:
        raise ValueError(f"loop must be one of {LOOPS}, got {loop!r}")
    if loop == "default":
        return {}
    if backend != "asyncio":
        raise ValueError(f"--loop {loop} is an asyncio event loop; a {backend} client runs on trio's own")
    return {"use_uvloop": True}


def run(fn: Callable[..., Awaitable[T]], *args: Any, backend: str, loop: str = "default") -> T:
    """``anyio.run(fn, *args)`` on ``backend`` (with ``loop`` for asyncio)."""
    return anyio.run(fn, *args, backend=backend, backend_options=backend_options(backend, loop))


async def run_until_signalled(
    client: Any,
    *,
    signals: Iterable[signal.Signals] = DEFAULT_SIGNALS,
    soft_stop_timeout: float | None = None,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> str:
    """Run ``client`` until it has stopped after a signal; returns ``"soft"`` or ``"hard"``.

    River's graceful shutdown, as ``river_sync.run_until_signalled`` and
    ``river_trio.run_until_signalled`` do it: the first SIGINT/SIGTERM is a soft
    stop (no new fetches, running jobs finish), the second a hard stop (running
    jobs are cancelled and go back to ``available``), a third only says it is
    still waiting. On either backend; it must run in the main thread.
    ``task_status``: started once the client works and the signals are received.
    """
    how = "soft"
    with anyio.open_signal_receiver(*signals) as receiver:
        async with anyio.create_task_group() as tg:
            await tg.start(client.run)
            with anyio.CancelScope() as listening:
                tg.start_soon(_end_when_stopped, client, listening)
                task_status.started()
                received = 0
                async for signum in receiver:
                    received += 1
                    name = signal.Signals(signum).name
                    if received == 1:
                        log.warning("river: %s received: stopping after running jobs finish "
                                    "(again to cancel them)", name)
                        tg.start_soon(client.stop, soft_stop_timeout)
                    elif received == 2:
                        how = "hard"
                        log.warning("river: %s received again: cancelling running jobs", name)
                        tg.start_soon(client.stop_and_cancel)
                    else:
                        log.warning("river: %s received: still waiting for workers that ignore "
                                    "cancellation", name)
    return how


async def _end_when_stopped(client: Any, listening: anyio.CancelScope) -> None:
    await client.wait()
    listening.cancel()


__all__ = ["BACKENDS", "LOOPS", "PACKAGES", "DriverUnavailableError", "backend_of", "backend_options",
           "client_package", "is_async_client", "run", "run_until_signalled"]
