"""``run_until_signalled(client)``: a worker process's main loop with River's graceful shutdown.

The first SIGINT or SIGTERM starts a soft stop: no new jobs are fetched and
running jobs may finish. A second one escalates to a hard stop: every running
job's cancellation token is set, and jobs that give up (``WorkCancelled``)
go back to ``available`` without using an attempt. Like Go River's graceful
shutdown example, but Python threads can't be killed: a worker that ignores
its token still runs to its end, so a third signal is no faster than the second.

It must be called from the main thread (only there can Python install signal
handlers); the previous handlers are restored before it returns.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

from river_protocol.lifecycle import ClientState

if TYPE_CHECKING:
    from river_sync.client import Client

log = logging.getLogger(__name__)

DEFAULT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_until_signalled(
    client: Client,
    *,
    signals: Iterable[signal.Signals] = DEFAULT_SIGNALS,
    soft_stop_timeout: float | None = None,
) -> str:
    """Start ``client`` (if needed) and run until it has stopped after a signal.

    ``soft_stop_timeout``: seconds a soft stop may take before it escalates on
    its own (default: the client's ``soft_stop_timeout``, else wait forever).
    Returns ``"soft"`` or ``"hard"``: how the stop ended up.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_until_signalled must run in the main thread (signal handlers)")
    received: list[int] = []
    how = ["soft"]

    def stop_soft() -> None:
        try:
            client.stop(timeout=soft_stop_timeout)
        except Exception:
            log.exception("river: soft stop failed")

    def stop_hard() -> None:
        try:
            client.stop_and_cancel()
        except Exception:
            log.exception("river: hard stop failed")

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        name = signal.Signals(signum).name
        # The handler runs on the main thread, which must stay free to notice the stop.
        if len(received) == 1:
            log.warning("river: %s received: stopping after running jobs finish (again to cancel them)", name)
            threading.Thread(target=stop_soft, name="river-soft-stop", daemon=True).start()
        elif len(received) == 2:
            how[0] = "hard"
            log.warning("river: %s received again: cancelling running jobs", name)
            threading.Thread(target=stop_hard, name="river-hard-stop", daemon=True).start()
        else:
            log.warning("river: %s received: still waiting for workers that ignore cancellation", name)

    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, on_signal)
        if client.state is ClientState.NEW:
            client.start()
        # A bounded wait lets the interpreter run signal handlers promptly on every platform.
        while not client.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return how[0]
