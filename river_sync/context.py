"""What a worker receives besides its args: ``WorkContext`` and its cancellation token.

Python threads can't be interrupted, so cancellation is cooperative: the
client *sets* the token (job timeout, remote cancel, client stop) and the
worker checks it (``ctx.cancelled``, ``ctx.token.wait(seconds)``,
``ctx.token.raise_if_cancelled()``). A worker that ignores its token keeps
its thread and its queue slot until it returns.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from river_db.work_context import WorkContextBase
from river_protocol.job import JobRow
from river_protocol.work import CancelCause, WorkCancelled, complete_in_tx_update
from river_sync.resumable import SyncResumableSteps

if TYPE_CHECKING:
    from river_sync.client import Client

# One lock for every token rather than one per token (per job): it is held only to read or set
# a token's cause and event, never across a wait or a call out, so tokens barely contend for it.
_TOKEN_LOCK = threading.Lock()


class CancellationToken:
    """A cancellation flag that remembers why it was set (the first cause wins).

    The ``threading.Event`` behind ``wait()`` is made on first use: most jobs never
    wait on their token, and an Event (a Condition and two locks) per job showed up
    in the burn-down profile.
    """

    __slots__ = ("_event", "cause")

    def __init__(self) -> None:
        self._event: threading.Event | None = None
        self.cause: CancelCause | None = None

    def cancel(self, cause: CancelCause) -> bool:
        """Set the token; False when it was already set (the earlier cause is kept)."""
        with _TOKEN_LOCK:
            if self.cause is not None:
                return False
            self.cause = cause
            event = self._event
        if event is not None:
            event.set()
        return True

    def is_set(self) -> bool:
        return self.cause is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, waking early when cancelled; True if cancelled."""
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


class WorkContext(SyncResumableSteps, WorkContextBase):
    """Per-run context: the job row, decoded args, the client and the cancellation token.

    Resumable steps (``step``, ``cursor``, ``set_cursor``, ``checkpoint``) come
    from ``river_sync.resumable.SyncResumableSteps``.
    """

    client: Client
    token: CancellationToken

    def complete_in(self, tx: Any) -> JobRow | None:
        """Mark this job completed inside the caller's transaction ``tx`` (docs/protocol.md §7.5).

        ``tx`` is a psycopg connection, SQLAlchemy Connection/Session or sqlite3
        connection with an open transaction; the job is completed only if it
        commits. Returns the row as updated (None if the job no longer exists).
        """
        from river_db.caller_tx import executor_for_caller_tx
        from river_protocol.intents import SetStateIfRunning

        update = complete_in_tx_update(self.job, datetime.now(UTC), self.metadata_updates)
        executor = executor_for_caller_tx(tx, schema=self.client.schema)
        rows = executor.run(SetStateIfRunning(updates=(update,)))
        self.completed_in_tx = True
        return rows[0] if rows else None
