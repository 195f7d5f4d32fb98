"""Output helpers shared by the operator commands: tables, JSON, job rendering, durations,
confirmation prompts and a progress bar.

Human output goes to stdout as aligned tables; ``--json`` output is one JSON document (or
JSON lines for dumps) so scripts never have to parse tables. Prompts and progress go to
stderr, so they never mix with what a script reads from stdout.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TextIO

from river_protocol.golang.gotime import format_rfc3339nano
from river_protocol.job import JobRow
from river_tools.cli.main import UsageError

# ---------------------------------------------------------------- tables and JSON


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO | None = None) -> None:
    """Aligned columns; numbers right-aligned, everything else left-aligned."""
    out = out or sys.stdout
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    numeric = [bool(rows) and all(isinstance(row[i], int) for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    print(line([h.upper() for h in headers]), file=out)
    for row in cells:
        print(line(row), file=out)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return short_time(value)
    return str(value)


def short_time(value: datetime | None) -> str:
    """UTC to the second, for tables (full precision is in ``--json``)."""
    if value is None:
        return "-"
    return value.strftime("%Y-%m-%d %H:%M:%SZ") if value.utcoffset() == timedelta(0) else value.isoformat()


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def print_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False), file=out or sys.stdout)


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- jobs as JSON


def rfc3339(value: datetime | None) -> str | None:
    return None if value is None else format_rfc3339nano(value)


def _json_value(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        # A row River would never write; show it rather than fail the whole listing.
        return raw.decode("utf-8", "replace")


def job_to_json(job: JobRow) -> dict[str, Any]:
    """Every column of the row; args parsed, times RFC 3339, unique key as hex."""
    return {
        "id": job.id,
        "kind": job.kind,
        "args": _json_value(job.encoded_args),
        "state": job.state.value,
        "queue": job.queue,
        "priority": job.priority,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "attempted_at": rfc3339(job.attempted_at),
        "attempted_by": list(job.attempted_by),
        "created_at": rfc3339(job.created_at),
        "scheduled_at": rfc3339(job.scheduled_at),
        "finalized_at": rfc3339(job.finalized_at),
        "errors": [
            {"at": rfc3339(e.at), "attempt": e.attempt, "error": e.error, "trace": e.trace}
            for e in job.errors
        ],
        "metadata": job.metadata,
        "tags": list(job.tags),
        "unique_key": None if job.unique_key is None else job.unique_key.hex(),
        "unique_states": job.unique_states,
    }


def job_line(job: JobRow) -> str:
    """One dump line (JSON lines: no newline inside)."""
    return compact_json(job_to_json(job))


def print_job(job: JobRow, out: TextIO | None = None) -> None:
    """The human view of one job: a field per line."""
    out = out or sys.stdout
    data = job_to_json(job)
    fields: list[tuple[str, str]] = [
        ("id", str(job.id)),
        ("kind", job.kind),
        ("state", job.state.value),
        ("queue", job.queue),
        ("priority", str(job.priority)),
        ("attempt", f"{job.attempt} of {job.max_attempts}"),
        ("args", compact_json(data["args"])),
        ("created_at", data["created_at"] or "-"),
        ("scheduled_at", data["scheduled_at"] or "-"),
        ("attempted_at", data["attempted_at"] or "-"),
        ("finalized_at", data["finalized_at"] or "-"),
        ("attempted_by", ", ".join(job.attempted_by) or "-"),
        ("tags", ", ".join(job.tags) or "-"),
        ("metadata", compact_json(job.metadata)),
        ("unique_key", data["unique_key"] or "-"),
        ("unique_states", "-" if job.unique_states is None else str(job.unique_states)),
    ]
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        print(f"{name:<{width}}  {value}", file=out)
    if job.errors:
        print(f"errors ({len(job.errors)}):", file=out)
        for e in job.errors:
            print(f"  attempt {e.attempt} at {rfc3339(e.at)}: {e.error}", file=out)
            for trace_line in e.trace.splitlines()[:20]:
                print(f"    {trace_line}", file=out)


# ---------------------------------------------------------------- durations

_UNITS = {"ms": timedelta(milliseconds=1), "s": timedelta(seconds=1), "m": timedelta(minutes=1),
          "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(text: str) -> timedelta:
    """``90s``, ``10m``, ``2h``, ``7d``, ``1w``, or combinations like ``1h30m``.

    Raises ``ValueError`` with a message saying what is accepted.
    """
    spec = text.strip().lower()
    pos, total = 0, timedelta(0)
    while pos < len(spec):
        m = _PART.match(spec, pos)
        if m is None:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not spec or pos != len(spec):
        raise ValueError(f"invalid duration {text!r}: use a number with a unit (ms, s, m, h, d, w), "
                         "e.g. 10m, 2h, 7d or 1h30m")
    if total <= timedelta(0):
        raise ValueError(f"invalid duration {text!r}: must be greater than zero")
    return total


def describe_duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{value.total_seconds():g}s"


# ---------------------------------------------------------------- confirmation


class ConfirmationRefused(UsageError):
    """Destructive command without ``--yes`` while stdin is not a terminal."""


def confirm(
    question: str, *, yes: bool, stdin: TextIO | None = None, prompt_out: TextIO | None = None
) -> bool:
    """True when the operator agreed (or passed ``--yes``).

    Without a terminal there is nobody to ask, and guessing "yes" in a script would be
    dangerous, so that case raises ``ConfirmationRefused`` instead of answering.
    """
    if yes:
        return True
    stdin = stdin or sys.stdin
    prompt_out = prompt_out or sys.stderr
    if not _isatty(stdin):
        raise ConfirmationRefused(
            f"{question} Refusing to go on without confirmation: stdin is not a terminal. "
            "Re-run with --yes to confirm."
        )
    print(f"{question} [y/N] ", end="", file=prompt_out, flush=True)
    answer = stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


# ---------------------------------------------------------------- progress


class Progress:
    """A one-line progress bar on a terminal; silent when the stream is not one.

    Redrawn on every ``advance`` (callers advance per batch, so that's rare enough).
    """

    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None,
                 enabled: bool | None = None, width: int = 30) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = _isatty(self.stream) if enabled is None else enabled
        self.width = width
        self._drawn = False

    def __enter__(self) -> Progress:
        self._draw()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def advance(self, n: int) -> None:
        self.done += n
        self._draw()

    def render(self) -> str:
        if self.total:
            fraction = min(self.done / self.total, 1.0)
            filled = int(fraction * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            return f"{self.label} [{bar}] {fraction * 100:3.0f}% {self.done}/{self.total}"
        return f"{self.label} {self.done}"

    def _draw(self) -> None:
        if not self.enabled:
            return
        self.stream.write("\r\x1b[2K" + self.render())
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
