"""Resumable-step rules against River's middleware: what runs, and the exact metadata JSON Go writes.

The scenarios and expected metadata come from River's own middleware tests
(resumable_test.go); the JSON strings are what Go's ``json.Marshal`` writes
for those updates (sorted keys, compact).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from river_protocol.errors import ValidationError
from river_protocol.resumable import (
    CURSOR_KEY,
    STEP_KEY,
    ResumableError,
    ResumableState,
    encode_updates,
)


class Boom(Exception):
    pass


def run(state: ResumableState, steps: list[tuple[str, Any]]) -> tuple[list[str], BaseException | None]:
    """Run ``steps`` as a worker would: ``(name, action)``; action is None, "fail" or ("cursor", v).

    Returns the steps whose bodies ran and the run's error (as the middleware sees it).
    """
    ran: list[str] = []
    try:
        for name, action in steps:
            start = state.begin(name)
            if not start.run:
                continue
            ran.append(name)
            error: BaseException | None = None
            if isinstance(action, tuple) and action[0] == "cursor":
                state.set_cursor(name, action[1])
            if action == "fail" or (isinstance(action, tuple) and action[-1] == "fail"):
                error = Boom(f"{name} failed")
            state.end(name, error)
            if error is not None:
                raise error
    except BaseException as exc:
        return ran, exc
    return ran, state.unmatched_error()


def updates_json(state: ResumableState, failed: bool) -> str:
    return encode_updates(state.metadata_updates(succeeded=not failed)).decode()


def test_fresh_run_failing_records_last_completed_step() -> None:
    state = ResumableState.from_metadata({})
    ran, err = run(state, [("step1", None), ("step2", "fail"), ("step3", None)])
    assert ran == ["step1", "step2"] and str(err) == "step2 failed"
    assert updates_json(state, failed=True) == '{"river:resumable_step":"step1"}'


def test_resume_skips_completed_steps() -> None:
    state = ResumableState.from_metadata({STEP_KEY: "step1"})
    ran, err = run(state, [("step1", None), ("step2", None), ("step3", None)])
    assert ran == ["step2", "step3"] and err is None
    assert state.metadata_updates(succeeded=True) == {}


def test_success_writes_nothing_even_after_steps() -> None:
    state = ResumableState.from_metadata({})
    assert run(state, [("a", None), ("b", None)]) == (["a", "b"], None)
    assert state.metadata_updates(succeeded=True) == {}


def test_failure_before_any_step_writes_nothing() -> None:
    state = ResumableState.from_metadata({STEP_KEY: "step2"})
    ran, err = run(state, [("step1", None)])
    # step2 never came up: a successful return becomes River's "not found" error.
    assert ran == [] and str(err) == 'river: resumable step "step2" not found in Worker'
    assert state.metadata_updates(succeeded=False) == {}


def test_cursor_recorded_on_failure_and_resumed() -> None:
    state = ResumableState.from_metadata({})
    ran, err = run(state, [("step1", None), ("step2", ("cursor", {"id": 42}, "fail")), ("step3", None)])
    assert ran == ["step1", "step2"] and str(err) == "step2 failed"
    assert updates_json(state, True) == (
        '{"river:resumable_cursor":{"step2":{"id":42}},"river:resumable_step":"step1"}'
    )

    stored = json.loads('{"river:resumable_cursor":{"step2":{"id":42}},"river:resumable_step":"step1"}')
    again = ResumableState.from_metadata(stored)
    assert again.begin("step1").run is False
    start = again.begin("step2")
    assert start.run and start.cursor == b'{"id":42}'
    again.end("step2")
    assert again.begin("step3").run
    again.end("step3")
    assert again.metadata_updates(succeeded=True) == {}


def test_consumed_cursors_are_cleared_with_null() -> None:
    stored = {CURSOR_KEY: {"step2": {"id": 42}}, STEP_KEY: "step1"}
    state = ResumableState.from_metadata(stored)
    ran, err = run(state, [("step1", None), ("step2", None), ("step3", "fail")])
    assert ran == ["step2", "step3"] and str(err) == "step3 failed"
    assert updates_json(state, True) == '{"river:resumable_cursor":null,"river:resumable_step":"step2"}'


def test_resume_step_with_its_own_cursor_runs_again() -> None:
    stored = {CURSOR_KEY: {"step1": 123, "step2": {"id": "abc"}}, STEP_KEY: "step1"}
    state = ResumableState.from_metadata(stored)
    first = state.begin("step1")
    assert first.run and json.loads(first.cursor or b"null") == 123
    state.end("step1")
    second = state.begin("step2")
    assert second.run and second.cursor == b'{"id":"abc"}'


def test_multiple_cursor_types_written_as_go_marshals_them() -> None:
    state = ResumableState.from_metadata({})
    ran, err = run(state, [("step1", ("cursor", 123)), ("step2", ("cursor", {"id": "abc"}, "fail"))])
    assert ran == ["step1", "step2"] and str(err) == "step2 failed"
    # step1 completed, so its cursor is dropped; step2's stays.
    assert updates_json(state, True) == (
        '{"river:resumable_cursor":{"step2":{"id":"abc"}},"river:resumable_step":"step1"}'
    )


def test_cursor_values_use_go_json_escaping() -> None:
    state = ResumableState.from_metadata({})
    state.begin("a")
    state.end("a")
    state.begin("s")
    state.set_cursor("s", {"b": "<&>", "a": 1.5})
    state.end("s", Boom())
    assert encode_updates(state.metadata_updates(succeeded=False)) == (
        b'{"river:resumable_cursor":{"s":{"a":1.5,"b":"\\u003c\\u0026\\u003e"}},"river:resumable_step":"a"}'
    )


def test_nothing_written_without_a_completed_step() -> None:
    state = ResumableState.from_metadata({})
    state.begin("s")
    state.set_cursor("s", 1)
    state.end("s", Boom())
    assert state.metadata_updates(succeeded=False) == {}


def test_duplicate_step_name_is_an_error() -> None:
    state = ResumableState.from_metadata({})
    state.begin("step1")
    state.end("step1")
    with pytest.raises(ResumableError, match='duplicate resumable step name "step1"'):
        state.begin("step1")


def test_duplicate_while_skipping_is_an_error() -> None:
    state = ResumableState.from_metadata({STEP_KEY: "step2"})
    assert not state.begin("step1").run
    with pytest.raises(ResumableError, match="duplicate"):
        state.begin("step1")


def test_after_a_failure_later_steps_are_skipped() -> None:
    state = ResumableState.from_metadata({})
    state.begin("a")
    state.end("a", Boom("x"))
    assert state.begin("b").run is False
    assert isinstance(state.failure, Boom)


def test_set_cursor_outside_or_for_another_step() -> None:
    state = ResumableState.from_metadata({})
    with pytest.raises(ResumableError, match="within ResumableStepCursor"):
        state.set_cursor("x", 1)
    state.begin("a")
    with pytest.raises(ResumableError, match="inside step"):
        state.set_cursor("b", 1)


def test_nested_steps_restore_the_outer_step() -> None:
    state = ResumableState.from_metadata({})
    state.begin("outer")
    state.begin("inner")
    assert state.current_step == "inner"
    state.end("inner")
    assert state.current_step == "outer"
    with pytest.raises(ResumableError):
        state.end("inner")


def test_metadata_reading_follows_gjson() -> None:
    assert ResumableState.from_metadata({STEP_KEY: 5}).resume_step == ""
    assert ResumableState.from_metadata({CURSOR_KEY: "x"}).cursors == {}
    with pytest.raises(ResumableError, match="cannot unmarshal array"):
        ResumableState.from_metadata({CURSOR_KEY: [1]})
    with pytest.raises(ValidationError):
        ResumableState.from_metadata({}).begin("")


def test_checkpoint_updates_mirror_set_step_tx() -> None:
    state = ResumableState.from_metadata({})
    with pytest.raises(ResumableError, match="not inside a resumable step"):
        state.checkpoint_updates()
    state.begin("load")
    assert encode_updates(state.checkpoint_updates()) == b'{"river:resumable_step":"load"}'
    state.set_cursor("load", 7)
    assert encode_updates(state.checkpoint_updates()) == (
        b'{"river:resumable_cursor":{"load":7},"river:resumable_step":"load"}'
    )
    assert state.completed_step == "load"
