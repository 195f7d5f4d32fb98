"""Inline mode: ``insert`` runs the job at once, in the caller (Loco's "foreground blocking").

For tests and scripts that want a job's effect synchronously::

    inline = InlineClient(workers)                 # no database: rows kept in memory
    inline = InlineClient(workers, "sqlite:///x")  # rows recorded in a migrated database
    inline = inline_client(client)                 # borrow a client's database and settings

    result = inline.insert(SendEmail(to="a@b.c"))
    result.job.state          # the final row, as a client's insert result has it
    result.work.output        # the WorkResult of the run (None when a duplicate was skipped)

Every insert runs exactly once, whatever its schedule (scheduled and pending
jobs too): a failure leaves the job retryable (or available) for a real
client to pick up later, and is not retried inline. With a database, inserts
go through the real client (unique options apply; a skipped duplicate is not
run), and the run is ``work_with_client``. In memory, ids count from 1 and
unique options are not enforced.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from river_db.testing.inline import InlineBase, InlineResult, inline_settings
from river_protocol.client_core import InsertManyParams
from river_protocol.options import InsertOpts
from river_sync.testing.work import work_once, work_with_client

if TYPE_CHECKING:
    from river_sync.client import Client


class InlineClient(InlineBase):
    """Runs each inserted job immediately in the calling thread (see the module docstring).

    ``database`` (URL, SQLite path, pool, Engine or ``Database``, already
    migrated) makes the rows real: an insert-only ``river_sync.Client`` is
    opened on it and closed by ``close()``. Without one, rows live in memory
    (``jobs()``, ``get_job()``). Keyword settings are the client's.
    """

    def _new_client(self, database: Any, **settings: Any) -> Client:
        from river_sync.client import Client

        return Client(database, **settings)

    @property
    def client(self) -> Client | None:
        """The real client behind a database-backed inline client (None in memory)."""
        return self._client  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- inserts

    def insert(self, args: Any, opts: InsertOpts | None = None, *, tx: Any = None) -> InlineResult:
        """Insert ``args`` and run its worker now; returns the final row and the run.

        ``tx`` (database mode only) runs the insert, the claim and the outcome
        in the caller's transaction.
        """
        if self._in_memory(tx):
            return self._insert_in_memory(args, opts)
        inserted = self._client.insert(args, opts, tx=tx)
        if inserted.unique_skipped_as_duplicate:
            return InlineResult(inserted.job, True, None)
        work = work_with_client(self._client, inserted.job, tx=tx)
        return InlineResult(work.job, False, work)

    def insert_many(self, items: Iterable[Any], *, tx: Any = None) -> list[InlineResult]:
        """Insert and run each item (args or ``InsertManyParams``) in turn; results follow the input."""
        results = []
        for item in items:
            args, opts = (item.args, item.opts) if isinstance(item, InsertManyParams) else (item, None)
            results.append(self.insert(args, opts, tx=tx))
        return results

    def _insert_in_memory(self, args: Any, opts: InsertOpts | None) -> InlineResult:
        job = self._memory_job(args, opts, None)
        return self._remember(work_once(self.workers, job, **self._work_once_options()))

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        if self._owns_client and self._client is not None:
            self._client.stop()
            self._owns_client = False

    def __enter__(self) -> InlineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def inline_client(client: Client) -> InlineClient:
    """An inline client on ``client``'s database and settings (workers, middleware, retry policy...).

    ``client`` must not be started; closing the inline client leaves it open.
    """
    workers, settings = inline_settings(client, usable=True, needs="river_sync.Client")
    return InlineClient(workers, client=client, **settings)


__all__ = ["InlineClient", "InlineResult", "inline_client"]
