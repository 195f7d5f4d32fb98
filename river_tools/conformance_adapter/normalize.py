"""Job rows in the protocol's ``Job`` form, as River's adapters report them.

- ``args`` are the stored JSON text as it is, so every number keeps its
  spelling (big integers, ``1e400``);
- ``metadata`` leaves out ``river:unique_nonce``, which is random; numbers
  the row reader could not hold exactly come from the stored text instead
  (``has_inexact_numbers`` tells the caller to read it);
- times are RFC 3339 in UTC with the precision the database stored
  (microseconds on Postgres, milliseconds on SQLite; attempt errors keep the
  nanoseconds of their JSON text when it is given), written as Go writes a
  ``time.Time``;
- ``unique_key`` is lowercase hex, ``unique_states`` the state names sorted.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from river_protocol.golang.encoding_json import parse_gotime
from river_protocol.golang.gotime import GoTime, format_rfc3339nano
from river_protocol.job import JobRow
from river_protocol.metadata_keys import UNIQUE_NONCE
from river_protocol.unique import bitmask_to_states
from river_tools.conformance_adapter.jsonrpc import RawJSON, loads


def _time(value: datetime | None) -> str | None:
    return None if value is None else format_rfc3339nano(value.astimezone(UTC))


def has_inexact_numbers(value: Any) -> bool:
    """Whether decoded JSON holds a float that stands for no finite number (``1e400``)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(has_inexact_numbers(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_inexact_numbers(v) for v in value)
    return False


def job_metadata(metadata: Mapping[str, Any] | str) -> dict[str, Any]:
    """The metadata to report: a decoded mapping, or the stored text (read with exact numbers)."""
    decoded = loads(metadata) if isinstance(metadata, str) else dict(metadata)
    decoded.pop(UNIQUE_NONCE, None)
    return decoded


def _error_times(job: JobRow, errors_text: str | None) -> list[str | None]:
    """Each attempt error's time: from the stored text when it matches the row, else the row's."""
    times = [_time(error.at) for error in job.errors]
    if errors_text is None:
        return times
    stored = loads(errors_text)
    if not isinstance(stored, list) or len(stored) != len(job.errors):
        return times  # changed since the row was read: keep the row's own
    for i, element in enumerate(stored):
        at = element.get("at") if isinstance(element, dict) else None
        if isinstance(at, str):
            with contextlib.suppress(ValueError):  # not RFC 3339: the row reader's reading stands
                times[i] = GoTime(parse_gotime(at).unix_ns, UTC).format_rfc3339(nano=True)
    return times


def protocol_job(
    job: JobRow, metadata_text: str | None = None, errors_text: str | None = None
) -> dict[str, Any]:
    """``job`` as the protocol's ``Job``; ``metadata_text`` and ``errors_text`` are its stored
    metadata and errors (a JSON array) when they were read apart."""
    error_times = _error_times(job, errors_text)
    return {
        "args": RawJSON(job.encoded_args.decode()),
        "attempt": job.attempt,
        "attempted_at": _time(job.attempted_at),
        "attempted_by": list(job.attempted_by),
        "created_at": _time(job.created_at),
        "errors": [
            {"at": at, "attempt": e.attempt, "error": e.error, "trace": e.trace}
            for e, at in zip(job.errors, error_times, strict=True)
        ],
        "finalized_at": _time(job.finalized_at),
        "id": job.id,
        "kind": job.kind,
        "max_attempts": job.max_attempts,
        "metadata": job_metadata(job.metadata if metadata_text is None else metadata_text),
        "priority": job.priority,
        "queue": job.queue,
        "scheduled_at": _time(job.scheduled_at),
        "state": job.state.value,
        "tags": list(job.tags),
        "unique_key": None if job.unique_key is None else job.unique_key.hex(),
        "unique_states": None if job.unique_states is None
        else sorted(state.value for state in bitmask_to_states(job.unique_states)),
    }
