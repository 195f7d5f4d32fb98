"""Resumable steps: ``ctx.step``, ``ctx.cursor``, ``ctx.set_cursor``, ``ctx.checkpoint``.

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
``ResumableSetStepTx``). On the async clients a step is also ``async with
ctx.step("x")`` or ``await ctx.step("x").run(fn)``, and ``checkpoint`` is awaited.

This module holds the outermost middleware that records the steps; the steps
themselves are ``river_db.resumable``'s and the context's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from river_db.resumable import ResumableAttempt, raised, returned
from river_db.resumable import Step as Step

if TYPE_CHECKING:
    from river_anyio.context import WorkContext


async def resumable_middleware(
    ctx: WorkContext, args: Any, call_next: Callable[[WorkContext, Any], Any]
) -> Any:
    """Outermost middleware: records step progress when an attempt doesn't succeed."""
    if ResumableAttempt.quick(ctx):
        try:
            result = await call_next(ctx, args)
        except BaseException:
            if ctx._resumable_state is not None:
                raised(ctx)
            raise
        return returned(ctx, result)
    with ResumableAttempt(ctx) as attempt:
        return attempt.returned(await call_next(ctx, args))
