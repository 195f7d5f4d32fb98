"""``await run_until_signalled(client)``: an async worker process's main loop with River's graceful shutdown.

The first SIGINT or SIGTERM starts a soft stop: no new jobs are fetched and
running jobs may finish. A second one escalates to a hard stop: running async
workers are cancelled at their next checkpoint and their jobs go back to
``available`` without using an attempt (sync workers are told through their
token). Signals are received with ``anyio.open_signal_receiver``, so this
must run in the main thread, as trio and asyncio require for signal handling.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterable
from typing import TYPE_CHECKING

import anyio
import anyio.abc

if TYPE_CHECKING:
    from river_anyio.client import Client

log = logging.getLogger(__name__)

DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def run_until_signalled(
    client: Client,
    *,
    signals: Iterable[signal.Signals] = DEFAULT_SIGNALS,
    soft_stop_timeout: float | None = None,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> str:
    """Run ``client`` until it has stopped after a signal; returns ``"soft"`` or ``"hard"``.

    ``soft_stop_timeout``: seconds a soft stop may take before it escalates on
    its own (default: the client's ``soft_stop_timeout``, else wait forever).
    ``task_status`` lets ``nursery.start`` wait until the client works and the
    signal handlers are installed.
    """
    how = "soft"
    with anyio.open_signal_receiver(*signals) as receiver:
        async with anyio.create_task_group() as nursery:
            await nursery.start(client.run)
            with anyio.CancelScope() as listening:
                nursery.start_soon(_end_when_stopped, client, listening)
                task_status.started()
                received = 0
                async for signum in receiver:
                    received += 1
                    name = signal.Signals(signum).name
                    if received == 1:
                        log.warning("river: %s received: stopping after running jobs finish "
                                    "(again to cancel them)", name)
                        nursery.start_soon(client.stop, soft_stop_timeout)
                    elif received == 2:
                        how = "hard"
                        log.warning("river: %s received again: cancelling running jobs", name)
                        nursery.start_soon(client.stop_and_cancel)
                    else:
                        log.warning("river: %s received: still waiting for workers that ignore cancellation",
                                    name)
    return how


async def _end_when_stopped(client: Client, listening: anyio.CancelScope) -> None:
    await client.wait()
    listening.cancel()
