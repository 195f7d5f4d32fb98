"""SQLite plans for a job's way through the queue: insert, claim, and the state a
finished attempt leaves (docs/protocol.md §5-§8).

SQLite cannot tell an inserted row from a conflicting one, so ``InsertJobs``
writes a nonce into the metadata of the rows it inserts and compares it on the
way back; a finished attempt is one UPDATE per job.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from river_protocol import metadata_keys
from river_protocol.dialects.base import Plan, Planner
from river_protocol.dialects.common import json_text, refuse_repeated_unique_keys, results_from_rows
from river_protocol.dialects.rows import SQLITE_JSON, Binder, completed_row, job_row_from_sqlite, sqlite_now
from river_protocol.dialects.sqlite.fragments import (
    ERRORS_ARRAY,
    JOB_COLUMNS,
    binder,
    in_bitmask,
    job_rows,
    json_list,
    limit_param,
    sqlite_time,
)
from river_protocol.errors import ValidationError
from river_protocol.intents import (
    ClaimJobs,
    FullJobRow,
    GetCancelRequested,
    InsertFullJobs,
    InsertJobs,
    InsertJobsFast,
    InsertParams,
    InsertResult,
    Intent,
    ReconcileClaim,
    SetStateIfRunning,
    SetStateUpdate,
    Statement,
)
from river_protocol.job import JobRow
from river_protocol.states import JobState

_NONCE_KEY = metadata_keys.UNIQUE_NONCE


_CONFLICT_TARGET = (
    f"(unique_key) WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND {in_bitmask()}"
)


def _insert_values(jobs: list[InsertParams]) -> str:
    return json.dumps([
        {
            "args": json_text(j.encoded_args),
            "created_at": sqlite_time(j.created_at),
            "kind": j.kind,
            "max_attempts": j.max_attempts,
            "metadata": json_text(j.metadata or b"{}"),
            "priority": j.priority,
            "queue": j.queue,
            "scheduled_at": sqlite_time(j.scheduled_at),
            "state": j.state.value,
            "tags": json_list(j.tags),
            "unique_key": j.unique_key.hex() if j.unique_key else None,
            "unique_states": j.unique_states or None,
        }
        for j in jobs
    ])


def _insert_sql(d: Any, b: Binder, jobs: list[InsertParams], nonce: str | None, returning: str) -> str:
    metadata = "jsonb(value ->> 'metadata')"
    if nonce is not None:
        # Skip detection (§5.2): a returned row carrying another nonce already existed.
        metadata = f"jsonb_set({metadata}, '$.\"{_NONCE_KEY}\"', {b.p(nonce)})"
    # A no-op update returns the skipped row; it keeps the stored kind, which may differ from
    # ours when the job is unique without its kind.
    conflict = "DO UPDATE SET kind = river_job.kind" if nonce is not None else "DO NOTHING"
    return f"""
        INSERT INTO {d.prefix}river_job
            (args, created_at, kind, max_attempts, metadata, priority, queue, scheduled_at,
             state, tags, unique_key, unique_states)
        SELECT jsonb(value ->> 'args'),
               coalesce(value ->> 'created_at', {sqlite_now(b, None)}),
               value ->> 'kind', value ->> 'max_attempts', {metadata},
               value ->> 'priority', value ->> 'queue',
               coalesce(value ->> 'scheduled_at', {sqlite_now(b, None)}),
               value ->> 'state', jsonb(value ->> 'tags'),
               unhex(value ->> 'unique_key'), value ->> 'unique_states'
        FROM json_each({b.p(_insert_values(jobs))})
        WHERE true
        ON CONFLICT {_CONFLICT_TARGET}
        {conflict}
        RETURNING {returning}
    """


def _insert_jobs(d: Any, intent: InsertJobs) -> Plan[list[InsertResult]]:
    if not intent.jobs:
        raise ValidationError("no jobs to insert")
    if not intent.nonce:
        raise ValidationError("SQLite inserts need InsertJobs.nonce to detect skipped duplicates")
    refuse_repeated_unique_keys(intent.jobs)
    b = binder()
    sql = _insert_sql(d, b, list(intent.jobs), intent.nonce, JOB_COLUMNS)
    # RETURNING yields rows in json_each order, which is the input order.
    rows = yield Statement(sql, tuple(b.params))
    inserted = []
    for r in rows:
        job = job_row_from_sqlite(r)
        inserted.append((job, job.metadata.get(_NONCE_KEY) != intent.nonce))
    return results_from_rows(inserted)


def _insert_jobs_fast(d: Any, intent: InsertJobsFast) -> Plan[int]:
    if not intent.jobs:
        raise ValidationError("no jobs to insert")
    refuse_repeated_unique_keys(intent.jobs)
    b = binder()
    rows = yield Statement(_insert_sql(d, b, list(intent.jobs), None, "1"), tuple(b.params))
    return len(rows)


def _full_values(rs: tuple[FullJobRow, ...]) -> str:
    return json.dumps([
        {
            "args": json_text(r.encoded_args),
            "attempt": r.attempt,
            "attempted_at": sqlite_time(r.attempted_at),
            "attempted_by": json_list(r.attempted_by) if r.attempted_by else None,
            "created_at": sqlite_time(r.created_at),
            "errors": "[" + ",".join(e.decode() for e in r.errors) + "]" if r.errors else None,
            "finalized_at": sqlite_time(r.finalized_at),
            "kind": r.kind,
            "max_attempts": r.max_attempts,
            "metadata": json_text(r.metadata or b"{}"),
            "priority": r.priority,
            "queue": r.queue,
            "scheduled_at": sqlite_time(r.scheduled_at),
            "state": r.state.value,
            "tags": json_list(r.tags),
            "unique_key": r.unique_key.hex() if r.unique_key else None,
            "unique_states": r.unique_states or None,
        }
        for r in rs
    ])


def _insert_full_jobs(d: Any, intent: InsertFullJobs) -> Plan[list[JobRow]]:
    if not intent.rows:
        return []
    b = binder()
    sql = f"""
        INSERT INTO {d.prefix}river_job
            (args, attempt, attempted_at, attempted_by, created_at, errors, finalized_at, kind,
             max_attempts, metadata, priority, queue, scheduled_at, state, tags, unique_key,
             unique_states)
        SELECT jsonb(value ->> 'args'), value ->> 'attempt', value ->> 'attempted_at',
               jsonb(value ->> 'attempted_by'),
               coalesce(value ->> 'created_at', {sqlite_now(b, None)}),
               jsonb(value ->> 'errors'), value ->> 'finalized_at', value ->> 'kind',
               value ->> 'max_attempts', jsonb(value ->> 'metadata'), value ->> 'priority',
               value ->> 'queue', coalesce(value ->> 'scheduled_at', {sqlite_now(b, None)}),
               value ->> 'state', jsonb(value ->> 'tags'), unhex(value ->> 'unique_key'),
               value ->> 'unique_states'
        FROM json_each({b.p(_full_values(intent.rows))})
        RETURNING {JOB_COLUMNS}
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


def _claim_filters(b: Binder, intent: ClaimJobs) -> str:
    """Extra claim conditions (leading `` AND``); empty when no filter is set."""
    out = ""
    if intent.kinds is not None:
        out += f" AND kind IN (SELECT value FROM json_each({b.p(json_list(intent.kinds))}))"
    if intent.tags_any is not None:
        out += (" AND EXISTS (SELECT 1 FROM json_each(tags) AS tag WHERE tag.value IN"
                f" (SELECT value FROM json_each({b.p(json_list(intent.tags_any))})))")
    if intent.untagged_only:
        out += " AND json_array_length(tags) = 0"
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
        UPDATE {d.prefix}river_job
        {claim_set_sql(b, intent)}
        WHERE id IN (
            SELECT id FROM {d.prefix}river_job
            WHERE state = 'available' AND queue = {b.p(intent.queue)} AND priority >= 0
              AND scheduled_at <= {sqlite_now(b, intent.now)}{_claim_filters(b, intent)}
            ORDER BY priority ASC, scheduled_at ASC, id ASC
            LIMIT {limit_param(b, intent.limit)}
        )
        RETURNING {JOB_COLUMNS}
    """
    return job_rows((yield Statement(sql, tuple(b.params))))


def claim_set_sql(b: Binder, intent: ClaimJobs) -> str:
    """The SET clause of a claim of ``river_job``: running, one more attempt, by this client."""
    keep = intent.max_attempted_by - 1
    # A list another writer stored as malformed JSON is read as empty: JSON functions on it
    # would fail the claim, and with it every claim of the queue.
    earlier = "(CASE WHEN json_valid(river_job.attempted_by, 10) THEN river_job.attempted_by END)"
    # A first attempt (no list yet) skips the correlated subquery, which costs a json_each and a
    # sort per row; it builds the very bytes the subquery's empty result would.
    return f"""SET state = 'running',
            attempt = attempt + 1,
            attempted_at = {sqlite_now(b, intent.now)},
            attempted_by = CASE WHEN attempted_by IS NULL
                THEN jsonb_insert(jsonb('[]'), '$[#]', {b.p(intent.client_id)})
                ELSE jsonb_insert(
                coalesce((
                    SELECT jsonb_group_array(kept.value) FROM (
                        SELECT value FROM json_each({earlier})
                        WHERE key >= json_array_length({earlier}) - {b.p(keep)}
                        ORDER BY key
                    ) AS kept
                ), jsonb('[]')),
                '$[#]', {b.p(intent.client_id)}) END"""


def _reconcile_claim(d: Any, intent: ReconcileClaim) -> Plan[list[int]]:
    b = binder()
    # Placeholders bind in the order written, so the WHERE clause is built in its own order.
    where = (f"state = 'running' AND queue = {b.p(intent.queue)} AND json_type(attempted_by) = 'array'"
             f" AND attempted_by ->> '$[#-1]' = {b.p(intent.client_id)}")
    if intent.claimed_since is not None:
        where += f" AND attempted_at >= {b.p(sqlite_time(intent.claimed_since))}"
    where += f" AND id NOT IN (SELECT value FROM json_each({b.p(json_list(intent.exclude_ids))}))"
    # SET reads the row as it was, so both CASEs see the claim's attempt and attempted_by.
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = 'available',
            attempt = max(attempt - 1, 0),
            attempted_at = CASE WHEN attempt <= 1 THEN NULL ELSE attempted_at END,
            attempted_by = CASE WHEN json_array_length(attempted_by) <= 1 THEN NULL
                                ELSE jsonb_remove(attempted_by, '$[#-1]') END
        WHERE {where}
        RETURNING id
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(int(r[0]) for r in rows)


def _set_state_one(d: Any, u: SetStateUpdate, now: datetime | None) -> Statement:
    b = binder()

    def cancel() -> str:
        # should_cancel (§8.1): a retry or snooze of a job someone tried to cancel.
        return (
            f"({b.p(u.state.value)} IN ('retryable', 'scheduled')"
            " AND json_type(metadata, '$.cancel_attempted_at') IS NOT NULL)"
        )

    error = None if u.error is None else json_text(u.error)
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = CASE WHEN {cancel()} THEN 'cancelled' ELSE {b.p(u.state.value)} END,
            finalized_at = CASE WHEN {cancel()} THEN {sqlite_now(b, now)}
                                ELSE coalesce({b.p(sqlite_time(u.finalized_at))}, finalized_at) END,
            attempt = CASE WHEN {cancel()} THEN attempt ELSE coalesce({b.p(u.attempt)}, attempt) END,
            scheduled_at = CASE WHEN {cancel()} THEN scheduled_at
                                ELSE coalesce({b.p(sqlite_time(u.scheduled_at))}, scheduled_at) END,
            errors = CASE WHEN {b.p(error)} IS NULL THEN errors
                          ELSE jsonb_insert({ERRORS_ARRAY}, '$[#]', json({b.p(error)})) END,
            metadata = CASE WHEN {b.p(u.metadata_do_merge)}
                            THEN jsonb_patch(metadata, jsonb({b.p(json_text(u.metadata_updates or b"{}"))}))
                            ELSE metadata END
        WHERE id = {b.p(u.id)} AND state = 'running'
        RETURNING {JOB_COLUMNS}
    """
    return Statement(sql, tuple(b.params))


def _plain_completion(u: SetStateUpdate) -> bool:
    """Completed with nothing else to set: no cancel override, error, attempt, schedule or merge."""
    return (u.state is JobState.COMPLETED and u.error is None and u.attempt is None
            and u.scheduled_at is None and not u.metadata_do_merge)


def _complete_plain(d: Any, updates: list[SetStateUpdate]) -> Plan[list[JobRow]]:
    """Plain completions in two statements, whatever their number, to the rows ``_set_state_one``
    would leave: the running ones updated, the others as they are.

    ``+j.state`` keeps SQLite off the state index: with it, the planner loops over every running
    row and scans the batch for each (4 s for 2,000 of each); without, it looks each batch entry
    up by rowid (14 ms).

    A row still holding its claim's attempted_at (``SetStateUpdate.claimed``) is read back slim,
    only what an update can change, and completed from the claim (``rows.completed_row``): the
    JSON columns' conversion to text is most of a completion's cost. Any other row is selected
    whole by the second statement."""
    # Each claim's attempted_at as stored: only a row still holding it is as its claim left it.
    claimed = {u.id: (c, sqlite_time(c.attempted_at)) for u in updates if (c := u.claimed) is not None}
    pairs = json.dumps([[u.id, sqlite_time(u.finalized_at)] for u in updates])
    # RETURNING may name only the updated table's columns, so the claim is checked here.
    rows = yield Statement(f"""
        UPDATE {d.prefix}river_job AS j
        SET state = 'completed', finalized_at = coalesce(i.finalized_at, j.finalized_at)
        FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS finalized_at
              FROM json_each(?)) AS i
        WHERE j.id = i.id AND +j.state = 'running'
        RETURNING id, attempted_at, state, attempt, finalized_at, scheduled_at,
                  {SQLITE_JSON.format("errors")}, {SQLITE_JSON.format("metadata")}
    """, (pairs,))
    done = [completed_row(claim[0], state, attempt, finalized_at, scheduled_at, errors, metadata,
                          job_row_from_sqlite)
            for job_id, attempted_at, state, attempt, finalized_at, scheduled_at, errors, metadata in rows
            if (claim := claimed.get(job_id)) is not None and attempted_at == claim[1]]
    updated = {job.id for job in done}
    rest = [u.id for u in updates if u.id not in updated]
    if rest:
        rows = yield Statement(
            f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE id IN (SELECT value FROM json_each(?))",
            (json_list(rest),),
        )
        done.extend(job_rows(rows))
    return done


def _set_state_if_running(d: Any, intent: SetStateIfRunning) -> Plan[list[JobRow]]:
    out: list[JobRow] = []
    # SQLite has no unnest: a job a statement, except for the batch's plain completions.
    plain = [u for u in intent.updates if _plain_completion(u)]
    if len(plain) < 2:  # one gains nothing from the batch statement
        plain = []
    else:
        out.extend((yield from _complete_plain(d, plain)))
    batched = {u.id for u in plain}
    for u in intent.updates:
        if u.id in batched:
            continue
        rows = yield _set_state_one(d, u, intent.now)
        if not rows:
            # Not running (or gone): only metadata may change (§8.1).
            if u.metadata_do_merge:
                rows = yield Statement(
                    f"UPDATE {d.prefix}river_job SET metadata = jsonb_patch(metadata, jsonb(?))"
                    f" WHERE id = ? RETURNING {JOB_COLUMNS}",
                    (json_text(u.metadata_updates or b"{}"), u.id),
                )
            else:
                rows = yield Statement(f"SELECT {JOB_COLUMNS} FROM {d.prefix}river_job WHERE id = ?", (u.id,))
        out.extend(job_rows(rows))
    return sorted(out, key=lambda job: job.id)


def _get_cancel_requested(d: Any, intent: GetCancelRequested) -> Plan[tuple[tuple[int, str], ...]]:
    b = binder()
    sql = f"""
        SELECT id, json_extract(metadata, '$.cancel_attempted_at') FROM {d.prefix}river_job
        WHERE id IN (SELECT value FROM json_each({b.p(json_list(intent.ids))})) AND state = 'running'
          AND json_type(metadata, '$.cancel_attempted_at') IS NOT NULL
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
