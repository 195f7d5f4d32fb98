"""Inline mode: ``insert`` runs the job at once, in the caller (Loco's "foreground blocking").

For tests and scripts that want a job's effect right away::

    inline = InlineClient(workers)                 # no database: rows kept in memory
    inline = InlineClient(workers, "sqlite:///x")  # rows recorded in a migrated database
    inline = inline_client(client)                 # borrow a client's database and settings

    result = inline.insert(SendEmail(to="a@b.c"))  # await inline.insert(...) on the async clients
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
from typing import TYPE_CHECKING, Any, ClassVar

from river_anyio.runner import utcnow
from river_anyio.testing.work import work_once, work_with_client
from river_db.testing.inline import InlineBase, InlineResult, inline_settings
from river_protocol.client_core import InsertManyParams
from river_protocol.options import InsertOpts

if TYPE_CHECKING:
    from river_anyio.client import Client


class InlineClient(InlineBase):
    """Runs each inserted job immediately in the caller (see the module docstring).

    ``database`` (URL, SQLite path, pool, Engine or ``AsyncDatabase``, already
    migrated) makes the rows real: an insert-only client (the driver's own
    ``Client``; an async one opens the database at the first insert) is made on
    it and closed by ``aclose()``. Without one, rows live in memory (``jobs()``,
    ``get_job()``). Keyword settings are the client's; the shared half is
    ``river_db.testing.inline.InlineBase``.
    """

    # The driver's Client class (river_trio's, river_asyncio's); None: this package's own.
    _client_class: ClassVar[type[Client] | None] = None

    def _new_client(self, database: Any, **settings: Any) -> Client:
        from river_anyio.client import Client

        return (self._client_class or Client)(database, **settings)

    @property
    def client(self) -> Client | None:
        """The real client behind a database-backed inline client (None in memory)."""
        return self._client  # type: ignore[no-any-return]

    # ---------------------------------------------------------------- inserts

    async def insert(self, args: Any, opts: InsertOpts | None = None, *, tx: Any = None) -> InlineResult:
        """Insert ``args`` and run its worker now; returns the final row and the run.

        ``tx`` (database mode only) runs the insert, the claim and the outcome
        in the caller's transaction.
        """
        if self._in_memory(tx):
            return await self._insert_in_memory(args, opts)
        inserted = await self._client.insert(args, opts, tx=tx)
        if inserted.unique_skipped_as_duplicate:
            return InlineResult(inserted.job, True, None)
        work = await work_with_client(self._client, inserted.job, tx=tx)
        return InlineResult(work.job, False, work)

    async def insert_many(self, items: Iterable[Any], *, tx: Any = None) -> list[InlineResult]:
        """Insert and run each item (args or ``InsertManyParams``) in turn; results follow the input."""
        results = []
        for item in items:
            args, opts = (item.args, item.opts) if isinstance(item, InsertManyParams) else (item, None)
            results.append(await self.insert(args, opts, tx=tx))
        return results

    async def _insert_in_memory(self, args: Any, opts: InsertOpts | None) -> InlineResult:
        job = self._memory_job(args, opts, utcnow())
        return self._remember(await work_once(self.workers, job, **self._work_once_options()))

    # ---------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            if True:  # ASYNC
                await self._client.aclose()
            else:
                self._client.stop()
            self._owns_client = False

    async def __aenter__(self) -> InlineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def inline_client(client: Client) -> InlineClient:
    """An inline client on ``client``'s database and settings (workers, middleware, retry policy...).

    ``client`` must not be started; closing the inline client leaves it open.
    """
    return inline_client_of(InlineClient, client)


def inline_client_of(cls: type[InlineClient], client: Client) -> InlineClient:
    """``inline_client`` making a ``cls`` (a driver's own InlineClient) for ``client``."""
    from river_anyio.client import Client

    wanted = cls._client_class or Client
    needs = f"{wanted.__module__.split('.')[0]}.Client"
    workers, settings = inline_settings(client, usable=isinstance(client, wanted), needs=needs)
    return cls(workers, client=client, **settings)


__all__ = ["InlineClient", "InlineResult", "inline_client", "inline_client_of"]
