"""Resumable steps, the part both drivers share: ``ctx.step``, ``ctx.cursor``, ``ctx.set_cursor``.

The rules live in ``river_protocol.resumable``. What differs between the
drivers is only ``checkpoint`` (it writes inside the worker's transaction), so
each driver's ``WorkContext`` adds that; ``checkpoint_intent`` is the part of
it that does not wait.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

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

UNSET: Any = object()


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
            takes_cursor = positional_count(fn) >= 1
            return fn(step.cursor) if takes_cursor else fn()

    def __enter__(self) -> Step:
        self._start = self._ctx._resumable().begin(self.name)
        self.skip = not self._start.run
        self.cursor = _decode(self._start.cursor)
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if self._start is not None and self._start.run:
            self._ctx._resumable().end(self.name, exc)


def positional_count(fn: Callable[..., Any]) -> int:
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

    def _checkpoint_intent(self, cursor: Any = UNSET) -> tuple[UpdateJobMetadata, dict[str, Any]]:
        """The metadata update a checkpoint writes, and the updates to record once it has."""
        state = self._resumable()
        if cursor is not UNSET and state.current_step:
            state.set_cursor(state.current_step, cursor)
        updates = state.checkpoint_updates()
        return UpdateJobMetadata(self.job.id, encode_updates(updates)), updates


class ResumableAttempt:
    """One attempt seen by the outermost middleware: records step progress unless it succeeds.

    Both drivers' ``resumable_middleware`` run the worker through it: when the job
    has no stored progress, without it unless a step opens (``quick``, ``raised``
    and ``returned`` below, the same rules), else ``with ResumableAttempt(ctx) as
    attempt: return attempt.returned(call_next(ctx, args))`` (awaited on trio); an
    exception leaving the block (cancellation included) is recorded as a failed attempt.
    """

    __slots__ = ("_ctx", "_settled")

    def __init__(self, ctx: ResumableSteps) -> None:
        self._ctx = ctx
        self._settled = False

    @staticmethod
    def quick(ctx: ResumableSteps) -> bool:
        """Whether the attempt may run without the block: nothing stored to check up front
        (most jobs); ``raised``/``returned`` then settle it only if a step was opened."""
        return ctx._resumable_state is None and not needs_state_up_front(ctx.job.metadata)

    def __enter__(self) -> ResumableAttempt:
        if needs_state_up_front(self._ctx.job.metadata):
            self._ctx._resumable()
        return self

    def returned(self, result: Any) -> Any:
        """The worker returned ``result``; raises the error a resumable job owes instead, if any."""
        self._settled = True
        return returned(self._ctx, result)

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is not None and not self._settled:
            raised(self._ctx)


def returned(ctx: ResumableSteps, result: Any) -> Any:
    """An attempt returned ``result``: ``result``, or the error a resumable job owes instead."""
    if ctx._resumable_state is None:  # no step was opened and none was stored
        return result
    completed = isinstance(outcome_from_result(result, None), Completed)
    updates, error = settle_run(ctx._resumable_state, raised=False, completed=completed)
    ctx.metadata_updates.update(updates)
    if error is not None:
        raise error
    return result


def raised(ctx: ResumableSteps) -> None:
    """An attempt raised: record its step progress as a failed attempt's."""
    updates, _ = settle_run(ctx._resumable_state, raised=True, completed=False)
    ctx.metadata_updates.update(updates)
