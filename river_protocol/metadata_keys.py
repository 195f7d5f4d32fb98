"""The ``river_job.metadata`` keys River reserves for itself (docs/protocol.md §3.5).

Every River process sharing a database reads and writes these names, so they
live in one place; user metadata should avoid them.
"""

from __future__ import annotations

OUTPUT = "output"
PERIODIC_JOB_ID = "river:periodic_job_id"
RESCUE_COUNT = "river:rescue_count"
RESUMABLE_CURSOR = "river:resumable_cursor"
RESUMABLE_STEP = "river:resumable_step"
UNIQUE_NONCE = "river:unique_nonce"
# Reserved too, though River keeps them as plain strings rather than named constants.
CANCEL_ATTEMPTED_AT = "cancel_attempted_at"
PERIODIC = "periodic"
SNOOZES = "snoozes"
UNIQUE_KEY_CONFLICT = "unique_key_conflict"

RESERVED = frozenset({
    OUTPUT, PERIODIC_JOB_ID, RESCUE_COUNT, RESUMABLE_CURSOR, RESUMABLE_STEP, UNIQUE_NONCE,
    CANCEL_ATTEMPTED_AT, PERIODIC, SNOOZES, UNIQUE_KEY_CONFLICT,
})

# Keys under this prefix are River's, in a job's metadata and in a queue's (River Pro keeps queue
# settings there): user code writes none of them.
RIVER_PREFIX = "river:"


def is_river_key(key: str) -> bool:
    """Whether ``key`` is one of River's own (``river:`` prefix, case as written)."""
    return key.startswith(RIVER_PREFIX)
