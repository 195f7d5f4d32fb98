"""Resumable steps: which steps a run skips and what it records (River's resumable-step middleware).

A worker splits its work into named steps. When an attempt fails after
completing some of them, the last completed step is stored under
``metadata["river:resumable_step"]`` and any progress cursors under
``metadata["river:resumable_cursor"]`` (a map step name -> JSON value), so the
next attempt, by a Go or a Python worker, skips what is already done. The
rules follow River's middleware exactly:

- Until the stored step is reached, every step is skipped; reaching it marks
  it completed. That stored step itself runs again only if a cursor is stored
  for it (it was interrupted part-way); later steps run normally.
- Step names must be unique within one run.
- A step that fails stops the run (later steps don't run) and fails the job.
- Metadata is written only when the attempt ends in anything but success
  (error, snooze, cancel, discard, interruption) and some step completed:
  the step name, plus the cursor map when it has entries, or ``null`` for the
  cursor key when the run consumed every cursor it started with (the merge is
  additive, so the stale map must be overwritten).
- A successful run whose stored step was never reached fails with
  ``river: resumable step "<name>" not found in Worker``.

One deliberate difference: Go has two step kinds (plain and cursor); a Python
step behaves as a cursor step, which only differs when a cursor is stored for
the resume step itself (Go's plain step would skip it, here it re-runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from river_protocol import metadata_keys
from river_protocol.errors import RiverError, ValidationError
from river_protocol.golang.encoding_json import RawJSON, encode

STEP_KEY = metadata_keys.RESUMABLE_STEP
CURSOR_KEY = metadata_keys.RESUMABLE_CURSOR


class ResumableError(RiverError):
    """Resumable steps used wrongly (duplicate name, cursor outside a step, unknown resume step)."""


@dataclass(frozen=True, slots=True)
class StepStart:
    """Whether a step's body runs, and the cursor stored for it (raw JSON, or None)."""

    run: bool
    cursor: bytes | None = None


@dataclass(slots=True)
class ResumableState:
    """One run's step bookkeeping (River's ``ResumableState``)."""

    resume_step: str = ""
    resume_matched: bool = True
    cursors: dict[str, bytes] = field(default_factory=dict)
    had_cursors: bool = False
    completed_step: str = ""
    stack: list[str] = field(default_factory=list)  # open steps, innermost last (steps may nest)
    seen: set[str] = field(default_factory=set)
    failure: BaseException | None = None  # a step's error, even if the worker swallowed it

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> ResumableState:
        """The state a run starts with, read from the job's metadata.

        Only a string step counts (River reads it with gjson's ``.Str``); a
        cursor value that is neither an object nor an array is ignored, an
        array is an error (Go can't unmarshal it into its map).
        """
        step = metadata.get(STEP_KEY)
        resume = step if isinstance(step, str) else ""
        state = cls(resume_step=resume, resume_matched=not resume)
        raw = metadata.get(CURSOR_KEY)
        if isinstance(raw, list):
            raise ResumableError(
                "river: unmarshal resumable cursors: json: cannot unmarshal array into Go value of type "
                "map[string]json.RawMessage"
            )
        if isinstance(raw, dict):
            state.cursors = {str(k): encode(v) for k, v in raw.items()}
            state.had_cursors = bool(state.cursors)
        return state

    # ------------------------------------------------------------ during the run

    @property
    def current_step(self) -> str:
        return self.stack[-1] if self.stack else ""

    def begin(self, name: str) -> StepStart:
        """Enter step ``name``: run it (with its cursor) or skip it."""
        if not isinstance(name, str) or not name:
            raise ValidationError(f"a resumable step needs a non-empty name, got {name!r}")
        if self.failure is not None:
            return StepStart(run=False)
        if name in self.seen:
            raise ResumableError(f'river: duplicate resumable step name "{name}"')
        self.seen.add(name)
        if not self.resume_matched:
            if name != self.resume_step:
                return StepStart(run=False)
            self.completed_step = name
            self.resume_matched = True
            if name not in self.cursors:
                return StepStart(run=False)
        self.stack.append(name)
        cursor = self.cursors.get(name)
        return StepStart(run=True, cursor=cursor or None)

    def end(self, name: str, error: BaseException | None = None) -> None:
        """Leave step ``name``; ``error`` is the exception its body raised, if any."""
        if self.current_step != name:
            raise ResumableError(f'river: step "{name}" ended but the current step is "{self.current_step}"')
        self.stack.pop()
        if error is not None:
            self.failure = error
            return
        self.completed_step = name
        self.cursors.pop(name, None)

    def set_cursor(self, name: str, value: Any) -> bytes:
        """Record ``value`` (Go-JSON encoded) as the current step's cursor; returns the JSON."""
        if not self.current_step:
            raise ResumableError("river: resumable cursor can only be used within ResumableStepCursor")
        if name != self.current_step:
            raise ResumableError(f'river: cursor for step "{name}" set inside step "{self.current_step}"')
        data = encode(value)
        self.cursors[name] = data
        return data

    def cursor(self, name: str) -> bytes | None:
        """The raw JSON cursor stored for ``name`` (None when there is none)."""
        return self.cursors.get(name)

    # ------------------------------------------------------------ at the end

    def unmatched_error(self) -> ResumableError | None:
        """The error a successful run gets when its stored step never came up."""
        if self.resume_step and not self.resume_matched:
            return ResumableError(f'river: resumable step "{self.resume_step}" not found in Worker')
        return None

    def metadata_updates(self, *, succeeded: bool) -> dict[str, Any]:
        """The metadata keys to merge for a finished run (empty when nothing is recorded)."""
        if succeeded or not self.completed_step:
            return {}
        out: dict[str, Any] = {STEP_KEY: self.completed_step}
        if self.cursors:
            out[CURSOR_KEY] = self._cursor_map()
        elif self.had_cursors:
            out[CURSOR_KEY] = None
        return out

    def checkpoint_updates(self) -> dict[str, Any]:
        """Durable checkpoint of the current step (Go's ``ResumableSetStepTx``): recorded
        as completed now, with the cursor map when it has entries."""
        if not self.current_step:
            raise ResumableError(
                "not inside a resumable step; must be called from within ResumableStep or ResumableStepCursor"
            )
        self.completed_step = self.current_step
        out: dict[str, Any] = {STEP_KEY: self.current_step}
        if self.cursors:
            out[CURSOR_KEY] = self._cursor_map()
        return out

    def _cursor_map(self) -> dict[str, RawJSON]:
        return {name: RawJSON(raw) for name, raw in self.cursors.items()}


def encode_updates(updates: Mapping[str, Any]) -> bytes:
    """The JSON object Go writes for these metadata updates (sorted keys, compact)."""
    return encode(dict(updates))


def needs_state_up_front(metadata: Mapping[str, Any]) -> bool:
    """Whether stored progress must be checked even if the worker never opens a step
    (otherwise the state is created lazily by the first step)."""
    return STEP_KEY in metadata or CURSOR_KEY in metadata


def settle_run(
    state: ResumableState | None, *, raised: bool, completed: bool
) -> tuple[dict[str, Any], BaseException | None]:
    """How a run ends for the resumable middleware of every driver.

    ``raised``: the worker raised; ``completed``: it returned a plain success.
    Returns the metadata to merge and, for a run that returned, the error that
    replaces its result (a step that failed though the worker swallowed it, or
    a stored step that never came up).
    """
    if state is None:
        return {}, None
    if raised:
        return state.metadata_updates(succeeded=False), None
    failure = state.failure if state.failure is not None else state.unmatched_error()
    if failure is not None:
        return state.metadata_updates(succeeded=False), failure
    return state.metadata_updates(succeeded=completed), None
