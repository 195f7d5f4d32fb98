"""Job rows in the protocol's ``Job`` form, as River's adapters report them.

- ``args`` are the stored JSON text as it is, so every number keeps its
  spelling (big integers, ``1e400``);
- ``metadata`` leaves out ``river:unique_nonce``, which is random; numbers
  the row reader could not hold exactly come from the stored text instead
  (``has_inexact_numbers`` tells the caller to read it);
- times are RFC 3339 in UTC with the precision the database stored
  (microseconds on Postgres, milliseconds on SQLite), written as Go writes
  a ``time.Time``;
- ``unique_key`` is lowercase hex, ``unique_states`` the state names sorted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from river_protocol.golang.gotime import format_rfc3339nano
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


def protocol_job(job: JobRow, metadata_text: str | None = None) -> dict[str, Any]:
    """``job`` as the protocol's ``Job``; ``metadata_text`` is its stored metadata when read apart."""
    return {
        "args": RawJSON(job.encoded_args.decode()),
        "attempt": job.attempt,
        "attempted_at": _time(job.attempted_at),
        "attempted_by": list(job.attempted_by),
        "created_at": _time(job.created_at),
        "errors": [
            {"at": _time(e.at), "attempt": e.attempt, "error": e.error, "trace": e.trace}
            for e in job.errors
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
