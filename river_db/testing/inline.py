"""What both drivers' ``InlineClient`` share: settings, in-memory rows and checks (no waiting)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from river_db.testing.builder import build_job
from river_db.testing.runs import WorkResult, client_settings
from river_protocol.args import kind_of
from river_protocol.constants import JOB_TIMEOUT_DEFAULT, MAX_ATTEMPTS_DEFAULT
from river_protocol.errors import ValidationError
from river_protocol.job import JobRow
from river_protocol.options import InsertOpts
from river_protocol.retry import RetryPolicy
from river_protocol.workers import Workers


@dataclass(frozen=True, slots=True)
class InlineResult:
    """Shaped like the client's ``InsertResult`` (``job``, ``unique_skipped_as_duplicate``), plus
    the run: ``work`` is None when nothing ran (a skipped duplicate)."""

    job: JobRow
    unique_skipped_as_duplicate: bool = False
    work: WorkResult | None = None


class InlineBase:
    """What both drivers' ``InlineClient`` share: settings, the in-memory rows and the
    checks; the subclasses (``river_anyio.testing.inline``, generated for river_sync) only run and wait."""

    def __init__(
        self,
        workers: Workers,
        database: Any = None,
        *,
        schema: str | None = None,
        middleware: Sequence[Any] = (),
        error_handler: Any = None,
        retry_policy: RetryPolicy | None = None,
        job_timeout: timedelta = JOB_TIMEOUT_DEFAULT,
        max_attempts: int = MAX_ATTEMPTS_DEFAULT,
        client: Any = None,
    ) -> None:
        if not isinstance(workers, Workers):
            raise ValidationError(f"InlineClient needs a Workers bundle, got {type(workers).__qualname__}")
        self.workers = workers
        self._owns_client = False
        self._client: Any = client
        if client is None and database is not None:
            self._client = self._new_client(
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

    def _new_client(self, database: Any, **settings: Any) -> Any:
        """The driver's insert-only client on ``database``."""
        raise NotImplementedError

    def _in_memory(self, tx: Any) -> bool:
        if self._client is None and tx is not None:
            raise ValidationError("tx= needs a database: this InlineClient keeps its jobs in memory")
        return self._client is None

    def _memory_job(self, args: Any, opts: InsertOpts | None, now: datetime | None) -> JobRow:
        """The next in-memory row for ``args``, claimed and ready to run."""
        kind = kind_of(args)
        if kind not in self.workers:
            raise ValidationError(f"job kind {kind!r} is not registered in the client's Workers bundle")
        job = build_job(args, opts, id=self._next_id, client_max_attempts=self._max_attempts,
                        attempt=1, client_id="river-inline", now=now)
        self._next_id += 1
        return job

    def _work_once_options(self) -> dict[str, Any]:
        return {
            "job_timeout": self._job_timeout, "retry_policy": self._retry_policy,
            "max_attempts": self._max_attempts, "middleware": self._middleware,
            "error_handler": self._error_handler,
        }

    def _remember(self, work: WorkResult) -> InlineResult:
        self._jobs[work.job.id] = work.job
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


def inline_settings(client: Any, *, usable: bool, needs: str) -> tuple[Workers, dict[str, Any]]:
    """The workers and keyword settings an inline client borrows from ``client``."""
    config, workers, _, _ = client_settings(client)
    if not usable or workers is None or config is None:
        raise ValidationError(f"inline_client needs a {needs} with workers")
    return workers, {"max_attempts": config.max_attempts, "job_timeout": config.job_timeout,
                     "retry_policy": config.retry_policy}
