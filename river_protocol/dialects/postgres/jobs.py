"""Postgres plans for a job's way through the queue: insert, claim, and the state a
finished attempt leaves (docs/protocol.md §5-§8).

An insert conflicts on ``river_job_unique_idx`` and reports a skipped
duplicate by ``xmax``; ``InsertJobsFast`` uses COPY, which has no RETURNING.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import json_text, refuse_repeated_unique_keys, results_from_rows
from river_protocol.dialects.postgres.fragments import JOB_COLUMNS, binder, job_rows, now_sql
from river_protocol.dialects.rows import (
    Binder,
    completed_row,
    job_row_from_pg,
    pg_changeable_columns,
    pg_job_columns,
    pg_slim_job_columns,
)
from river_protocol.errors import ValidationError
from river_protocol.intents import (
    ClaimJobs,
    CopyRows,
    GetCancelRequested,
    InsertFullJobs,
    InsertJobs,
    InsertJobsFast,
    InsertResult,
    Intent,
    ReconcileClaim,
    SetStateIfRunning,
    SetStateUpdate,
    Statement,
)
from river_protocol.job import JobRow


def _conflict_target(d: Any) -> str:
    # Must restate the partial index predicate so Postgres infers river_job_unique_idx.
    return (
        "(unique_key) WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL"
        f" AND {d.prefix}river_job_state_in_bitmask(unique_states, state)"
    )


def _insert_jobs(d: Any, intent: InsertJobs) -> Plan[list[InsertResult]]:
    if not intent.jobs:
        raise ValidationError("no jobs to insert")
    refuse_repeated_unique_keys(intent.jobs)
    jobs = intent.jobs
    b = binder()
    sql = f"""
        INSERT INTO {d.prefix}river_job
            (args, created_at, kind, max_attempts, metadata, priority, queue,
             scheduled_at, state, tags, unique_key, unique_states)
        SELECT args::jsonb, coalesce(created_at, now()), kind, max_attempts, metadata::jsonb,
               priority, queue, coalesce(scheduled_at, now()), state::{d.prefix}river_job_state,
               ARRAY(SELECT jsonb_array_elements_text(tags::jsonb))::varchar(255)[],
               decode(unique_key, 'hex'), nullif(unique_states, 0)::bit(8)
        FROM unnest(
            {b.p([json_text(j.encoded_args) for j in jobs])}::text[],
            {b.p([j.created_at for j in jobs])}::timestamptz[],
            {b.p([j.kind for j in jobs])}::text[],
            {b.p([j.max_attempts for j in jobs])}::smallint[],
            {b.p([json_text(j.metadata or b"{}") for j in jobs])}::text[],
            {b.p([j.priority for j in jobs])}::smallint[],
            {b.p([j.queue for j in jobs])}::text[],
            {b.p([j.scheduled_at for j in jobs])}::timestamptz[],
            {b.p([j.state.value for j in jobs])}::text[],
            {b.p([json.dumps(list(j.tags)) for j in jobs])}::text[],
            {b.p([j.unique_key.hex() if j.unique_key else None for j in jobs])}::text[],
            {b.p([j.unique_states or 0 for j in jobs])}::int[]
        ) WITH ORDINALITY AS input(args, created_at, kind, max_attempts, metadata, priority,
                                   queue, scheduled_at, state, tags, unique_key, unique_states, n)
        ORDER BY n
        ON CONFLICT {_conflict_target(d)}
        -- A no-op update, so the skipped row is returned (xmax set). It keeps the stored
        -- kind: a job unique without its kind may have another one, and must keep its worker.
        DO UPDATE SET kind = river_job.kind
        RETURNING {JOB_COLUMNS}, (xmax <> 0)
    """
    # RETURNING follows the SELECT's order (as Go relies on as well).
    rows = yield Statement(sql, tuple(b.params), binary=True)
    inserted = [(job_row_from_pg(r), bool(r[-1])) for r in rows]
    return results_from_rows(inserted)


_COPY_COLUMNS = (
    "args", "kind", "max_attempts", "metadata", "priority", "queue", "state", "tags",
    "unique_key", "unique_states",
)


def _insert_jobs_fast(d: Any, intent: InsertJobsFast) -> Plan[int]:
    if not intent.jobs:
        raise ValidationError("no jobs to insert")
    refuse_repeated_unique_keys(intent.jobs)
    # COPY cannot fall back to a column default per row, so rows that leave a
    # time to the database go in a COPY that omits that column.
    groups: dict[tuple[bool, bool], list[tuple[Any, ...]]] = {}
    for j in intent.jobs:
        values: tuple[Any, ...] = (
            json_text(j.encoded_args), j.kind, j.max_attempts, json_text(j.metadata or b"{}"),
            j.priority, j.queue, j.state.value, list(j.tags), j.unique_key,
            format(j.unique_states, "08b") if j.unique_states else None,
        )
        has = (j.created_at is not None, j.scheduled_at is not None)
        extra = tuple(t for t in (j.created_at, j.scheduled_at) if t is not None)
        groups.setdefault(has, []).append(values + extra)
    for (has_created, has_scheduled), rows in groups.items():
        columns = _COPY_COLUMNS + (("created_at",) if has_created else ()) + (
            ("scheduled_at",) if has_scheduled else ()
        )
        yield CopyRows(f"{d.prefix}river_job", columns, tuple(rows))
    return len(intent.jobs)


def _insert_full_jobs(d: Any, intent: InsertFullJobs) -> Plan[list[JobRow]]:
    if not intent.rows:
        return []
    rs = intent.rows
    b = binder()
    sql = f"""
        INSERT INTO {d.prefix}river_job
            (args, attempt, attempted_at, attempted_by, created_at, errors, finalized_at, kind,
             max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key,
             unique_states)
        SELECT args::jsonb, attempt, attempted_at,
               CASE WHEN attempted_by IS NULL THEN NULL
                    ELSE ARRAY(SELECT jsonb_array_elements_text(attempted_by::jsonb)) END,
               coalesce(created_at, now()),
               CASE WHEN errors IS NULL THEN NULL
                    ELSE ARRAY(SELECT jsonb_array_elements(errors::jsonb)) END,
               finalized_at, kind, max_attempts, metadata::jsonb, priority, queue,
               coalesce(scheduled_at, now()), state::{d.prefix}river_job_state,
               ARRAY(SELECT jsonb_array_elements_text(tags::jsonb))::varchar(255)[],
               decode(unique_key, 'hex'), nullif(unique_states, 0)::bit(8)
        FROM unnest(
            {b.p([json_text(r.encoded_args) for r in rs])}::text[],
            {b.p([r.attempt for r in rs])}::smallint[],
            {b.p([r.attempted_at for r in rs])}::timestamptz[],
            {b.p([json.dumps(list(r.attempted_by)) if r.attempted_by else None for r in rs])}::text[],
            {b.p([r.created_at for r in rs])}::timestamptz[],
            {b.p([_errors_json(r.errors) for r in rs])}::text[],
            {b.p([r.finalized_at for r in rs])}::timestamptz[],
            {b.p([r.kind for r in rs])}::text[],
            {b.p([r.max_attempts for r in rs])}::smallint[],
            {b.p([json_text(r.metadata or b"{}") for r in rs])}::text[],
            {b.p([r.priority for r in rs])}::smallint[],
            {b.p([r.queue for r in rs])}::text[],
            {b.p([r.scheduled_at for r in rs])}::timestamptz[],
            {b.p([r.state.value for r in rs])}::text[],
            {b.p([json.dumps(list(r.tags)) for r in rs])}::text[],
            {b.p([r.unique_key.hex() if r.unique_key else None for r in rs])}::text[],
            {b.p([r.unique_states or 0 for r in rs])}::int[]
        ) WITH ORDINALITY AS input(args, attempt, attempted_at, attempted_by, created_at, errors,
                                   finalized_at, kind, max_attempts, metadata, priority, queue,
                                   scheduled_at, state, tags, unique_key, unique_states, n)
        ORDER BY n
        RETURNING {JOB_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params), binary=True)
    return job_rows(rows)


def _errors_json(errors: tuple[bytes, ...]) -> str | None:
    return None if not errors else "[" + ",".join(e.decode() for e in errors) + "]"


def _claim_filters(b: Binder, intent: ClaimJobs) -> str:
    """Extra claim conditions (leading `` AND``); empty when no filter is set."""
    out = ""
    if intent.kinds is not None:
        out += f" AND kind = ANY({b.p(list(intent.kinds))}::text[])"
    if intent.tags_any is not None:
        out += f" AND tags && {b.p(list(intent.tags_any))}::varchar(255)[]"
    if intent.untagged_only:
        out += " AND cardinality(tags) = 0"
    return out


def _claim_jobs(d: Any, intent: ClaimJobs) -> Plan[list[JobRow]]:
    if intent.limit <= 0:
        return []
    if intent.max_attempted_by < 1:
        raise ValidationError("max_attempted_by must be at least 1")
    if intent.tags_any is not None and intent.untagged_only:
        raise ValidationError("a claim takes either tags_any or untagged_only, not both")
    b = binder()
    sql = f"""
        WITH locked AS (
            SELECT id FROM {d.prefix}river_job
            WHERE state = 'available' AND queue = {b.p(intent.queue)}::text
              AND scheduled_at <= {now_sql(b, intent.now)}{_claim_filters(b, intent)}
            ORDER BY priority ASC, scheduled_at ASC, id ASC
            LIMIT {b.p(intent.limit)}::integer
            FOR UPDATE SKIP LOCKED
        )
        UPDATE {d.prefix}river_job j
        {claim_set_sql(b, intent)}
        FROM locked
        WHERE j.id = locked.id{_ASYNC_COMMIT if intent.asynchronous_commit else ""}
        RETURNING {pg_job_columns("j")}
    """
    rows = yield Statement(sql, tuple(b.params), binary=True)
    return job_rows(rows)


def claim_set_sql(b: Binder, intent: ClaimJobs, clock: str = "now()") -> str:
    """The SET clause of a claim of ``river_job j``: running, one more attempt, by this client
    (``clock``: the time when ``intent.now`` is None)."""
    cap = intent.max_attempted_by
    # attempt is a smallint: least() keeps a hand-written maximum from failing every claim of the queue.
    return f"""SET state = 'running',
            attempt = least(j.attempt, 32766) + 1,
            attempted_at = {now_sql(b, intent.now, clock)},
            attempted_by = array_append(
                CASE WHEN coalesce(array_length(j.attempted_by, 1), 0) >= {b.p(cap)}::int
                     THEN j.attempted_by[array_length(j.attempted_by, 1) - {b.p(cap)}::int + 2:]
                     ELSE j.attempted_by END,
                {b.p(intent.client_id)}::text)"""


# The claim's transaction only (set_config's is_local): evaluated with each row it updates,
# so a claim that takes a job commits without waiting for its WAL flush.
_ASYNC_COMMIT = " AND set_config('synchronous_commit', 'off', true) IS NOT NULL"


def _reconcile_claim(d: Any, intent: ReconcileClaim) -> Plan[list[int]]:
    b = binder()
    # Placeholders are numbered as written, so the WHERE clause is built in its own order.
    where = (f"state = 'running' AND queue = {b.p(intent.queue)}::text"
             f" AND attempted_by[array_length(attempted_by, 1)] = {b.p(intent.client_id)}::text")
    if intent.claimed_since is not None:
        where += f" AND attempted_at >= {b.p(intent.claimed_since)}::timestamptz"
    where += f" AND NOT (id = ANY({b.p(list(intent.exclude_ids))}::bigint[]))"
    # SET reads the row as it was, so both CASEs see the claim's attempt and attempted_by.
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = 'available',
            attempt = greatest(attempt - 1, 0),
            attempted_at = CASE WHEN attempt <= 1 THEN NULL ELSE attempted_at END,
            attempted_by = CASE WHEN coalesce(array_length(attempted_by, 1), 0) <= 1 THEN NULL
                                ELSE attempted_by[1:array_length(attempted_by, 1) - 1] END
        WHERE {where}
        RETURNING id
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(int(r[0]) for r in rows)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Whole seconds and the rest apart: each factor stays far below 2**53, so the float8 an
# interval is multiplied by is exact for any year from 1 to 9999.
_FROM_MICROS = ("timestamptz '1970-01-01 00:00:00+00' + ({0} / 1000000) * interval '1 second'"
                " + mod({0}, 1000000) * interval '1 microsecond'")
_MICROSECOND = timedelta(microseconds=1)


def _micros_column(times: list[datetime | None]) -> list[int | None] | None:
    """Each of ``times`` as microseconds since the epoch (None when none is set, as ``_column``).

    A third of the cost of sending ISO text, and exact both ways (the statement adds it to the
    epoch as an interval). One pass with no call per time: a completion batch has a
    finalized_at per job."""
    if times.count(None) == len(times):
        return None
    return [None if at is None else
            ((at if at.tzinfo is not None else at.replace(tzinfo=UTC)) - _EPOCH) // _MICROSECOND
            for at in times]


def _column(values: list[Any]) -> list[Any] | None:
    """``values``, or None when every one is None (bound as a NULL array)."""
    return values if values.count(None) != len(values) else None


# The completion's column lists, (updated rows, the UPDATE's RETURNING, rows not updated), built
# once: slim (marked true) or whole (marked false) for the updated rows, whole for the rest. The
# updated rows pass through a CTE, so a slim read-back keeps only what it reads there (a tenth
# of the statement's time at 2,000 rows, EXPLAIN ANALYZE).
_SLIM_READ_BACK = (f"{pg_slim_job_columns('u')}, true", pg_changeable_columns("j"),
                   f"{pg_job_columns('j')}, false")
_WHOLE_READ_BACK = (pg_job_columns("u"), "j.*", pg_job_columns("j"))


def _set_state_if_running(d: Any, intent: SetStateIfRunning) -> Plan[list[JobRow]]:
    if not intent.updates:
        return []
    us = intent.updates
    b = binder()
    # unnest pads a NULL array with NULLs, which every use below reads as "nothing to set"; a
    # column no update sets (most batches are plain completions) is bound as NULL, not as a list.
    merging = any(u.metadata_do_merge for u in us)
    input_cte = f"""
        SELECT id, state, attempt, error,
               {_FROM_MICROS.format("finalized_us")} AS finalized_at,
               {_FROM_MICROS.format("scheduled_us")} AS scheduled_at, do_merge, updates
        FROM unnest(
            {b.p([u.id for u in us])}::bigint[],
            {b.p([u.state._value_ for u in us])}::text[],
            {b.p(_column([u.attempt for u in us]))}::int[],
            {b.p(_column([json_text(u.error) if u.error is not None else None for u in us]))}::text[],
            {b.p(_micros_column([u.finalized_at for u in us]))}::bigint[],
            {b.p(_micros_column([u.scheduled_at for u in us]))}::bigint[],
            {b.p([u.metadata_do_merge for u in us] if merging else None)}::boolean[],
            {b.p([json_text(u.metadata_updates or b"{}") for u in us] if merging else None)}::text[]
        ) AS t(id, state, attempt, error, finalized_us, scheduled_us, do_merge, updates)
    """
    now = now_sql(b, intent.now)
    # Every update is a run's whose claimed row we hold (plain completions): the updated rows
    # come back slim, only what an update can change, completed from the claims. Less for the
    # server to form and send and for us to read; the rest of each row is in hand already.
    slim = all(u.claimed is not None for u in us)
    updated_columns, returning, whole_columns = _SLIM_READ_BACK if slim else _WHOLE_READ_BACK
    # The plan must not hang on the table's statistics. Joined to the input alone, a table the
    # planner believes small (never analysed: a new database, or autovacuum not yet by) is read
    # whole into a hash for every batch, and so was every row the second branch looked for;
    # measured on a 100,000-row table, 2,000 rows a batch, backend CPU 57 -> 20 us a row. The
    # ids as an array go through the primary key whatever the estimates, and the rows not
    # updated (someone else finished or deleted them: rare) are found from the ids left over,
    # so a batch that updated every row reads none again.
    # should_cancel (§8.1): a retry or snooze of a job someone tried to cancel.
    cancel = (
        "(j.state = 'running' AND i.state IN ('retryable', 'scheduled')"
        " AND j.metadata ? 'cancel_attempted_at')"
    )
    sql = f"""
        WITH input AS ({input_cte}),
        updated AS (
            UPDATE {d.prefix}river_job j
            SET state = CASE WHEN {cancel} THEN 'cancelled'::{d.prefix}river_job_state
                             WHEN j.state = 'running' THEN i.state::{d.prefix}river_job_state
                             ELSE j.state END,
                finalized_at = CASE WHEN {cancel} THEN {now}
                                    WHEN j.state = 'running' AND i.finalized_at IS NOT NULL
                                        THEN i.finalized_at
                                    ELSE j.finalized_at END,
                attempt = CASE WHEN j.state = 'running' AND NOT {cancel} AND i.attempt IS NOT NULL
                               THEN i.attempt ELSE j.attempt END,
                scheduled_at = CASE WHEN j.state = 'running' AND NOT {cancel}
                                         AND i.scheduled_at IS NOT NULL
                                    THEN i.scheduled_at ELSE j.scheduled_at END,
                errors = CASE WHEN j.state = 'running' AND i.error IS NOT NULL
                              THEN array_append(j.errors, i.error::jsonb) ELSE j.errors END,
                metadata = CASE WHEN i.do_merge THEN j.metadata || i.updates::jsonb
                                ELSE j.metadata END
            FROM input i
            WHERE j.id = ANY(ARRAY(SELECT id FROM input)) AND j.id = i.id
              AND (j.state = 'running' OR i.do_merge)
            RETURNING {returning}
        )
        SELECT {updated_columns} FROM updated u
        UNION ALL
        SELECT {whole_columns} FROM {d.prefix}river_job j
        WHERE j.id = ANY(ARRAY(SELECT id FROM input EXCEPT SELECT id FROM updated))
        ORDER BY 1
    """
    rows = yield Statement(sql, tuple(b.params), binary=True)
    if not slim:
        return job_rows(rows)
    return (yield from _read_back_slim(d, rows, us))


def _read_back_slim(d: Any, rows: list[tuple[Any, ...]],
                    updates: tuple[SetStateUpdate, ...]) -> Plan[list[JobRow]]:
    """The rows of a slim read-back (``SetStateUpdate.claimed``): an updated row still holding
    its claim's attempted_at is the claim with what the update changed (``completed_row``); one
    claimed again since (by another client, after a rescue) is selected whole. The rows the
    statement did not update came back whole already (marked false)."""
    claims = {u.id: c for u in updates if (c := u.claimed) is not None}  # every update has one
    out: list[JobRow] = []
    again: list[int] = []
    for row in rows:
        if not row[-1]:
            out.append(job_row_from_pg(row[:-1]))
            continue
        claim = claims[row[0]]
        if row[8] != claim.attempted_at:
            again.append(row[0])
            continue
        out.append(completed_row(claim, row[3], row[6], row[11], row[12], row[13], row[14], job_row_from_pg))
    if again:
        b = binder()
        whole = yield Statement(
            f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE id = ANY({b.p(again)}::bigint[])",
            tuple(b.params), binary=True)
        out.extend(job_rows(whole))
        out.sort(key=lambda job: job.id)
    return out


def _get_cancel_requested(d: Any, intent: GetCancelRequested) -> Plan[tuple[tuple[int, str], ...]]:
    b = binder()
    sql = f"""
        SELECT id, metadata->>'cancel_attempted_at' FROM {d.prefix}river_job
        WHERE id = ANY({b.p(list(intent.ids))}::bigint[]) AND state = 'running'
          AND metadata ? 'cancel_attempted_at'
        ORDER BY id
    """
    rows = yield Statement(sql, tuple(b.params))
    return tuple((int(row[0]), str(row[1])) for row in rows)


PLANNERS: dict[type[Intent], Planner] = {
    GetCancelRequested: _get_cancel_requested,
    InsertJobs: _insert_jobs,
    InsertJobsFast: _insert_jobs_fast,
    InsertFullJobs: _insert_full_jobs,
    ClaimJobs: _claim_jobs,
    ReconcileClaim: _reconcile_claim,
    SetStateIfRunning: _set_state_if_running,
}
