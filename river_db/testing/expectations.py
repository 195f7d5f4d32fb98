"""What an inserted-job assertion expects and how it judges: shared by both drivers.

``river_sync.testing.assertions`` and ``river_anyio.testing.assertions`` differ
only in how they read ``river_job``; given the jobs read, the verdict (the one
match, or an ``AssertionError`` listing what was found) comes from the pure
``judge_*`` functions here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from river_protocol.args import kind_of
from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import decode_args, encode_args
from river_protocol.golang.gotime import GoTime, format_sqlite_time, parse_time
from river_protocol.intents import JobListFilter, ListJobs
from river_protocol.job import JobRow
from river_protocol.states import JobState

PAGE = 1000


def list_jobs_page(kinds: Sequence[str], after: tuple[Any, int] | None) -> ListJobs:
    """One page of the jobs of ``kinds`` by id, after the last page's ``page_after``."""
    return ListJobs(
        filter=JobListFilter(kinds=tuple(dict.fromkeys(kinds))), order_by="id", limit=PAGE, after=after,
    )


def page_after(page: Sequence[JobRow]) -> tuple[Any, int] | None:
    """Where the next page starts, or None when ``page`` was the last."""
    return None if len(page) < PAGE else (page[-1].id, page[-1].id)


@dataclass(frozen=True, slots=True, eq=False)
class InsertedJob(JobRow):
    """A found ``JobRow`` plus its args decoded into the expected args type (a dict for a kind).

    It equals a ``JobRow`` with the same columns (the decoded args derive from them).
    """

    decoded_args: Any = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobRow):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in dataclasses.fields(JobRow))

    __hash__ = None  # type: ignore[assignment]  # mutable metadata, like JobRow


def _expected_kind_and_type(expected: Any) -> tuple[str, type | None, Any]:
    """(kind, args type or None, args value or None) of a kind, args type or args value."""
    if isinstance(expected, str):
        if not expected:
            raise ValidationError("the expected job kind cannot be empty")
        return expected, None, None
    if isinstance(expected, type):
        return kind_of(expected), expected, None
    return kind_of(expected), type(expected), expected


def _as_datetime(value: datetime | GoTime) -> datetime:
    return value.to_datetime() if isinstance(value, GoTime) else value


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and _subset(value, actual[key]) for key, value in expected.items()
        )
    return bool(expected == actual)


@dataclass(frozen=True, slots=True)
class ExpectedJob:
    """One expected job: a kind, args type or args value, plus the properties it must have."""

    kind_or_args: Any
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    state: JobState | str | None = None
    tags: Sequence[str] | None = None
    scheduled_at: datetime | GoTime | None = None
    args: Any = None

    def __post_init__(self) -> None:
        if self.state is not None:
            object.__setattr__(self, "state", JobState(self.state))
        if isinstance(self.tags, str):
            raise ValidationError(f"tags must be a sequence of strings, not the string {self.tags!r}")
        if isinstance(self.scheduled_at, datetime) and self.scheduled_at.tzinfo is None:
            raise ValidationError("scheduled_at must be timezone-aware")
        _expected_kind_and_type(self.kind_or_args)  # fail early on a bad kind

    @property
    def kind(self) -> str:
        return _expected_kind_and_type(self.kind_or_args)[0]

    @property
    def args_type(self) -> type | None:
        return _expected_kind_and_type(self.kind_or_args)[1]

    def _args_filters(self) -> list[tuple[str, Any, bool]]:
        """(description, expected value, exact) for the args checks."""
        checks: list[tuple[str, Any, bool]] = []
        value = _expected_kind_and_type(self.kind_or_args)[2]
        if value is not None:
            checks.append(("args", json.loads(encode_args(value)), True))
        if self.args is not None:
            if isinstance(self.args, Mapping):
                checks.append(("args containing", dict(self.args), False))
            else:
                checks.append(("args", json.loads(encode_args(self.args)), True))
        return checks

    def differences(self, job: JobRow, *, dialect: str = "postgres") -> list[str]:
        """Why ``job`` doesn't match (empty: it matches).

        Times compare at the column's precision: microseconds on Postgres,
        River's rounded milliseconds on SQLite (``dialect="sqlite"``).
        """
        out: list[str] = []
        if job.kind != self.kind:
            out.append(f"kind {job.kind!r} is not {self.kind!r}")
        if self.queue is not None and job.queue != self.queue:
            out.append(f"queue {job.queue!r} is not {self.queue!r}")
        if self.priority is not None and job.priority != self.priority:
            out.append(f"priority {job.priority} is not {self.priority}")
        if self.max_attempts is not None and job.max_attempts != self.max_attempts:
            out.append(f"max_attempts {job.max_attempts} is not {self.max_attempts}")
        if self.state is not None and job.state is not self.state:
            out.append(f"state {job.state.value!r} is not {JobState(self.state).value!r}")
        if self.tags is not None and tuple(job.tags) != tuple(self.tags):
            out.append(f"tags {list(job.tags)} are not {list(self.tags)}")
        if self.scheduled_at is not None:
            want = _as_datetime(self.scheduled_at)
            if dialect == "sqlite":
                want = parse_time(format_sqlite_time(want))
            if job.scheduled_at is None or job.scheduled_at != want:
                got = "none" if job.scheduled_at is None else job.scheduled_at.isoformat()
                out.append(f"scheduled_at {got} is not {want.isoformat()}")
        actual = job.args
        for _, value, exact in self._args_filters():
            if exact and actual != value:
                out.append(f"args {_compact(actual)} are not {_compact(value)}")
            elif not exact and not _subset(value, actual):
                out.append(f"args {_compact(actual)} do not contain {_compact(value)}")
        return out

    def describe(self) -> str:
        parts = [repr(self.kind)]
        for name in ("queue", "priority", "max_attempts", "tags", "scheduled_at"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        if self.state is not None:
            parts.append(f"state={JobState(self.state).value!r}")
        for what, value, _ in self._args_filters():
            parts.append(f"{what.replace(' ', '_')}={_compact(value)}")
        return "job " + ", ".join(parts)

    def decode(self, job: JobRow) -> InsertedJob:
        args_type = self.args_type
        decoded = decode_args(args_type, job.encoded_args) if args_type is not None else job.args
        fields = {f.name: getattr(job, f.name) for f in dataclasses.fields(JobRow)}
        return InsertedJob(**fields, decoded_args=decoded)


def _compact(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def describe_job(job: JobRow) -> str:
    """One line per job for failure messages."""
    scheduled = job.scheduled_at.isoformat() if job.scheduled_at else "-"
    return (
        f"id={job.id} kind={job.kind!r} state={job.state.value} queue={job.queue!r} priority={job.priority} "
        f"max_attempts={job.max_attempts} tags={list(job.tags)} scheduled_at={scheduled} "
        f"args={_compact(job.args)}"
    )


def _listing(jobs: Sequence[JobRow], limit: int = 20) -> str:
    if not jobs:
        return "  (none)"
    lines = [f"  {describe_job(job)}" for job in jobs[:limit]]
    if len(jobs) > limit:
        lines.append(f"  ... and {len(jobs) - limit} more")
    return "\n".join(lines)


def _fail(message: str) -> AssertionError:
    return AssertionError("River assertion failure: " + message)


def judge_inserted(expected: ExpectedJob, jobs: Sequence[JobRow], dialect: str) -> InsertedJob:
    """The one job of ``jobs`` (those of the expected kind) matching ``expected``, else AssertionError."""
    matches = [job for job in jobs if not expected.differences(job, dialect=dialect)]
    if len(matches) == 1:
        return expected.decode(matches[0])
    if not jobs:
        raise _fail(f"expected {expected.describe()}, but no job of kind {expected.kind!r} was found")
    if not matches:
        reasons = "\n".join(
            f"  id={job.id}: " + "; ".join(expected.differences(job, dialect=dialect)) for job in jobs[:20]
        )
        raise _fail(
            f"expected {expected.describe()}, but none of the {len(jobs)} job(s) of that kind matches:\n"
            f"{_listing(jobs)}\nDifferences:\n{reasons}"
        )
    raise _fail(
        f"expected exactly one {expected.describe()}, but {len(matches)} match (narrow the expectation "
        f"or use require_many_inserted):\n{_listing(matches)}"
    )


def judge_not_inserted(expected: ExpectedJob, jobs: Sequence[JobRow], dialect: str) -> None:
    """AssertionError when some job of ``jobs`` matches ``expected``."""
    matches = [job for job in jobs if not expected.differences(job, dialect=dialect)]
    if matches:
        raise _fail(
            f"expected no {expected.describe()}, but {len(matches)} were inserted:\n{_listing(matches)}"
        )


def expectations_of(expected_jobs: Sequence[ExpectedJob | Any]) -> list[ExpectedJob]:
    """``ExpectedJob`` values for ``require_many_inserted``'s items (bare kinds/args types/values too)."""
    expectations = [e if isinstance(e, ExpectedJob) else ExpectedJob(e) for e in expected_jobs]
    if not expectations:
        raise ValidationError("require_many_inserted needs at least one expected job")
    return expectations


def judge_many_inserted(
    expectations: Sequence[ExpectedJob], jobs: Sequence[JobRow], dialect: str
) -> list[InsertedJob]:
    """``jobs`` (those of the expected kinds, by id) are exactly the expected ones in order, else
    AssertionError."""
    want = [e.kind for e in expectations]
    got = [job.kind for job in jobs]
    if want != got:
        raise _fail(
            f"inserted jobs don't match the expectation;\n  expected kinds: {want}\n  actual kinds:   {got}\n"
            f"Jobs found (by id):\n{_listing(jobs, limit=50)}"
        )
    failures = []
    for index, (expected, job) in enumerate(zip(expectations, jobs, strict=True)):
        diffs = expected.differences(job, dialect=dialect)
        if diffs:
            failures.append(f"  [{index}] id={job.id}: " + "; ".join(diffs))
    if failures:
        raise _fail("inserted jobs don't match the expectation:\n" + "\n".join(failures))
    return [expected.decode(job) for expected, job in zip(expectations, jobs, strict=True)]
