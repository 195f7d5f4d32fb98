"""Postgres plans for every job, queue, leader, notification and index intent.

Batched intents ship one array per column and ``unnest`` them, so a batch is
one statement whatever its size (psycopg adapts lists to arrays; JSON goes as
text and is cast). Rows come back through ``rows.pg_job_columns`` so one
parser reads them all. Conditions follow docs/protocol.md §5-§14.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from river_protocol.dialects.base import Plan
from river_protocol.dialects.rows import (
    LEADER_COLUMNS,
    PG_QUEUE_COLUMNS,
    Binder,
    job_row_from_pg,
    leader_row,
    pg_job_columns,
    queue_row,
)
from river_protocol.errors import JobNotFoundError, QueueNotFoundError, ValidationError
from river_protocol.intents import (
    CancelJob,
    ClaimJobs,
    CopyRows,
    CountJobs,
    DeleteExpiredQueues,
    DeleteFinalizedBefore,
    DeleteJob,
    DeleteJobs,
    DeleteNotificationsBefore,
    DeleteQueue,
    DropIndex,
    FetchNotifications,
    GetJob,
    GetJobs,
    GetLeader,
    GetQueue,
    GetStuckJobs,
    IndexExists,
    InsertFullJobs,
    InsertJobs,
    InsertJobsFast,
    InsertParams,
    InsertResult,
    Intent,
    JobListFilter,
    LeaderElect,
    LeaderReelect,
    LeaderResign,
    LeaderRow,
    ListJobs,
    ListQueues,
    ListReindexArtifacts,
    MaxNotificationId,
    Notify,
    PauseQueue,
    QueueRow,
    Reindex,
    RequeueRunningJobs,
    RescueJobs,
    ResumeQueue,
    RetryJob,
    ScheduledJob,
    ScheduleJobs,
    SetStateIfRunning,
    Statement,
    UpdateJobMetadata,
    UpdateQueue,
    UpsertQueue,
)
from river_protocol.job import JobRow
from river_protocol.states import FINALIZED_STATES, JobState

J = pg_job_columns()
_FINALIZED = "('cancelled', 'completed', 'discarded')"
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ORDER_COLUMNS = ("id", "scheduled_at", "finalized_at", "created_at")


def _b() -> Binder:
    return Binder("%s")


def _now(b: Binder, now: datetime | None) -> str:
    return "now()" if now is None else f"{b.p(now)}::timestamptz"


def _channel(d: Any, b: Binder, topic: str) -> str:
    # Listeners subscribe to "<schema>.<topic>"; without a configured schema
    # that is whatever schema the tables resolve to (docs/protocol.md §12.1).
    return f"concat(coalesce({b.p(d.schema)}::text, current_schema()), '.', {b.p(topic)}::text)"


def _text(data: bytes) -> str:
    return data.decode()


def _jobs(rows: list[tuple[Any, ...]]) -> list[JobRow]:
    return [job_row_from_pg(r) for r in rows]


def _identifier(name: str) -> str:
    if not _IDENT_RE.match(name):
        raise ValidationError(f"invalid index name {name!r}: must match [A-Za-z_][A-Za-z0-9_]*")
    return f'"{name}"'


def _conflict_target(d: Any) -> str:
    # Must restate the partial index predicate so Postgres infers river_job_unique_idx.
    return (
        "(unique_key) WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL"
        f" AND {d.prefix}river_job_state_in_bitmask(unique_states, state)"
    )


def unique_index_covers(params: InsertParams) -> bool:
    """Whether the row would enter ``river_job_unique_idx`` (and so can conflict)."""
    if params.unique_key is None or not params.unique_states:
        return False
    bit = tuple(JobState).index(params.state)
    return bool(params.unique_states & (1 << bit))


def dedupe_batch(jobs: tuple[InsertParams, ...]) -> tuple[list[int], list[int]]:
    """Split a batch into rows to insert and, per input, the inserted row it maps to.

    Two inputs that would both enter the unique index with the same key
    conflict with each other; Postgres rejects such a statement and SQLite
    silently merges them (docs/protocol.md §5.2). Both dialects instead insert the
    first and report later ones as duplicates of it, as if inserted one by one.
    """
    first_by_key: dict[bytes, int] = {}
    to_insert: list[int] = []
    source: list[int] = []
    for i, job in enumerate(jobs):
        if unique_index_covers(job):
            assert job.unique_key is not None
            if job.unique_key in first_by_key:
                source.append(first_by_key[job.unique_key])
                continue
            first_by_key[job.unique_key] = len(to_insert)
        source.append(len(to_insert))
        to_insert.append(i)
    return to_insert, source


def results_in_input_order(
    jobs: tuple[InsertParams, ...], inserted: list[tuple[JobRow, bool]], source: list[int]
) -> list[InsertResult]:
    seen: set[int] = set()
    out = []
    for slot in source:
        job, skipped = inserted[slot]
        out.append(InsertResult(job=job, unique_skipped_as_duplicate=skipped or slot in seen))
        seen.add(slot)
    return out


# ---------------------------------------------------------------- insert


def _insert_jobs(d: Any, intent: InsertJobs) -> Plan[list[InsertResult]]:
    if not intent.jobs:
        raise ValidationError("no jobs to insert")
    to_insert, source = dedupe_batch(intent.jobs)
    jobs = [intent.jobs[i] for i in to_insert]
    b = _b()
    sql = f"""
        INSERT INTO {d.prefix}river_job
            (args, created_at, kind, max_attempts, metadata, priority, queue,
             scheduled_at, state, tags, unique_key, unique_states)
        SELECT args::jsonb, coalesce(created_at, now()), kind, max_attempts, metadata::jsonb,
               priority, queue, coalesce(scheduled_at, now()), state::{d.prefix}river_job_state,
               ARRAY(SELECT jsonb_array_elements_text(tags::jsonb))::varchar(255)[],
               decode(unique_key, 'hex'), nullif(unique_states, 0)::bit(8)
        FROM unnest(
            {b.p([_text(j.encoded_args) for j in jobs])}::text[],
            {b.p([j.created_at for j in jobs])}::timestamptz[],
            {b.p([j.kind for j in jobs])}::text[],
            {b.p([j.max_attempts for j in jobs])}::smallint[],
            {b.p([_text(j.metadata or b"{}") for j in jobs])}::text[],
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
        DO UPDATE SET kind = EXCLUDED.kind
        RETURNING {J}, (xmax <> 0)
    """
    # RETURNING follows the SELECT's order (as Go relies on as well).
    rows = yield Statement(sql, tuple(b.params))
    inserted = [(job_row_from_pg(r), bool(r[-1])) for r in rows]
    return results_in_input_order(intent.jobs, inserted, source)


_COPY_COLUMNS = (
    "args", "kind", "max_attempts", "metadata", "priority", "queue", "state", "tags",
    "unique_key", "unique_states",
)


def _insert_jobs_fast(d: Any, intent: InsertJobsFast) -> Plan[int]:
    if not intent.jobs:
        raise ValidationError("no jobs to insert")
    # COPY cannot fall back to a column default per row, so rows that leave a
    # time to the database go in a COPY that omits that column.
    groups: dict[tuple[bool, bool], list[tuple[Any, ...]]] = {}
    for j in intent.jobs:
        values: tuple[Any, ...] = (
            _text(j.encoded_args), j.kind, j.max_attempts, _text(j.metadata or b"{}"),
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
    b = _b()
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
            {b.p([_text(r.encoded_args) for r in rs])}::text[],
            {b.p([r.attempt for r in rs])}::smallint[],
            {b.p([r.attempted_at for r in rs])}::timestamptz[],
            {b.p([json.dumps(list(r.attempted_by)) if r.attempted_by else None for r in rs])}::text[],
            {b.p([r.created_at for r in rs])}::timestamptz[],
            {b.p([_errors_json(r.errors) for r in rs])}::text[],
            {b.p([r.finalized_at for r in rs])}::timestamptz[],
            {b.p([r.kind for r in rs])}::text[],
            {b.p([r.max_attempts for r in rs])}::smallint[],
            {b.p([_text(r.metadata or b"{}") for r in rs])}::text[],
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
        RETURNING {J}
    """
    rows = yield Statement(sql, tuple(b.params))
    return _jobs(rows)


def _errors_json(errors: tuple[bytes, ...]) -> str | None:
    return None if not errors else "[" + ",".join(e.decode() for e in errors) + "]"


# ---------------------------------------------------------------- fetch / complete


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
    b = _b()
    cap = intent.max_attempted_by
    sql = f"""
        WITH locked AS (
            SELECT id FROM {d.prefix}river_job
            WHERE state = 'available' AND queue = {b.p(intent.queue)}::text
              AND scheduled_at <= {_now(b, intent.now)}{_claim_filters(b, intent)}
            ORDER BY priority ASC, scheduled_at ASC, id ASC
            LIMIT {b.p(intent.limit)}::integer
            FOR UPDATE SKIP LOCKED
        )
        UPDATE {d.prefix}river_job j
        SET state = 'running',
            attempt = j.attempt + 1,
            attempted_at = {_now(b, intent.now)},
            attempted_by = array_append(
                CASE WHEN coalesce(array_length(j.attempted_by, 1), 0) >= {b.p(cap)}::int
                     THEN j.attempted_by[array_length(j.attempted_by, 1) - {b.p(cap)}::int + 2:]
                     ELSE j.attempted_by END,
                {b.p(intent.client_id)}::text)
        FROM locked
        WHERE j.id = locked.id
        RETURNING {pg_job_columns("j")}
    """
    rows = yield Statement(sql, tuple(b.params))
    return _jobs(rows)


def _set_state_if_running(d: Any, intent: SetStateIfRunning) -> Plan[list[JobRow]]:
    if not intent.updates:
        return []
    us = intent.updates
    b = _b()
    input_cte = f"""
        SELECT * FROM unnest(
            {b.p([u.id for u in us])}::bigint[],
            {b.p([u.state.value for u in us])}::text[],
            {b.p([u.attempt for u in us])}::int[],
            {b.p([_text(u.error) if u.error is not None else None for u in us])}::text[],
            {b.p([u.finalized_at for u in us])}::timestamptz[],
            {b.p([u.scheduled_at for u in us])}::timestamptz[],
            {b.p([u.metadata_do_merge for u in us])}::boolean[],
            {b.p([_text(u.metadata_updates or b"{}") for u in us])}::text[]
        ) AS t(id, state, attempt, error, finalized_at, scheduled_at, do_merge, updates)
    """
    now = _now(b, intent.now)
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
            WHERE j.id = i.id AND (j.state = 'running' OR i.do_merge)
            RETURNING j.*
        )
        SELECT {pg_job_columns("u")} FROM updated u
        UNION ALL
        SELECT {pg_job_columns("j")} FROM {d.prefix}river_job j
        WHERE j.id IN (SELECT id FROM input) AND j.id NOT IN (SELECT id FROM updated)
        ORDER BY 1
    """
    rows = yield Statement(sql, tuple(b.params))
    return _jobs(rows)


# ---------------------------------------------------------------- maintenance


def _schedule_jobs(d: Any, intent: ScheduleJobs) -> Plan[list[ScheduledJob]]:
    b = _b()
    sql = f"""
        WITH due AS (
            SELECT id, unique_key, unique_states, priority, scheduled_at
            FROM {d.prefix}river_job
            WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= {b.p(intent.now)}::timestamptz
            ORDER BY priority, scheduled_at, id
            LIMIT {b.p(intent.limit)}::bigint
            FOR UPDATE
        ),
        ranked AS (
            SELECT due.*,
                   CASE WHEN unique_key IS NOT NULL AND unique_states IS NOT NULL
                        THEN row_number() OVER (PARTITION BY unique_key
                                                ORDER BY priority, scheduled_at, id) END AS rank
            FROM due
        ),
        decided AS (
            SELECT r.id,
                   r.rank IS NOT NULL AND (r.rank > 1 OR EXISTS (
                       SELECT 1 FROM {d.prefix}river_job o
                       WHERE o.unique_key = r.unique_key AND o.id <> r.id
                         AND o.unique_states IS NOT NULL
                         AND {d.prefix}river_job_state_in_bitmask(o.unique_states, o.state)
                   )) AS discard
            FROM ranked r
        ),
        updated AS (
            UPDATE {d.prefix}river_job j
            SET state = CASE WHEN x.discard THEN 'discarded'::{d.prefix}river_job_state
                             ELSE 'available'::{d.prefix}river_job_state END,
                finalized_at = CASE WHEN x.discard THEN {b.p(intent.now)}::timestamptz
                                    ELSE j.finalized_at END,
                metadata = CASE WHEN x.discard
                                THEN j.metadata || '{{"unique_key_conflict": "scheduler_discarded"}}'::jsonb
                                ELSE j.metadata END
            FROM decided x
            WHERE j.id = x.id
            RETURNING j.*, x.discard
        )
        SELECT {pg_job_columns("u")}, u.discard FROM updated u
        ORDER BY u.priority, u.scheduled_at, u.id
    """
    rows = yield Statement(sql, tuple(b.params))
    return [ScheduledJob(job=job_row_from_pg(r), conflict_discarded=bool(r[-1])) for r in rows]


def _get_stuck_jobs(d: Any, intent: GetStuckJobs) -> Plan[list[JobRow]]:
    b = _b()
    sql = f"""
        SELECT {J} FROM {d.prefix}river_job
        WHERE state = 'running' AND id > {b.p(intent.after_id)}::bigint
          AND attempted_at < {b.p(intent.stuck_horizon)}::timestamptz
        ORDER BY id LIMIT {b.p(intent.limit)}::bigint
    """
    return _jobs((yield Statement(sql, tuple(b.params))))


def _rescue_jobs(d: Any, intent: RescueJobs) -> Plan[None]:
    if not intent.updates:
        return None
    us = intent.updates
    b = _b()
    sql = f"""
        UPDATE {d.prefix}river_job j
        SET errors = array_append(j.errors, r.error::jsonb),
            finalized_at = r.finalized_at,
            scheduled_at = r.scheduled_at,
            state = r.state::{d.prefix}river_job_state,
            metadata = j.metadata || jsonb_build_object(
                'river:rescue_count',
                coalesce(CASE WHEN jsonb_typeof(j.metadata -> 'river:rescue_count') = 'number'
                              THEN (j.metadata ->> 'river:rescue_count')::numeric::bigint END, 0) + 1
            ) || r.updates::jsonb
        FROM unnest(
            {b.p([u.id for u in us])}::bigint[],
            {b.p([_text(u.error) for u in us])}::text[],
            {b.p([u.finalized_at for u in us])}::timestamptz[],
            {b.p([u.scheduled_at for u in us])}::timestamptz[],
            {b.p([u.state.value for u in us])}::text[],
            {b.p([_text(u.metadata_updates or b"{}") for u in us])}::text[]
        ) AS r(id, error, finalized_at, scheduled_at, state, updates)
        WHERE j.id = r.id
    """
    yield Statement(sql, tuple(b.params), fetch=False)
    return None


def _delete_finalized_before(d: Any, intent: DeleteFinalizedBefore) -> Plan[int]:
    b = _b()
    clauses = [
        f"(state = '{state}' AND finalized_at < {b.p(horizon)}::timestamptz)"
        for state, horizon in (
            ("cancelled", intent.cancelled_before),
            ("completed", intent.completed_before),
            ("discarded", intent.discarded_before),
        )
        if horizon is not None
    ]
    if not clauses:
        return 0
    where = "(" + " OR ".join(clauses) + ")"
    if intent.queues_included is not None:
        where += f" AND queue = ANY({b.p(list(intent.queues_included))}::text[])"
    if intent.queues_excluded is not None:
        where += f" AND NOT (queue = ANY({b.p(list(intent.queues_excluded))}::text[]))"
    sql = f"""
        WITH deleted AS (
            DELETE FROM {d.prefix}river_job WHERE id IN (
                SELECT id FROM {d.prefix}river_job WHERE {where}
                ORDER BY id LIMIT {b.p(intent.limit)}::bigint
            ) RETURNING 1
        )
        SELECT count(*) FROM deleted
    """
    rows = yield Statement(sql, tuple(b.params))
    return int(rows[0][0])


def _delete_expired_queues(d: Any, intent: DeleteExpiredQueues) -> Plan[list[str]]:
    b = _b()
    sql = f"""
        DELETE FROM {d.prefix}river_queue WHERE name IN (
            SELECT name FROM {d.prefix}river_queue
            WHERE updated_at < {b.p(intent.updated_before)}::timestamptz
            ORDER BY name LIMIT {b.p(intent.limit)}::bigint
        ) RETURNING name
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(str(r[0]) for r in rows)


def _delete_notifications_before(d: Any, intent: DeleteNotificationsBefore) -> Plan[int]:
    b = _b()
    sql = f"""
        WITH deleted AS (
            DELETE FROM {d.prefix}river_notification
            WHERE created_at < {b.p(intent.created_before)}::timestamptz RETURNING 1
        )
        SELECT count(*) FROM deleted
    """
    rows = yield Statement(sql, tuple(b.params))
    return int(rows[0][0])


def _list_reindex_artifacts(d: Any, intent: ListReindexArtifacts) -> Plan[list[str]]:
    _identifier(intent.index)
    b = _b()
    sql = f"""
        SELECT c.relname::text FROM pg_catalog.pg_class c
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = coalesce({b.p(d.schema)}::text, current_schema())
          AND c.relkind = 'i'
          AND left(c.relname, length({b.p(intent.index)}::text)) = {b.p(intent.index)}::text
          AND substring(c.relname FROM length({b.p(intent.index)}::text) + 1) ~ '^_cc(new|old)[0-9]*$'
        ORDER BY 1
    """
    rows = yield Statement(sql, tuple(b.params))
    return [str(r[0]) for r in rows]


def _index_exists(d: Any, intent: IndexExists) -> Plan[bool]:
    b = _b()
    sql = f"""
        SELECT EXISTS (
            SELECT 1 FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relname = {b.p(intent.index)}::text AND c.relkind = 'i'
              AND n.nspname = coalesce({b.p(d.schema)}::text, current_schema())
        )
    """
    rows = yield Statement(sql, tuple(b.params))
    return bool(rows[0][0])


def _reindex(d: Any, intent: Reindex) -> Plan[None]:
    # CONCURRENTLY refuses to run inside a transaction block: the intent is not transactional.
    yield Statement(f"REINDEX INDEX CONCURRENTLY {d.prefix}{_identifier(intent.index)}", fetch=False)
    return None


def _drop_index(d: Any, intent: DropIndex) -> Plan[None]:
    yield Statement(
        f"DROP INDEX CONCURRENTLY IF EXISTS {d.prefix}{_identifier(intent.index)}", fetch=False
    )
    return None


# ---------------------------------------------------------------- queues


def _upsert_queue(d: Any, intent: UpsertQueue) -> Plan[QueueRow]:
    b = _b()
    sql = f"""
        INSERT INTO {d.prefix}river_queue (name, created_at, metadata, paused_at, updated_at)
        VALUES ({b.p(intent.name)}::text, {_now(b, intent.now)},
                {b.p(_text(intent.metadata or b"{}"))}::jsonb, NULL, {_now(b, intent.now)})
        ON CONFLICT (name) DO UPDATE SET updated_at = EXCLUDED.updated_at
        RETURNING {PG_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return queue_row(rows[0])


def _get_queue(d: Any, intent: GetQueue) -> Plan[QueueRow | None]:
    b = _b()
    sql = f"SELECT {PG_QUEUE_COLUMNS} FROM {d.prefix}river_queue WHERE name = {b.p(intent.name)}::text"
    rows = yield Statement(sql, tuple(b.params))
    return queue_row(rows[0]) if rows else None


def _list_queues(d: Any, intent: ListQueues) -> Plan[list[QueueRow]]:
    b = _b()
    where = ["true"]
    if intent.after_name is not None:
        where.append(f"name > {b.p(intent.after_name)}::text")
    if intent.name_contains:
        where.append(f"strpos(lower(name), lower({b.p(intent.name_contains)}::text)) > 0")
    if intent.exclude:
        where.append(f"NOT (name = ANY({b.p(list(intent.exclude))}::text[]))")
    sql = f"""
        SELECT {PG_QUEUE_COLUMNS} FROM {d.prefix}river_queue
        WHERE {" AND ".join(where)} ORDER BY name LIMIT {b.p(intent.limit)}::bigint
    """
    rows = yield Statement(sql, tuple(b.params))
    return [queue_row(r) for r in rows]


def _pause_or_resume(d: Any, name: str, now: datetime | None, pause: bool) -> Plan[int]:
    b = _b()
    if pause:
        assignments = (
            f"paused_at = coalesce(paused_at, {_now(b, now)}),"
            f" updated_at = CASE WHEN paused_at IS NULL THEN {_now(b, now)} ELSE updated_at END"
        )
    else:
        assignments = (
            f"paused_at = NULL,"
            f" updated_at = CASE WHEN paused_at IS NOT NULL THEN {_now(b, now)} ELSE updated_at END"
        )
    target = "true" if name == "*" else f"name = {b.p(name)}::text"
    sql = f"""
        WITH changed AS (
            UPDATE {d.prefix}river_queue SET {assignments} WHERE {target} RETURNING 1
        )
        SELECT count(*) FROM changed
    """
    rows = yield Statement(sql, tuple(b.params))
    count = int(rows[0][0])
    if count == 0 and name != "*":
        raise QueueNotFoundError(f"queue {name!r} not found")
    return count


def _pause_queue(d: Any, intent: PauseQueue) -> Plan[int]:
    return (yield from _pause_or_resume(d, intent.name, intent.now, pause=True))


def _resume_queue(d: Any, intent: ResumeQueue) -> Plan[int]:
    return (yield from _pause_or_resume(d, intent.name, intent.now, pause=False))


def _update_queue(d: Any, intent: UpdateQueue) -> Plan[QueueRow]:
    b = _b()
    metadata = "metadata" if intent.metadata is None else f"{b.p(_text(intent.metadata))}::jsonb"
    sql = f"""
        UPDATE {d.prefix}river_queue SET metadata = {metadata}, updated_at = now()
        WHERE name = {b.p(intent.name)}::text RETURNING {PG_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise QueueNotFoundError(f"queue {intent.name!r} not found")
    return queue_row(rows[0])


def _delete_queue(d: Any, intent: DeleteQueue) -> Plan[QueueRow]:
    b = _b()
    sql = (
        f"DELETE FROM {d.prefix}river_queue WHERE name = {b.p(intent.name)}::text"
        f" RETURNING {PG_QUEUE_COLUMNS}"
    )
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise QueueNotFoundError(f"queue {intent.name!r} not found")
    return queue_row(rows[0])


# ---------------------------------------------------------------- leader


def _leader_elect(d: Any, intent: LeaderElect) -> Plan[LeaderRow | None]:
    b = _b()
    yield Statement(
        f"DELETE FROM {d.prefix}river_leader WHERE expires_at < {_now(b, intent.now)}",
        tuple(b.params),
        fetch=False,
    )
    b = _b()
    sql = f"""
        INSERT INTO {d.prefix}river_leader (leader_id, elected_at, expires_at)
        VALUES ({b.p(intent.leader_id)}::text, {_now(b, intent.now)},
                {_now(b, intent.now)} + make_interval(secs => {b.p(intent.ttl.total_seconds())}))
        ON CONFLICT (name) DO NOTHING
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_reelect(d: Any, intent: LeaderReelect) -> Plan[LeaderRow | None]:
    b = _b()
    sql = f"""
        UPDATE {d.prefix}river_leader
        SET expires_at = {_now(b, intent.now)} + make_interval(secs => {b.p(intent.ttl.total_seconds())})
        WHERE elected_at = {b.p(intent.elected_at)}::timestamptz
          AND expires_at >= {_now(b, intent.now)}
          AND leader_id = {b.p(intent.leader_id)}::text
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_resign(d: Any, intent: LeaderResign) -> Plan[bool]:
    b = _b()
    sql = f"""
        WITH held AS (
            SELECT name, leader_id FROM {d.prefix}river_leader
            WHERE elected_at = {b.p(intent.elected_at)}::timestamptz
              AND leader_id = {b.p(intent.leader_id)}::text
            FOR UPDATE
        ),
        announced AS (
            SELECT name, pg_notify({_channel(d, b, "river_leadership")},
                                   json_build_object('leader_id', leader_id,
                                                     'action', 'resigned')::text)
            FROM held
        ),
        deleted AS (
            DELETE FROM {d.prefix}river_leader l USING announced a WHERE l.name = a.name RETURNING 1
        )
        SELECT count(*) FROM deleted
    """
    rows = yield Statement(sql, tuple(b.params))
    return int(rows[0][0]) > 0


def _get_leader(d: Any, intent: GetLeader) -> Plan[LeaderRow | None]:
    rows = yield Statement(f"SELECT {LEADER_COLUMNS} FROM {d.prefix}river_leader")
    return leader_row(rows[0]) if rows else None


# ---------------------------------------------------------------- notifications


def _notify(d: Any, intent: Notify) -> Plan[None]:
    if not intent.payloads:
        return None
    b = _b()
    sql = f"""
        SELECT pg_notify({_channel(d, b, intent.topic)}, payload)
        FROM unnest({b.p(list(intent.payloads))}::text[]) AS payload
    """
    yield Statement(sql, tuple(b.params))
    return None


def _outbox_only(d: Any, intent: FetchNotifications | MaxNotificationId) -> Plan[Any]:
    raise ValidationError(
        f"{type(intent).__name__} reads the SQLite notification outbox; "
        "Postgres delivers notifications with LISTEN/NOTIFY"
    )
    yield  # pragma: no cover - makes this a generator


# ---------------------------------------------------------------- job administration


def _filter(d: Any, b: Binder, f: JobListFilter, alias: str = "") -> list[str]:
    q = f"{alias}." if alias else ""
    where: list[str] = []
    if f.ids is not None:
        where.append(f"{q}id = ANY({b.p(list(f.ids))}::bigint[])")
    if f.kinds is not None:
        where.append(f"{q}kind = ANY({b.p(list(f.kinds))}::text[])")
    if f.queues is not None:
        where.append(f"{q}queue = ANY({b.p(list(f.queues))}::text[])")
    if f.states is not None:
        where.append(f"{q}state::text = ANY({b.p([s.value for s in f.states])}::text[])")
    if f.priorities is not None:
        where.append(f"{q}priority = ANY({b.p(list(f.priorities))}::smallint[])")
    if f.tags_any is not None:
        where.append(f"{q}tags && {b.p(list(f.tags_any))}::varchar(255)[]")
    if f.created_before is not None:
        where.append(f"{q}created_at < {b.p(f.created_before)}::timestamptz")
    if f.created_after is not None:
        where.append(f"{q}created_at > {b.p(f.created_after)}::timestamptz")
    if f.finalized_before is not None:
        where.append(f"{q}finalized_at < {b.p(f.finalized_before)}::timestamptz")
    return where


def order_and_cursor(
    b: Binder, intent: ListJobs, bind_time: Callable[[Binder, Any], str]
) -> tuple[str, list[str]]:
    """ORDER BY text and keyset conditions; NULLs (finalized_at) always sort last."""
    if intent.order_by not in _ORDER_COLUMNS:
        raise ValidationError(
            f"cannot order jobs by {intent.order_by!r}; use one of {', '.join(_ORDER_COLUMNS)}"
        )
    col = intent.order_by
    direction = "DESC" if intent.descending else "ASC"
    cmp = "<" if intent.descending else ">"
    order = f"id {direction}" if col == "id" else f"{col} IS NULL, {col} {direction}, id {direction}"
    where: list[str] = []
    if intent.after is not None:
        value, after_id = intent.after
        if col == "id":
            where.append(f"id {cmp} {b.p(after_id)}")
        elif value is None:
            where.append(f"({col} IS NULL AND id {cmp} {b.p(after_id)})")
        else:
            where.append(
                f"({col} {cmp} {bind_time(b, value)} OR ({col} = {bind_time(b, value)}"
                f" AND id {cmp} {b.p(after_id)}) OR {col} IS NULL)"
            )
    return order, where


def _list_jobs(d: Any, intent: ListJobs) -> Plan[list[JobRow]]:
    b = _b()
    where = _filter(d, b, intent.filter)
    order, cursor = order_and_cursor(b, intent, lambda b, v: f"{b.p(v)}::timestamptz")
    where += cursor
    sql = f"""
        SELECT {J} FROM {d.prefix}river_job WHERE {" AND ".join(where) or "true"}
        ORDER BY {order} LIMIT {b.p(intent.limit)}::bigint
    """
    return _jobs((yield Statement(sql, tuple(b.params))))


def _count_jobs(d: Any, intent: CountJobs) -> Plan[dict[tuple[JobState, str, str], int]]:
    b = _b()
    where = _filter(d, b, intent.filter)
    sql = f"""
        SELECT state::text, queue, kind, count(*) FROM {d.prefix}river_job
        WHERE {" AND ".join(where) or "true"} GROUP BY 1, 2, 3
    """
    rows = yield Statement(sql, tuple(b.params))
    return {(JobState(r[0]), str(r[1]), str(r[2])): int(r[3]) for r in rows}


def _get_job(d: Any, intent: GetJob) -> Plan[JobRow]:
    b = _b()
    rows = yield Statement(
        f"SELECT {J} FROM {d.prefix}river_job WHERE id = {b.p(intent.id)}::bigint", tuple(b.params)
    )
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _get_jobs(d: Any, intent: GetJobs) -> Plan[list[JobRow]]:
    b = _b()
    sql = f"SELECT {J} FROM {d.prefix}river_job WHERE id = ANY({b.p(list(intent.ids))}::bigint[]) ORDER BY id"
    return _jobs((yield Statement(sql, tuple(b.params))))


def _locked_change(d: Any, b: Binder, job_id: int, change: str) -> str:
    """A statement returning the changed row, or the unchanged row when ``change`` matched nothing."""
    return f"""
        WITH changed AS ({change})
        SELECT {pg_job_columns("c")} FROM changed c
        UNION ALL
        SELECT {J} FROM {d.prefix}river_job
        WHERE id = {b.p(job_id)}::bigint AND NOT EXISTS (SELECT 1 FROM changed)
    """


def _cancel_job(d: Any, intent: CancelJob) -> Plan[JobRow]:
    b = _b()
    change = f"""
        WITH target AS (
            SELECT id, queue, state, finalized_at FROM {d.prefix}river_job
            WHERE id = {b.p(intent.id)}::bigint FOR UPDATE
        ),
        announced AS (
            SELECT id, pg_notify({_channel(d, b, "river_control")},
                                 json_build_object('action', 'cancel', 'job_id', id,
                                                   'queue', queue)::text)
            FROM target
            WHERE state NOT IN {_FINALIZED} AND finalized_at IS NULL
        )
        UPDATE {d.prefix}river_job j
        SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
            finalized_at = CASE WHEN j.state = 'running' THEN j.finalized_at
                                ELSE {_now(b, intent.now)} END,
            metadata = jsonb_set(j.metadata, '{{cancel_attempted_at}}',
                                 {b.p(_text(intent.cancel_attempted_at))}::jsonb, true)
        FROM announced a WHERE j.id = a.id
        RETURNING j.*
    """
    rows = yield Statement(_locked_change(d, b, intent.id, change), tuple(b.params))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _retry_job(d: Any, intent: RetryJob) -> Plan[JobRow]:
    b = _b()
    change = f"""
        WITH target AS (SELECT id FROM {d.prefix}river_job WHERE id = {b.p(intent.id)}::bigint FOR UPDATE)
        UPDATE {d.prefix}river_job j
        SET state = 'available',
            max_attempts = CASE WHEN j.attempt = j.max_attempts THEN j.max_attempts + 1
                                ELSE j.max_attempts END,
            finalized_at = NULL,
            scheduled_at = {_now(b, intent.now)}
        FROM target t
        WHERE j.id = t.id AND j.state <> 'running'
          AND NOT (j.state = 'available' AND j.scheduled_at < {_now(b, intent.now)})
        RETURNING j.*
    """
    rows = yield Statement(_locked_change(d, b, intent.id, change), tuple(b.params))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _delete_job(d: Any, intent: DeleteJob) -> Plan[JobRow]:
    b = _b()
    change = f"""
        WITH target AS (SELECT id FROM {d.prefix}river_job WHERE id = {b.p(intent.id)}::bigint FOR UPDATE)
        DELETE FROM {d.prefix}river_job j USING target t
        WHERE j.id = t.id AND j.state <> 'running'
        RETURNING j.*
    """
    rows = yield Statement(_locked_change(d, b, intent.id, change), tuple(b.params))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    job = job_row_from_pg(rows[0])
    if job.state is JobState.RUNNING:
        raise ValidationError(f"job {intent.id} is running; running jobs cannot be deleted")
    return job


def _delete_jobs(d: Any, intent: DeleteJobs) -> Plan[list[JobRow]]:
    b = _b()
    where = [*_filter(d, b, intent.filter), "state <> 'running'"]
    sql = f"""
        WITH doomed AS (
            SELECT id FROM {d.prefix}river_job WHERE {" AND ".join(where)}
            ORDER BY id LIMIT {b.p(intent.limit)}::bigint
            FOR UPDATE SKIP LOCKED
        ),
        deleted AS (
            DELETE FROM {d.prefix}river_job j USING doomed WHERE j.id = doomed.id RETURNING j.*
        )
        SELECT {pg_job_columns("x")} FROM deleted x ORDER BY x.id
    """
    return _jobs((yield Statement(sql, tuple(b.params))))


def _update_job_metadata(d: Any, intent: UpdateJobMetadata) -> Plan[JobRow]:
    b = _b()
    sql = f"""
        UPDATE {d.prefix}river_job SET metadata = metadata || {b.p(_text(intent.metadata_updates))}::jsonb
        WHERE id = {b.p(intent.id)}::bigint RETURNING {J}
    """
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_pg(rows[0])


def _requeue_running_jobs(d: Any, intent: RequeueRunningJobs) -> Plan[list[JobRow]]:
    b = _b()
    sql = f"""
        WITH moved AS (
            UPDATE {d.prefix}river_job SET state = 'available', scheduled_at = {_now(b, intent.now)}
            WHERE state = 'running' AND attempted_at < {b.p(intent.attempted_before)}::timestamptz
            RETURNING *
        )
        SELECT {pg_job_columns("m")} FROM moved m ORDER BY m.id
    """
    return _jobs((yield Statement(sql, tuple(b.params))))


assert {s.value for s in FINALIZED_STATES} == {"cancelled", "completed", "discarded"}

PLANNERS: dict[type[Intent], Callable[[Any, Any], Plan[Any]]] = {
    InsertJobs: _insert_jobs,
    InsertJobsFast: _insert_jobs_fast,
    InsertFullJobs: _insert_full_jobs,
    ClaimJobs: _claim_jobs,
    SetStateIfRunning: _set_state_if_running,
    ScheduleJobs: _schedule_jobs,
    GetStuckJobs: _get_stuck_jobs,
    RescueJobs: _rescue_jobs,
    DeleteFinalizedBefore: _delete_finalized_before,
    DeleteExpiredQueues: _delete_expired_queues,
    DeleteNotificationsBefore: _delete_notifications_before,
    ListReindexArtifacts: _list_reindex_artifacts,
    IndexExists: _index_exists,
    Reindex: _reindex,
    DropIndex: _drop_index,
    UpsertQueue: _upsert_queue,
    GetQueue: _get_queue,
    ListQueues: _list_queues,
    PauseQueue: _pause_queue,
    ResumeQueue: _resume_queue,
    UpdateQueue: _update_queue,
    DeleteQueue: _delete_queue,
    LeaderElect: _leader_elect,
    LeaderReelect: _leader_reelect,
    LeaderResign: _leader_resign,
    GetLeader: _get_leader,
    Notify: _notify,
    FetchNotifications: _outbox_only,
    MaxNotificationId: _outbox_only,
    GetJob: _get_job,
    GetJobs: _get_jobs,
    ListJobs: _list_jobs,
    CountJobs: _count_jobs,
    CancelJob: _cancel_job,
    RetryJob: _retry_job,
    DeleteJob: _delete_job,
    DeleteJobs: _delete_jobs,
    UpdateJobMetadata: _update_job_metadata,
    RequeueRunningJobs: _requeue_running_jobs,
}
