"""``build_job``: a realistic ``JobRow`` for an args value, without a database.

The row is what the client would insert for ``args`` (the args type's own
``insert_opts()`` and the explicit ``opts`` resolved by the same
``resolve_insert_params`` the client uses) and then what a producer's claim
makes of it: ``attempt`` counted, ``attempted_at``/``attempted_by`` set. It is
pure (``now`` is a parameter with a clock default), so every client's
``testing`` reuses it as is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from river_protocol.args import kind_of
from river_protocol.constants import MAX_ATTEMPTS_DEFAULT
from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import encode_args
from river_protocol.golang.gotime import require_aware
from river_protocol.job import AttemptError, JobRow
from river_protocol.options import InsertOpts, resolve_insert_params
from river_protocol.states import JobState
from river_protocol.unique import unique_fields_of

TEST_CLIENT_ID = "river-test"


def args_insert_opts(args: Any) -> InsertOpts | None:
    """The args type's default options (its ``insert_opts()``), validated like the client does."""
    fn = getattr(args, "insert_opts", None)
    opts = fn() if callable(fn) else None
    if opts is not None and not isinstance(opts, InsertOpts):
        raise ValidationError(f"{type(args).__qualname__}.insert_opts() must return InsertOpts")
    return opts


def build_job(
    args: Any,
    opts: InsertOpts | None = None,
    *,
    id: int = 1,
    attempt: int = 1,
    state: JobState | str = JobState.RUNNING,
    now: datetime | None = None,
    client_id: str = TEST_CLIENT_ID,
    client_max_attempts: int = MAX_ATTEMPTS_DEFAULT,
    attempted_by: Sequence[str] | None = None,
    errors: Sequence[AttemptError] = (),
    metadata: Mapping[str, Any] | None = None,
    finalized_at: datetime | None = None,
) -> JobRow:
    """A ``JobRow`` for ``args`` as a client would have inserted and a producer claimed it.

    ``attempt`` > 0 fills ``attempted_at`` (= ``now``) and ``attempted_by``
    (``client_id`` unless given); 0 leaves them empty, as for a job never run.
    ``metadata`` replaces the metadata resolved from ``opts``. Finalized
    states get ``finalized_at`` = ``now`` unless given.
    """
    now = require_aware(now, "now") if now is not None else datetime.now(UTC)
    state = JobState(state)
    if attempt < 0:
        raise ValidationError(f"attempt cannot be negative, got {attempt}")
    if id < 1:
        raise ValidationError(f"job id must be positive, got {id}")
    if opts is not None and not isinstance(opts, InsertOpts):
        raise ValidationError(f"opts must be InsertOpts, got {type(opts).__name__}")
    kind = kind_of(args)
    params = resolve_insert_params(
        kind, encode_args(args), insert_opts=opts, args_opts=args_insert_opts(args),
        client_max_attempts=client_max_attempts, unique_fields=unique_fields_of(type(args)), now=now,
    )
    row_metadata = dict(metadata) if metadata is not None else json.loads(params.metadata)
    if attempted_by is None:
        attempted_by = (client_id,) if attempt > 0 else ()
    if finalized_at is None and state.finalized:
        finalized_at = now
    return JobRow(
        id=id,
        kind=kind,
        encoded_args=params.encoded_args,
        state=state,
        queue=params.queue,
        priority=params.priority,
        attempt=attempt,
        max_attempts=params.max_attempts,
        attempted_at=now if attempt > 0 else None,
        attempted_by=tuple(attempted_by),
        created_at=now,
        finalized_at=finalized_at,
        scheduled_at=params.scheduled_at or now,
        errors=tuple(errors),
        metadata=row_metadata,
        tags=params.tags,
        unique_key=params.unique_key,
        unique_states=params.unique_states,
    )


__all__ = ["TEST_CLIENT_ID", "args_insert_opts", "build_job"]
