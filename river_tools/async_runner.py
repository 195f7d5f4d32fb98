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
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

# The graceful-shutdown loop is the async clients' own (first signal a soft stop, second a hard
# stop, a third only logs). river_anyio imports no trio unless it runs under trio.
from river_anyio.signals import DEFAULT_SIGNALS, run_until_signalled

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


__all__ = ["BACKENDS", "DEFAULT_SIGNALS", "LOOPS", "PACKAGES", "DriverUnavailableError", "backend_of",
           "backend_options", "client_package", "is_async_client", "run", "run_until_signalled"]
