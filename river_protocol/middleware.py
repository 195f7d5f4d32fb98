"""What insert and work middleware may see and change, for both drivers.

Insert middleware wraps one ``insert``/``insert_many`` call (River Go's
``JobInsertMiddleware.InsertMany``): it receives the resolved rows as
``InsertParams`` and passes them, changed or not, to ``call_next``. By then the
unique key, the insert notification and the queues to poke are already
planned, so a middleware may change metadata, tags and priority but not what
those were computed from; ``replace_insert_jobs`` refuses such a change rather
than insert rows whose notification or uniqueness is wrong.

Work middleware sees a run's result or exception; ``outcome_label`` names the
outcome that result will be recorded as, so telemetry reports what the
completer will write.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.intents import InsertJobs, InsertParams, InsertResult
from river_protocol.job import JobRow
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Interrupted, Outcome, Snooze
from river_protocol.work import CancelCause, WorkCancelled, outcome_from_result

# What an insert middleware must leave alone: the plan was computed from them.
_PLANNED_FIELDS = ("kind", "encoded_args", "queue", "state", "scheduled_at", "unique_key", "unique_states")


def metadata_of(params: InsertParams) -> dict[str, Any]:
    """The row's metadata as a dict."""
    decoded = json.loads(params.metadata)
    assert isinstance(decoded, dict)  # encode_metadata only lets JSON objects through
    return decoded


def with_metadata(params: InsertParams, updates: Mapping[str, Any]) -> InsertParams:
    """``params`` with ``updates`` set as top-level metadata keys (an existing key is replaced)."""
    if not isinstance(updates, Mapping):
        raise ValidationError(f"metadata updates must be a mapping, got {type(updates).__name__}")
    if not updates:
        return params
    from river_protocol.options import encode_metadata

    merged = metadata_of(params)
    merged.update(updates)
    return dataclasses.replace(params, metadata=encode_metadata(merged))


def replace_insert_jobs(insert: InsertJobs, jobs: Sequence[InsertParams]) -> InsertJobs:
    """The planned insert with the rows an insert middleware passed on, checked against the plan."""
    jobs = tuple(jobs)
    if len(jobs) != len(insert.jobs):
        raise ValidationError(
            f"insert middleware passed on {len(jobs)} jobs for an insert of {len(insert.jobs)}: "
            "it may change rows but not add or drop them"
        )
    for index, (before, after) in enumerate(zip(insert.jobs, jobs, strict=True)):
        if after is before:
            continue
        if not isinstance(after, InsertParams):
            raise ValidationError(
                f"insert middleware passed on a {type(after).__name__} as job {index}; expected InsertParams"
            )
        for name in _PLANNED_FIELDS:
            if getattr(after, name) != getattr(before, name):
                raise ValidationError(
                    f"insert middleware changed {name} of job {index}: the insert was planned from it "
                    "(notification, uniqueness); set it in InsertOpts instead"
                )
    return dataclasses.replace(insert, jobs=jobs)


def outcome_label(
    job: JobRow,
    result: Any = None,
    error: BaseException | None = None,
    *,
    cancel_cause: CancelCause | None = None,
) -> str:
    """``completed``, ``error``, ``snooze``, ``cancel``, ``discard`` or ``interrupted`` for a run.

    A failure on the job's last attempt is ``discard``: that is what the row becomes.
    ``cancel_cause`` is the run's token cause: with it, an exception that is not an
    ``Exception`` (trio's ``Cancelled`` unwinding a cancelled run) is the run giving up
    for that cause, as the clients record it.
    """
    if error is not None and cancel_cause is not None and not isinstance(error, Exception):
        error = WorkCancelled(cancel_cause)
    outcome: Outcome = outcome_from_result(result, error, cancel_cause=cancel_cause)
    match outcome:
        case Completed():
            return "completed"
        case Snooze():
            return "snooze"
        case Cancel():
            return "cancel"
        case Discard():
            return "discard"
        case Interrupted():
            return "interrupted"
        case Failed():
            return "discard" if job.attempt >= job.max_attempts else "error"
    raise AssertionError(outcome)  # pragma: no cover - Outcome is a closed union


def insert_outcomes(
    params: Sequence[InsertParams], results: Sequence[InsertResult] | None
) -> dict[tuple[str, str, str], int]:
    """Rows of one insert counted by (kind, queue, outcome): ``inserted``, ``duplicate`` (a unique
    job found already there), or ``error`` for every row when the insert raised (``results`` None)."""
    counts: dict[tuple[str, str, str], int] = {}
    for index, p in enumerate(params):
        if results is None:
            outcome = "error"
        else:
            outcome = "duplicate" if results[index].unique_skipped_as_duplicate else "inserted"
        key = (p.kind, p.queue, outcome)
        counts[key] = counts.get(key, 0) + 1
    return counts


def refuse_awaitable(value: Any, owner: str, used: str, instead: str) -> None:
    """Refuse a sync middleware (``owner.used``) given an async client's ``call_next``: its answer is
    an awaitable the sync middleware can't wait for; the async twin (``owner.instead``) can."""
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if callable(close):
            close()  # never awaited: don't leave a "coroutine was never awaited" warning behind
        raise ValidationError(
            f"{owner}.{used} is river_sync's middleware; give river_trio {owner}.{instead}"
        )


InsertNext = Callable[[Sequence[InsertParams]], list[InsertResult]]
AsyncInsertNext = Callable[[Sequence[InsertParams]], Awaitable[list[InsertResult]]]
InsertFinish = Callable[[Sequence[InsertResult]], None]


class ClientMiddleware:
    """A middleware serving every client: ``work``/``insert_many`` for ``river_sync``,
    ``work_async``/``insert_many_async`` for ``river_trio`` and ``river_asyncio``.

    A subclass says what happens around a run (``_working``: a context manager given the
    run's context, yielding the function to call with the worker's result) and around an
    insert (``_inserting``: yielding the rows to pass on and the function to call with the
    results); the four entry points differ only in how they wait for ``call_next``.
    """

    def _working(self, ctx: Any) -> AbstractContextManager[Callable[[Any], None]]:
        raise NotImplementedError

    def _inserting(
        self, params: Sequence[InsertParams]
    ) -> AbstractContextManager[tuple[Sequence[InsertParams], InsertFinish]]:
        raise NotImplementedError

    def work(self, ctx: Any, args: Any, call_next: Callable[[Any, Any], Any]) -> Any:
        """``river_sync.Client(middleware=[this.work])``."""
        with self._working(ctx) as finish:
            result = call_next(ctx, args)
            refuse_awaitable(result, type(self).__name__, "work", "work_async")
            finish(result)
            return result

    def insert_many(self, params: Sequence[InsertParams], call_next: InsertNext) -> list[InsertResult]:
        """``river_sync.Client(insert_middleware=[this.insert_many])``."""
        with self._inserting(params) as (carried, finish):
            results = call_next(carried)
            refuse_awaitable(results, type(self).__name__, "insert_many", "insert_many_async")
            finish(results)
            return results

    async def work_async(self, ctx: Any, args: Any, call_next: Callable[[Any, Any], Awaitable[Any]]) -> Any:
        """``river_trio.Client(middleware=[this.work_async])``, and river_asyncio's."""
        with self._working(ctx) as finish:
            result = await call_next(ctx, args)
            finish(result)
            return result

    async def insert_many_async(
        self, params: Sequence[InsertParams], call_next: AsyncInsertNext
    ) -> list[InsertResult]:
        """``river_trio.Client(insert_middleware=[this.insert_many_async])``, and river_asyncio's."""
        with self._inserting(params) as (carried, finish):
            results = await call_next(carried)
            finish(results)
            return results
