"""Work outcomes and the set-state request each one becomes (docs/protocol.md §7.2, §8.1, §9).

A worker's run ends in exactly one outcome value. ``outcome_to_update`` turns it
into the completer's ``SetStateUpdate`` the way Go's executor does, and
``apply_set_state`` / ``apply_cancel`` model what the database statements then
do to the row, so tests can compare real rows with the model.

Times may be ``GoTime`` (nanoseconds) or aware ``datetime``: the error element's
``at`` is JSON and keeps nanoseconds, while timestamp columns keep microseconds
(truncated, as Postgres stores Go's values).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol import metadata_keys
from river_protocol.errors import EncodingError, ProtocolError, ValidationError
from river_protocol.golang.gotime import GoTime, format_rfc3339nano, to_gotime
from river_protocol.intents import SetStateUpdate
from river_protocol.job import AttemptError, JobRow, encode_attempt_error
from river_protocol.retry import DefaultRetryPolicy, RetryPolicy, clamp_to_datetime
from river_protocol.states import Actor, JobState, check_transition

# Delays up to the scheduler interval bypass the scheduler: the job is made
# available at once (its scheduled_at still holds the exact time).
SCHEDULER_INTERVAL = timedelta(seconds=5)
OUTPUT_MAX_BYTES = 32 * 1024 * 1024
CANCEL_ERROR_PREFIX = "JobCancelError: "
REMOTE_CANCEL_MESSAGE = "job cancelled remotely"
SNOOZES_KEY = "snoozes"
OUTPUT_KEY = metadata_keys.OUTPUT
CANCEL_ATTEMPTED_AT_KEY = "cancel_attempted_at"

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_GO_ZERO_TIME_NS = -62135596800 * 1_000_000_000  # 0001-01-01T00:00:00Z


# ---------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Completed:
    """The worker returned normally."""


@dataclass(frozen=True, slots=True)
class Snooze:
    """Run again after ``delay`` without consuming an attempt.

    ``nanos`` (0..999) is the sub-microsecond part of the delay, for exact
    parity with Go durations; Python callers leave it at 0.
    """

    delay: timedelta
    nanos: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.delay, timedelta):
            raise ValidationError(f"Snooze delay must be a timedelta, got {type(self.delay).__name__}")
        if not 0 <= self.nanos < 1000:
            raise ValidationError(f"Snooze nanos must be in 0..999, got {self.nanos}")

    @classmethod
    def from_ns(cls, duration_ns: int) -> Snooze:
        micros, nanos = divmod(duration_ns, 1000)
        return cls(timedelta(microseconds=micros), nanos)

    @property
    def duration_ns(self) -> int:
        d = self.delay
        return ((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds) * 1000 + self.nanos


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel the job for good, whatever attempts remain (Go's ``JobCancel(err)``).

    ``error`` is the inner message (``None`` is Go's nil error). ``text``
    overrides the whole stored error text when the cancel was wrapped in
    another error (Go: ``fmt.Errorf("outer: %w", JobCancel(err))``).
    """

    error: str | None = None
    text: str | None = None

    @property
    def message(self) -> str:
        if self.text is not None:
            return self.text
        return CANCEL_ERROR_PREFIX + ("<nil>" if self.error is None else self.error)


@dataclass(frozen=True, slots=True)
class Discard:
    """Python extension: discard now (state ``discarded``) regardless of attempts left.

    Recorded like a final failure: ``finalized_at`` = now and an error element
    with ``error`` as its text.
    """

    error: str


@dataclass(frozen=True, slots=True)
class Failed:
    """Any exception (Go: returned error or panic); ``trace`` is the stack text, if any."""

    error: str
    trace: str = ""


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The client was stopping and cancelled the job (soft stop escalation or hard stop)."""


Outcome = Completed | Snooze | Cancel | Discard | Failed | Interrupted


def unknown_kind_failure(kind: str) -> Failed:
    """The failure Go records when no worker is registered for ``kind``."""
    return Failed(f"job kind is not registered in the client's Workers bundle: {kind}")


def undecodable_failure(problems: str) -> Failed:
    """The failure recorded for a stored row whose values could not be read (``JobRow.undecodable``),
    in newer River's words (its harness checks the prefix)."""
    return Failed(f"job row couldn't be decoded: {problems}")


@dataclass(frozen=True, slots=True)
class _HandlerCancel:
    """A failure the error handler chose to cancel: cancelled, original error text kept."""

    error: str
    trace: str


def _resolve(
    outcome: Outcome, error_handler_cancel: bool, remote_cancelled: bool
) -> Outcome | _HandlerCancel:
    """Apply the remote-cancel and error-handler overrides (§7.1 step 6, §7.3)."""
    if remote_cancelled and not isinstance(outcome, Completed):
        # Go swaps any returned error (snoozes and client-stop errors included)
        # for the remote-cancel error; only success survives a remote cancel.
        return Cancel(REMOTE_CANCEL_MESSAGE)
    if error_handler_cancel and isinstance(outcome, Failed):
        return _HandlerCancel(outcome.error, outcome.trace)
    return outcome


def outcome_reason(
    outcome: Outcome, *, error_handler_cancel: bool = False, remote_cancelled: bool = False
) -> str:
    """Go's set-state reason: completed, snoozed, cancelled, failed or interrupted."""
    final = _resolve(outcome, error_handler_cancel, remote_cancelled)
    match final:
        case Completed():
            return "completed"
        case Snooze():
            return "snoozed"
        case Cancel() | _HandlerCancel():
            return "cancelled"
        case Interrupted():
            return "interrupted"
        case _:
            return "failed"


# ---------------------------------------------------------------- helpers


def _go_int64(value: int) -> int:
    return (value - _INT64_MIN) % (1 << 64) + _INT64_MIN


def _parse_go_int(text: str) -> int:
    """gjson's lenient integer parse: optional '-', digits only, else 0; wraps like int64."""
    digits = text[1:] if text.startswith("-") else text
    if not digits or not all("0" <= ch <= "9" for ch in digits):
        return 0
    n = 0
    for ch in digits:
        n = _go_int64(n * 10 + ord(ch) - 48)
    return _go_int64(-n) if text.startswith("-") else n


def _float_to_go_int64(value: float) -> int:
    if value != value or not -(2.0**63) <= value < 2.0**63:
        return _INT64_MIN
    return int(value)


def gjson_int(value: Any) -> int:
    """How Go's executor reads ``metadata.snoozes`` (gjson ``Result.Int()``) from a decoded JSON value.

    ``"7"`` → 7, ``2.9`` → 2, ``true`` → 1; ``"3.7"``, ``null``, objects and
    arrays → 0. Integers beyond 2**53 are read from their digits.
    """
    if value is True:
        return 1
    if value is None or value is False:
        return 0
    if isinstance(value, str):
        return _parse_go_int(value)
    if isinstance(value, int):
        if -9007199254740991 <= float(value) <= 9007199254740991:
            return int(float(value))
        return _parse_go_int(str(value))
    if isinstance(value, float):
        if -9007199254740991 <= value <= 9007199254740991:
            return int(value)
        return _float_to_go_int64(value)
    return 0


def _encode_updates(updates: Mapping[str, Any]) -> bytes:
    from river_protocol.golang.encoding_json import encode

    # A Go map: encode sorts its keys as encoding/json does.
    return encode(dict(updates))


def record_output(value: Any) -> dict[str, Any]:
    """The metadata update for a worker's recorded output, refused above 32 MiB of JSON."""
    from river_protocol.golang.encoding_json import encode

    size = len(encode(value))
    if size > OUTPUT_MAX_BYTES:
        limit_mb = OUTPUT_MAX_BYTES // (1024 * 1024)
        raise ValidationError(f"output is too large: {size} bytes (max {limit_mb} MB)")
    return {OUTPUT_KEY: value}


def cancel_attempted_at_json(now: datetime | GoTime) -> bytes:
    """The JSON value the cancel API stores under ``metadata.cancel_attempted_at`` (§14.1)."""
    moment = to_gotime(now)
    year = moment.wall_fields()[0]
    if not 0 <= year <= 9999:
        raise EncodingError(f"cancel_attempted_at year {year} is outside [0,9999]; Go cannot encode it")
    return b'"' + format_rfc3339nano(moment).encode() + b'"'


def _is_zero(moment: datetime | GoTime | None) -> bool:
    return moment is None or to_gotime(moment).unix_ns == _GO_ZERO_TIME_NS


# ---------------------------------------------------------------- outcome -> update


@dataclass(slots=True)  # not frozen: built once per finished job, and frozen init costs
class _Request:
    """What every outcome's rule reads: the job, the times and the collected metadata."""

    job: JobRow
    now: GoTime
    started_at: datetime | GoTime
    updates: dict[str, Any]
    interval_ns: int
    retry_policy: RetryPolicy | None
    rand: float | None
    worker_next_retry: datetime | GoTime | None

    @property
    def now_dt(self) -> datetime:
        return clamp_to_datetime(self.now)

    @property
    def merge(self) -> bool:
        return bool(self.updates)

    @property
    def encoded(self) -> bytes:
        return _encode_updates(self.updates) if self.updates else b"{}"

    def error(self, text: str, trace: str = "") -> bytes:
        return encode_attempt_error(self.started_at, self.job.attempt, text, trace)

    def finalize(self, state: JobState, error: bytes | None = None) -> SetStateUpdate:
        return SetStateUpdate(
            id=self.job.id, state=state, error=error, finalized_at=self.now_dt,
            metadata_do_merge=self.merge, metadata_updates=self.encoded,
        )


def _snoozed(r: _Request, final: Snooze) -> SetStateUpdate:
    updates = {**r.updates, SNOOZES_KEY: _go_int64(gjson_int(r.job.metadata.get(SNOOZES_KEY)) + 1)}
    delay_ns = final.duration_ns
    target = GoTime(r.now.unix_ns + delay_ns, r.now.tz)
    return SetStateUpdate(
        id=r.job.id,
        state=JobState.AVAILABLE if delay_ns <= r.interval_ns else JobState.SCHEDULED,
        attempt=r.job.attempt - 1,
        scheduled_at=clamp_to_datetime(target),
        metadata_do_merge=True,
        metadata_updates=_encode_updates(updates),
    )


def _completed(r: _Request, final: Completed) -> SetStateUpdate:
    return r.finalize(JobState.COMPLETED)


def _interrupted(r: _Request, final: Interrupted) -> SetStateUpdate:
    return SetStateUpdate(
        id=r.job.id, state=JobState.AVAILABLE, attempt=max(r.job.attempt - 1, 0), scheduled_at=r.now_dt,
        metadata_do_merge=r.merge, metadata_updates=r.encoded,
    )


def _cancelled(r: _Request, final: Cancel) -> SetStateUpdate:
    return r.finalize(JobState.CANCELLED, r.error(final.message))


def _handler_cancelled(r: _Request, final: _HandlerCancel) -> SetStateUpdate:
    return r.finalize(JobState.CANCELLED, r.error(final.error, final.trace))


def _discarded(r: _Request, final: Discard) -> SetStateUpdate:
    return r.finalize(JobState.DISCARDED, r.error(final.error))


def _failed(r: _Request, final: Failed) -> SetStateUpdate:
    error = r.error(final.error, final.trace)
    if r.job.attempt >= r.job.max_attempts:
        return r.finalize(JobState.DISCARDED, error)
    retry_at = next_retry_time(
        r.job, now=r.now, retry_policy=r.retry_policy, rand=r.rand, worker_next_retry=r.worker_next_retry
    )
    soon = retry_at.unix_ns - r.now.unix_ns <= r.interval_ns
    return SetStateUpdate(
        id=r.job.id,
        state=JobState.AVAILABLE if soon else JobState.RETRYABLE,
        error=error,
        scheduled_at=clamp_to_datetime(retry_at),
        metadata_do_merge=r.merge,
        metadata_updates=r.encoded,
    )


_A, _S = JobState.AVAILABLE, JobState.SCHEDULED

# Outcome (after the remote-cancel and error-handler overrides) -> the states it may move
# the running job to, and the rule that builds the request. Several states make the rule a
# conditional; ``outcome_to_update`` checks its choice here and against ``states.TRANSITIONS``.
OUTCOME_TRANSITIONS: Mapping[type, tuple[frozenset[JobState], Callable[[_Request, Any], SetStateUpdate]]] = {
    Completed: (frozenset({JobState.COMPLETED}), _completed),
    # A snooze within the scheduler interval skips the scheduler.
    Snooze: (frozenset({_A, _S}), _snoozed),
    Interrupted: (frozenset({_A}), _interrupted),
    Cancel: (frozenset({JobState.CANCELLED}), _cancelled),
    _HandlerCancel: (frozenset({JobState.CANCELLED}), _handler_cancelled),
    Discard: (frozenset({JobState.DISCARDED}), _discarded),
    # Out of attempts: discarded; else retried, at once when the retry is within the interval.
    Failed: (frozenset({JobState.DISCARDED, _A, JobState.RETRYABLE}), _failed),
}


def outcome_to_update(
    job: JobRow,
    outcome: Outcome,
    *,
    now: datetime | GoTime,
    started_at: datetime | GoTime,
    retry_policy: RetryPolicy | None = None,
    rand: float | None = None,
    worker_next_retry: datetime | GoTime | None = None,
    error_handler_cancel: bool = False,
    remote_cancelled: bool = False,
    metadata_updates: Mapping[str, Any] | None = None,
    scheduler_interval: timedelta = SCHEDULER_INTERVAL,
) -> SetStateUpdate:
    """The completer request for ``outcome`` of ``job``'s current attempt (§7.2).

    ``worker_next_retry`` is the worker's own retry time, only to be passed
    when the args decoded (a zero/None value defers to ``retry_policy``).
    ``rand`` (in [0, 1)) is needed only when the outcome is a retry.
    ``metadata_updates`` are the values collected during the run (output,
    MetadataSet); they are shallow-merged into the row's metadata.
    """
    if (outcome.__class__ is Completed and not metadata_updates and now.__class__ is datetime
            and now.tzinfo is UTC):
        # Most runs end here: _completed's request, without building the _Request every other
        # rule reads (a UTC datetime survives the GoTime round trip unchanged).
        return SetStateUpdate(id=job.id, state=JobState.COMPLETED, finalized_at=now)
    final = _resolve(outcome, error_handler_cancel, remote_cancelled)
    entry = OUTCOME_TRANSITIONS.get(type(final)) or next(
        (OUTCOME_TRANSITIONS[t] for t in type(final).__mro__ if t in OUTCOME_TRANSITIONS), None)
    if entry is None:
        raise ValidationError(f"not a work outcome: {outcome!r}")
    targets, rule = entry
    request = _Request(
        job=job, now=to_gotime(now), started_at=started_at, updates=dict(metadata_updates or {}),
        interval_ns=_timedelta_ns(scheduler_interval), retry_policy=retry_policy, rand=rand,
        worker_next_retry=worker_next_retry,
    )
    update = rule(request, final)
    if update.state not in targets:
        raise ProtocolError(
            f"{type(final).__name__} outcome chose {update.state.value}; it may only lead to"
            f" {', '.join(sorted(t.value for t in targets))}"
        )
    # The request only applies to a running row ("set state if running"), whatever ``job`` says.
    check_transition(JobState.RUNNING, Actor.COMPLETER, update.state)
    return update


def _timedelta_ns(value: timedelta) -> int:
    return ((value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds) * 1000


def next_retry_time(
    job: JobRow,
    *,
    now: datetime | GoTime,
    retry_policy: RetryPolicy | None = None,
    rand: float | None = None,
    worker_next_retry: datetime | GoTime | None = None,
) -> GoTime:
    """When a failed job runs again: the worker's time if set, else the policy's (§7.4).

    A time before ``now`` is replaced by the default policy's answer.
    """
    start = to_gotime(now)
    policy = retry_policy if retry_policy is not None else DefaultRetryPolicy()
    fallback = policy if isinstance(policy, DefaultRetryPolicy) else DefaultRetryPolicy()

    def from_policy(p: RetryPolicy) -> GoTime:
        if rand is None:
            raise ValidationError("rand is required to compute a retry time")
        if isinstance(p, DefaultRetryPolicy):
            return p.next_retry_at(job, start, rand)
        return to_gotime(p.next_retry(job, clamp_to_datetime(start), rand))

    if worker_next_retry is not None and not _is_zero(worker_next_retry):
        retry_at = to_gotime(worker_next_retry)
    else:
        retry_at = from_policy(policy)
    if retry_at.unix_ns < start.unix_ns:
        # A policy answer in the past is a bug in that policy; Go falls back to its default.
        retry_at = from_policy(fallback)
    return retry_at


# ---------------------------------------------------------------- database models


def _merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def merge_metadata(
    metadata: Mapping[str, Any], updates: Mapping[str, Any], *, merge_patch: bool = False
) -> dict[str, Any]:
    """Postgres ``||`` (shallow; nulls kept) or, with ``merge_patch``, SQLite's RFC 7396 patch."""
    if merge_patch:
        merged = _merge_patch(dict(metadata), dict(updates))
        assert isinstance(merged, dict)
        return merged
    return {**metadata, **updates}


def apply_set_state(
    row: JobRow, update: SetStateUpdate, now: datetime, *, merge_patch: bool = False
) -> JobRow:
    """The row after the completer's "set state if running" statement (§8.1).

    ``now`` is the statement's now (finalized_at of a job whose pending cancel
    overrides a retry/snooze). ``merge_patch`` selects SQLite's metadata merge.
    """
    if update.id != row.id:
        raise ValidationError(f"update for job {update.id} applied to job {row.id}")
    running = row.state is JobState.RUNNING
    if running:
        # A pending cancel may turn the requested state into cancelled; both must be legal.
        check_transition(JobState.RUNNING, Actor.COMPLETER, update.state)
    if not running and not update.metadata_do_merge:
        return row
    changes: dict[str, Any] = {}
    if update.metadata_do_merge:
        updates = json.loads(update.metadata_updates)
        if not isinstance(updates, dict):
            raise ValidationError("metadata_updates must encode a JSON object")
        changes["metadata"] = merge_metadata(row.metadata, updates, merge_patch=merge_patch)
    if running:
        should_cancel = (
            update.state in (JobState.RETRYABLE, JobState.SCHEDULED)
            and CANCEL_ATTEMPTED_AT_KEY in row.metadata
        )
        if should_cancel:
            changes["state"] = JobState.CANCELLED
            changes["finalized_at"] = now
        else:
            changes["state"] = update.state
            if update.finalized_at is not None:
                changes["finalized_at"] = update.finalized_at
            if update.attempt is not None:
                changes["attempt"] = update.attempt
            if update.scheduled_at is not None:
                changes["scheduled_at"] = update.scheduled_at
        if update.error is not None:
            changes["errors"] = (*row.errors, AttemptError.from_json(json.loads(update.error)))
    return dataclasses.replace(row, **changes)


def apply_cancel(row: JobRow, *, cancel_attempted_at: datetime | GoTime, now: datetime) -> JobRow:
    """The row after the cancel API (§14.1).

    Finalized rows are unchanged; a running row only gets
    ``metadata.cancel_attempted_at`` (its client finishes the cancel); any
    other row becomes ``cancelled`` with ``finalized_at`` = ``now``.
    """
    if row.state.finalized or row.finalized_at is not None:
        return row
    stamp = json.loads(cancel_attempted_at_json(cancel_attempted_at))
    metadata = {**row.metadata, CANCEL_ATTEMPTED_AT_KEY: stamp}
    if row.state is JobState.RUNNING:
        return dataclasses.replace(row, metadata=metadata)
    return dataclasses.replace(row, state=JobState.CANCELLED, finalized_at=now, metadata=metadata)
