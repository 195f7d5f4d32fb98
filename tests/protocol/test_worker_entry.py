"""WorkerEntry's calling conventions: ``call`` and ``ctx_call`` run the worker whatever its arity."""

from __future__ import annotations

from typing import Any

from river_protocol.workers import WorkerEntry


def test_ctx_call_is_the_function_itself_when_it_takes_ctx_and_call_otherwise() -> None:
    seen: list[Any] = []

    def with_ctx(ctx: Any, args: Any) -> str:
        seen.append((ctx, args))
        return "ctx"

    def args_only(args: Any) -> str:
        seen.append(args)
        return "args"

    takes = WorkerEntry("k", dict, with_ctx, takes_context=True)
    plain = WorkerEntry("k", dict, args_only, takes_context=False)
    assert takes.ctx_call is with_ctx
    assert plain.ctx_call == plain.call  # the bound method: it drops ctx
    assert takes.ctx_call("c", 1) == takes.call("c", 1) == "ctx"
    assert plain.ctx_call("c", 2) == plain.call("c", 2) == "args"
    assert seen == [("c", 1), ("c", 1), 2, 2]
