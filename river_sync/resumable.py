"""Resumable steps for threaded workers: ``ctx.step``, ``ctx.cursor``, ``ctx.set_cursor``, ``ctx.checkpoint``.

The rules live in ``river_protocol.resumable``; metadata is stored under
River's keys in Go's format, so a job begun by a Go worker resumes in Python
and the reverse. Two ways to write a step::

    @ctx.step("download")            # runs now, or is skipped on a resumed attempt
    def _(cursor):                    # optional parameter: the stored cursor (or None)
        for page in pages(after=cursor):
            ...
            ctx.set_cursor("download", page.id)

    with ctx.step("upload") as step:  # a with block can't skip itself:
        if not step.skip:             # check ``step.skip`` (``step.cursor`` holds the cursor)
            upload()

An exception in a step fails the job (later steps don't run); the completed
steps and cursors are recorded with the failed attempt. ``ctx.checkpoint(tx)``
stores the current step (and cursor) right away inside the worker's own
transaction, so it commits together with the business data (Go's
``ResumableSetStepTx``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from river_protocol.intents import UpdateJobMetadata
from river_protocol.job import JobRow
from river_protocol.outcomes import Completed
from river_protocol.resumable import (
    ResumableState,
    StepStart,
    encode_updates,
    needs_state_up_front,
    settle_run,
)
from river_protocol.work import outcome_from_result

if TYPE_CHECKING:
    from river_sync.context import WorkContext

_UNSET: Any = object()


def _decode(raw: bytes | None) -> Any:
    return None if raw is None else json.loads(raw)


class Step:
    """One named step: a decorator that runs (or skips) the function, or a context manager."""

    def __init__(self, ctx: ResumableSteps, name: str) -> None:
        self._ctx = ctx
        self.name = name
        self._start: StepStart | None = None
        self.skip = False
        self.cursor: Any = None

    def __call__(self, fn: Callable[..., Any]) -> Any:
        """Run ``fn`` now unless the step is skipped; returns its result (None when skipped)."""
        with self as step:
            if step.skip:
                return None
            takes_cursor = _positional_count(fn) >= 1
            return fn(step.cursor) if takes_cursor else fn()

    def __enter__(self) -> Step:
        self._start = self._ctx._resumable().begin(self.name)
        self.skip = not self._start.run
        self.cursor = _decode(self._start.cursor)
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if self._start is not None and self._start.run:
            self._ctx._resumable().end(self.name, exc)


def _positional_count(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL))


class ResumableSteps:
    """Mixed into ``WorkContext``; needs ``job``, ``client`` and ``metadata_updates``."""

    job: JobRow
    client: Any
    metadata_updates: dict[str, Any]
    _resumable_state: ResumableState | None = None

    def _resumable(self) -> ResumableState:
        if self._resumable_state is None:
            self._resumable_state = ResumableState.from_metadata(self.job.metadata)
        return self._resumable_state

    def step(self, name: str) -> Step:
        """The step ``name`` (unique within a run); see the module docstring."""
        return Step(self, name)

    def cursor(self, name: str) -> Any:
        """The cursor stored for step ``name`` by an earlier attempt or ``set_cursor`` (None if none)."""
        return _decode(self._resumable().cursor(name))

    def set_cursor(self, name: str, value: Any) -> None:
        """Record progress of the running step ``name``; kept if the attempt fails (Go-JSON encoded)."""
        self._resumable().set_cursor(name, value)

    def checkpoint(self, tx: Any, *, cursor: Any = _UNSET) -> JobRow | None:
        """Store the current step (and cursor) inside ``tx`` now; returns the updated row."""
        from river_sync.txadapt import executor_for_caller_tx

        state = self._resumable()
        if cursor is not _UNSET and state.current_step:
            state.set_cursor(state.current_step, cursor)
        updates = state.checkpoint_updates()
        executor = executor_for_caller_tx(tx, schema=self.client.schema)
        row: JobRow = executor.run(UpdateJobMetadata(self.job.id, encode_updates(updates)))
        self.metadata_updates.update(updates)
        return row


def resumable_middleware(ctx: WorkContext, args: Any, call_next: Callable[[WorkContext, Any], Any]) -> Any:
    """Outermost middleware: records step progress when an attempt doesn't succeed."""
    if needs_state_up_front(ctx.job.metadata):
        ctx._resumable()
    try:
        result = call_next(ctx, args)
    except BaseException:
        updates, _ = settle_run(ctx._resumable_state, raised=True, completed=False)
        ctx.metadata_updates.update(updates)
        raise
    completed = isinstance(outcome_from_result(result, None), Completed)
    updates, error = settle_run(ctx._resumable_state, raised=False, completed=completed)
    ctx.metadata_updates.update(updates)
    if error is not None:
        raise error
    return result
