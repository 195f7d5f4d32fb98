"""snooze.json: work outcomes → set-state requests → rows, against Go's executor and SQL.

Each case's worker action becomes an outcome value; ``outcome_to_update`` must
produce Go's set-state parameters, and ``apply_set_state`` (the model of the
completer statement) must turn ``row_before`` into ``row_after``.
``client_job_cancel`` cases check the cancel API model instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from conformance.families.retry import parse_gotime
from river_protocol.golang.gotime import parse_time
from river_protocol.intents import SetStateUpdate
from river_protocol.job import AttemptError, JobRow
from river_protocol.outcomes import (
    Cancel,
    Completed,
    Failed,
    Interrupted,
    Outcome,
    Snooze,
    apply_cancel,
    apply_set_state,
    cancel_attempted_at_json,
    next_retry_time,
    outcome_reason,
    outcome_to_update,
    record_output,
    unknown_kind_failure,
)
from river_protocol.retry import DefaultRetryPolicy, RetryPolicy
from river_protocol.states import JobState

NAME = "snooze"
FILENAME = "snooze.json"

# The fixture's worker kind (visible in its unknown-kind error text).
KIND = "fx_exec"
# Draws for jittered retries: the window's ends and middle must all fit.
DRAWS = (0.0, 0.5, 1.0 - 2.0**-53)

# The Go values the fixture's workers passed to RecordOutput, by Go literal.
_OUTPUT_LITERALS: dict[str, Any] = {
    'map[string]any{"progress": 50}': {"progress": 50},
    '"partial"': "partial",
    'map[string]any{"z": 1, "a": []int{1, 2}, "html": "<&>"}': {"z": 1, "a": [1, 2], "html": "<&>"},
}
_RECORD_OUTPUT = re.compile(r"river\.RecordOutput\(ctx, (.*?)\)(?:;|$)")
_ERRORS_NEW = re.compile(r'errors\.New\(("(?:[^"\\]|\\.)*")\)')
_CANCEL = re.compile(
    r'^(?:fmt\.Errorf\(("(?:[^"\\]|\\.)*"), )?river\.JobCancel\((nil|errors\.New\(("(?:[^"\\]|\\.)*")\))\)'
)
_FIXED_POLICY = re.compile(r"returning now\+(\S+)$")
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms)")


class FixedRetryPolicy:
    """A client policy that always answers ``now + delay`` (the fixture's custom policies)."""

    def __init__(self, delay: timedelta) -> None:
        self.delay = delay

    def next_retry(self, job: JobRow, now: datetime, rand: float) -> datetime:
        return now + self.delay


def _go_duration(text: str) -> timedelta:
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return timedelta(seconds=sum(float(n) * units[u] for n, u in _GO_DURATION_PART.findall(text)))


def _go_string(literal: str) -> str:
    value = json.loads(literal)
    assert isinstance(value, str)
    return value


def _time(text: str | None) -> datetime | None:
    return None if text is None else parse_time(text)


def job_from_fixture(row: dict[str, Any]) -> JobRow:
    listed = tuple(AttemptError.from_json(e) for e in row["errors"])
    # Long error lists are truncated in the fixture; the count still drives the retry delay.
    filler = AttemptError(at=parse_time("2024-01-01T00:00:00Z"), attempt=0, error="(not in fixture)")
    errors = (filler,) * (row["errors_count"] - len(listed)) + listed
    return JobRow(
        id=1,
        kind=KIND,
        encoded_args=row["args_text"].encode(),
        state=JobState(row["state"]),
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        attempted_at=_time(row["attempted_at"]),
        scheduled_at=_time(row["scheduled_at"]),
        finalized_at=_time(row["finalized_at"]),
        errors=errors,
        metadata=dict(row["metadata"]),
    )


def _outcome(case: dict[str, Any]) -> tuple[Outcome, dict[str, Any]]:
    """The outcome value for the case's worker action, plus extra outcome_to_update arguments."""
    action = case["worker_action"]
    kind = action["type"]
    go = action.get("go", "")
    extra: dict[str, Any] = {}
    if kind == "snooze":
        return Snooze.from_ns(action["duration_ns"]), extra
    if kind == "success":
        return Completed(), extra
    if kind == "soft_stop":
        return Interrupted(), extra
    if kind == "remote_cancel":
        extra["remote_cancelled"] = True
        return Failed("context canceled"), extra
    if kind == "unknown_kind":
        return unknown_kind_failure(KIND), extra
    if kind == "unmarshal_error":
        # The decode error text is Go's; what matters is that NextRetry is not consulted.
        expected = json.loads(case["set_state_params"][0]["err_data"])
        extra["args_decoded"] = False
        return Failed(expected["error"]), extra
    if kind == "panic":
        redacted = case["set_state_params"][0]["err_data_parsed_redacted"]
        return Failed(action["panic_value"], trace=redacted["trace"]), extra
    if kind == "cancel":
        m = _CANCEL.match(go)
        if m is None:
            raise ValueError(f"unrecognised cancel expression {go!r}")
        inner = None if m[2] == "nil" else _go_string(m[3])
        text = None
        if m[1] is not None:
            text = _go_string(m[1]).replace("%w", Cancel(inner).message)
        return Cancel(inner, text=text), extra
    if kind in ("error", "soft_stop_other_error"):
        if "message" in action:
            return Failed(action["message"]), extra
        m = _ERRORS_NEW.search(go)
        if m is None:
            raise ValueError(f"no error message in {go!r}")
        return Failed(_go_string(m[1])), extra
    raise ValueError(f"unknown worker action type {kind!r}")


def _retry_policy(case: dict[str, Any]) -> RetryPolicy:
    text = case["client_retry_policy"]
    m = _FIXED_POLICY.search(text)
    if m is not None:
        return FixedRetryPolicy(_go_duration(m[1]))
    # Go's default policy, including its amd64 overflow at the cap.
    return DefaultRetryPolicy(go_overflow=True)


def _same_instant(got: datetime | None, want_ns_text: str | None) -> bool:
    if got is None or want_ns_text is None:
        return got is None and want_ns_text is None
    return got == parse_gotime(want_ns_text).to_datetime()


def _compare_rows(got: JobRow, want: dict[str, Any]) -> list[str]:
    problems = []
    for name in ("state", "attempt", "max_attempts"):
        value = getattr(got, name)
        if (value.value if isinstance(value, JobState) else value) != want[name]:
            problems.append(f"row {name}: got {value!r}, want {want[name]!r}")
    for name in ("attempted_at", "scheduled_at", "finalized_at"):
        if getattr(got, name) != _time(want[name]):
            problems.append(f"row {name}: got {getattr(got, name)}, want {want[name]}")
    if len(got.errors) != want["errors_count"]:
        problems.append(f"row errors count: got {len(got.errors)}, want {want['errors_count']}")
    tail = [AttemptError.from_json(e) for e in want["errors"]]
    if tail and list(got.errors[-len(tail):]) != tail:
        problems.append(f"row errors: got {got.errors[-len(tail):]}, want {tail}")
    if got.metadata != want["metadata"]:
        problems.append(f"row metadata: got {got.metadata!r}, want {want['metadata']!r}")
    return problems


def _check_cancel_api(case: dict[str, Any]) -> str | None:
    params = case["params"]
    stamp = parse_gotime(params["cancel_attempted_at"])
    problems = []
    got_json, want_json = cancel_attempted_at_json(stamp), params["cancel_attempted_at_json"].encode()
    if got_json != want_json:
        problems.append(f"cancel_attempted_at_json: got {got_json!r}, want {want_json!r}")
    now = parse_gotime(params["now"]).to_datetime()
    after = apply_cancel(job_from_fixture(case["row_before"]), cancel_attempted_at=stamp, now=now)
    problems += _compare_rows(after, case["row_after"])
    return "\n".join(problems) or None


def _compare_params(update: SetStateUpdate, want: dict[str, Any], reason: str, jittered: bool) -> list[str]:
    problems = []

    def expect(what: str, got: Any, wanted: Any) -> None:
        if got != wanted:
            problems.append(f"{what}: got {got!r}, want {wanted!r}")

    expect("state", update.state.value, want["state"])
    expect("reason", reason, want["reason"])
    expect("attempt", update.attempt, want["attempt"])
    expect("metadata_do_merge", update.metadata_do_merge, want["metadata_do_merge"])
    if want["metadata_updates"] is not None:
        expect("metadata_updates", update.metadata_updates, want["metadata_updates"].encode())
    if not _same_instant(update.finalized_at, want["finalized_at"]):
        problems.append(f"finalized_at: got {update.finalized_at}, want {want['finalized_at']}")
    if not jittered and not _same_instant(update.scheduled_at, want["scheduled_at"]):
        problems.append(f"scheduled_at: got {update.scheduled_at}, want {want['scheduled_at']}")
    if want["err_data"] is not None:
        expect("err_data", update.error, want["err_data"].encode())
    elif "err_data_parsed_redacted" in want:
        got = None if update.error is None else json.loads(update.error)
        expect("err_data (trace redacted)", got, want["err_data_parsed_redacted"])
    else:
        expect("err_data", update.error, None)
    return problems


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    if case["group"] == "client_job_cancel":
        return _check_cancel_api(case)

    now = parse_gotime(fixture["now"])
    interval = timedelta(microseconds=case["scheduler_interval_ns"] // 1000)
    job = job_from_fixture(case["row_before"])
    outcome, extra = _outcome(case)
    args_decoded = extra.pop("args_decoded", True)
    worker_next_retry = case.get("worker_next_retry")
    next_retry = parse_gotime(worker_next_retry) if worker_next_retry and args_decoded else None
    handler = case.get("error_handler") or {}
    m = _RECORD_OUTPUT.search(case["worker_action"].get("go", ""))
    metadata_updates = record_output(_OUTPUT_LITERALS[m[1]]) if m else None
    policy = _retry_policy(case)
    jittered = bool(case.get("scheduled_at_jittered"))

    def update_for(rand: float) -> SetStateUpdate:
        return outcome_to_update(
            job, outcome, now=now, started_at=now, retry_policy=policy, rand=rand,
            worker_next_retry=next_retry, error_handler_cancel=bool(handler.get("set_cancelled")),
            metadata_updates=metadata_updates, scheduler_interval=interval, **extra,
        )

    want = case["set_state_params"]
    if len(want) != 1:
        return f"expected one set-state request in the fixture, found {len(want)}"
    update = update_for(0.5)
    reason = outcome_reason(
        outcome, error_handler_cancel=bool(handler.get("set_cancelled")),
        remote_cancelled=bool(extra.get("remote_cancelled")),
    )
    problems = _compare_params(update, want[0], reason, jittered)

    if jittered:
        window = case["retry_window"]
        low, high = parse_gotime(window["min"]), parse_gotime(window["max_exclusive"])
        for rand in DRAWS:
            at = next_retry_time(job, now=now, retry_policy=policy, rand=rand, worker_next_retry=next_retry)
            # Float rounding can land the 1-ulp draw exactly on the exclusive end.
            if not low.unix_ns <= at.unix_ns <= high.unix_ns:
                problems.append(f"rand={rand}: retry at {at.format_rfc3339()} outside [{window['min']}, "
                                f"{window['max_exclusive']})")
            soon = at.unix_ns - now.unix_ns <= case["scheduler_interval_ns"]
            expected_state = JobState.AVAILABLE if soon else JobState.RETRYABLE
            got_state = update_for(rand).state
            if got_state is not expected_state:
                problems.append(f"rand={rand}: state {got_state} for retry at {at.format_rfc3339()}")
        go_at = parse_gotime(want[0]["scheduled_at"])
        if not low.unix_ns <= go_at.unix_ns < high.unix_ns:
            problems.append("Go's own scheduled_at is outside the fixture window (fixture problem)")
        # The row comparison below uses Go's random draw.
        update = replace(update, scheduled_at=go_at.to_datetime())

    after = apply_set_state(job, update, now.to_datetime())
    problems += _compare_rows(after, case["row_after"])
    return "\n".join(problems) or None
