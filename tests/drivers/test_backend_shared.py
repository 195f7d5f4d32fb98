"""The primitives generated river_sync code calls under river_anyio's names: ``river_sync._backend``
(threads) and the module-level ``river_anyio._backend`` ones (each event loop) behave alike."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from datetime import UTC
from typing import Any

import anyio

from river_anyio import _backend as async_backend
from river_protocol.errors import RiverError
from river_sync import _backend as sync_backend

Run = Callable[[Callable[[], Awaitable[Any]]], Any]  # the run fixture (tests/drivers/conftest.py)


def test_sync_wait_event_says_whether_the_event_is_set() -> None:
    event = sync_backend.Event()
    assert sync_backend.wait_event(event, 0) is False
    event.set()
    assert sync_backend.wait_event(event, 0) is True
    assert sync_backend.wait_event(event, None) is True


def test_sync_wait_either_returns_once_either_is_set() -> None:
    first, second = sync_backend.Event(), sync_backend.Event()
    second.set()
    sync_backend.wait_either(first, second)  # the second alone ends it
    first.set()
    second.clear()
    sync_backend.wait_either(first, second)  # the first alone too
    late = sync_backend.Event()
    setter = threading.Thread(target=late.set)
    setter.start()
    sync_backend.wait_either(late, sync_backend.Event())  # set from another thread meanwhile
    setter.join()


def test_sync_join_leaves_its_own_thread_to_wait_ended() -> None:
    # A stop() from inside a thread cannot join it: join hands the thread back, and wait_ended
    # (before a restart) waits for it from another thread and refuses in it.
    ready, go = threading.Event(), threading.Event()
    seen: list[Any] = []

    def inside() -> None:
        me = threading.current_thread()
        seen.append(sync_backend.join(me) is me)
        try:
            sync_backend.wait_ended(me, "the thing")
        except RiverError as exc:
            seen.append(str(exc))
        ready.set()
        go.wait()

    thread = threading.Thread(target=inside)
    thread.start()
    assert ready.wait(10)
    assert seen == [True, "the thing was stopped from its own thread and cannot start again from it"
                    " (it would wait for itself to end): start it from another thread"]
    go.set()
    sync_backend.wait_ended(thread, "the thing")
    assert not thread.is_alive()
    assert sync_backend.join(thread) is None and sync_backend.join(None) is None
    sync_backend.wait_ended(None, "the thing")


def test_sync_clocks_and_backend_object() -> None:
    assert sync_backend.utcnow().tzinfo is UTC
    first = sync_backend.current_time()
    assert sync_backend.current_time() >= first
    backend = sync_backend.current()
    assert backend is sync_backend.current() and backend.name == "threads"
    assert isinstance(backend.Event(), threading.Event)
    assert backend.utcnow().tzinfo is UTC and backend.current_time() >= first
    with sync_backend.Lock():
        pass


def test_async_shared_names_behave_as_the_sync_ones(run: Run) -> None:
    async def main() -> None:
        event = async_backend.Event()
        assert await async_backend.wait_event(event, 0) is False
        event.set()
        assert await async_backend.wait_event(event, 0) is True  # set: True even with no time left
        assert await async_backend.wait_event(event, None) is True
        first, second = async_backend.Event(), async_backend.Event()
        second.set()
        await async_backend.wait_either(first, second)
        late = async_backend.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(async_backend.wait_either, late, async_backend.Event())
            await anyio.wait_all_tasks_blocked()
            late.set()
        before = async_backend.current_time()
        await async_backend.sleep(0)
        assert async_backend.current_time() >= before
        async with async_backend.Lock():
            pass

    run(main)
