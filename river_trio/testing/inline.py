"""Inline mode for trio code: ``await inline.insert(args)`` runs the job at once, in the caller's task.

Same rules as ``river_sync.testing.inline`` (every insert runs exactly once,
failures are not retried inline, duplicates skipped by unique options are not
run, rows in memory or in a database)::

    inline = InlineClient(workers)                       # in memory
    async with InlineClient(workers, "sqlite:///x") as inline:   # rows in a migrated database
        result = await inline.insert(SendEmail(to="a@b.c"))
    inline = inline_client(client)                       # borrow a river_trio.Client (not running)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from river_protocol.args import kind_of
from river_protocol.client_core import InsertManyParams
from river_protocol.constants import JOB_TIMEOUT_DEFAULT, MAX_ATTEMPTS_DEFAULT
from river_protocol.errors import ValidationError
from river_protocol.job import JobRow
from river_protocol.options import InsertOpts
from river_protocol.retry import RetryPolicy
from river_protocol.workers import Workers
from river_sync.testing.builder import build_job
from river_sync.testing.inline import InlineResult
from river_sync.testing.work import client_settings
from river_trio.runner import utcnow
from river_trio.testing.work import ErrorHandler, Middleware, work_once, work_with_client

if TYPE_CHECKING:
    from river_trio.client import Client


class InlineClient:
    """Runs each inserted job immediately (see the module docstring).

    ``database`` (URL, SQLite path, pool, Engine or ``AsyncDatabase``, already
    migrated) makes the rows real: an insert-only ``river_trio.Client`` is
    made on it (it opens the database at the first insert) and closed by
    ``aclose()``. Without one, rows live in memory (``jobs()``, ``get_job()``).
    """

    def __init__(
        self,
        workers: Workers,
        database: Any = None,
        *,
        schema: str | None = None,
        middleware: Sequence[Middleware] = (),
        error_handler: ErrorHandler | None = None,
        retry_policy: RetryPolicy | None = None,
        job_timeout: timedelta = JOB_TIMEOUT_DEFAULT,
        max_attempts: int = MAX_ATTEMPTS_DEFAULT,
        client: Client | None = None,
    ) -> None:
        if not isinstance(workers, Workers):
            raise ValidationError(f"InlineClient needs a Workers bundle, got {type(workers).__qualname__}")
        self.workers = workers
        self._owns_client = False
        self._client: Client | None = client
        if client is None and database is not None:
            from river_trio.client import Client

            self._client = Client(
                database, workers=workers, schema=schema, middleware=middleware, error_handler=error_handler,
                retry_policy=retry_policy, job_timeout=job_timeout, max_attempts=max_attempts,
            )
            self._owns_client = True
        self._middleware = tuple(middleware)
        self._error_handler = error_handler
        self._retry_policy = retry_policy
        self._job_timeout = job_timeout
        self._max_attempts = max_attempts
        self._jobs: dict[int, JobRow] = {}
        self._next_id = 1

    @property
    def client(self) -> Client | None:
        """The real client behind a database-backed inline client (None in memory)."""
        return self._client

    async def insert(self, args: Any, opts: InsertOpts | None = None, *, tx: Any = None) -> InlineResult:
        """Insert ``args`` and run its worker now; the final row and the run.

        ``tx`` (database mode only) runs the insert, the claim and the outcome
        in the caller's transaction.
        """
        if self._client is None:
            if tx is not None:
                raise ValidationError("tx= needs a database: this InlineClient keeps its jobs in memory")
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
        kind = kind_of(args)
        if kind not in self.workers:
            raise ValidationError(f"job kind {kind!r} is not registered in the client's Workers bundle")
        job = build_job(args, opts, id=self._next_id, client_max_attempts=self._max_attempts,
                        attempt=1, client_id="river-inline", now=utcnow())
        self._next_id += 1
        work = await work_once(
            self.workers, job, job_timeout=self._job_timeout, retry_policy=self._retry_policy,
            max_attempts=self._max_attempts, middleware=self._middleware, error_handler=self._error_handler,
        )
        self._jobs[job.id] = work.job
        return InlineResult(work.job, False, work)

    def jobs(self) -> list[JobRow]:
        """Every job this in-memory inline client ran, by id (database mode: use the database)."""
        if self._client is not None:
            raise ValidationError("this InlineClient records jobs in its database; query it there")
        return [self._jobs[i] for i in sorted(self._jobs)]

    def get_job(self, job_id: int) -> JobRow:
        if self._client is not None:
            raise ValidationError("this InlineClient records jobs in its database; query it there")
        try:
            return self._jobs[job_id]
        except KeyError:
            raise ValidationError(f"no job {job_id} was inserted through this InlineClient") from None

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._owns_client = False

    async def __aenter__(self) -> InlineClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def inline_client(client: Client) -> InlineClient:
    """An inline client on ``client``'s database and settings (workers, middleware, retry policy...).

    ``client`` must not be running; closing the inline client leaves it open.
    """
    from river_trio.client import Client

    config, workers, _, _ = client_settings(client)
    if not isinstance(client, Client) or workers is None or config is None:
        raise ValidationError("inline_client needs a river_trio.Client with workers")
    return InlineClient(workers, client=client, max_attempts=config.max_attempts,
                        job_timeout=config.job_timeout, retry_policy=config.retry_policy)


__all__ = ["InlineClient", "InlineResult", "inline_client"]
