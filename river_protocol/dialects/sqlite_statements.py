"""SQLite plans for every job, queue, leader, notification and index intent.

SQLite has no arrays and no data-modifying CTEs, so batches travel as one
JSON array expanded with ``json_each`` and multi-step operations become
several statements inside the intent's transaction (``BEGIN IMMEDIATE``
makes this process the only writer meanwhile). JSON columns are JSONB:
written through ``jsonb()``, read through ``json()``. Times are canonical UTC
text (docs/protocol.md §3.4) because River compares them as strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from river_protocol import metadata_keys
from river_protocol.dialects.base import Plan
from river_protocol.dialects.pg_statements import (
    dedupe_batch,
    order_and_cursor,
    results_in_input_order,
)
from river_protocol.dialects.rows import (
    LEADER_COLUMNS,
    NOTIFICATION_COLUMNS,
    SQLITE_QUEUE_COLUMNS,
    Binder,
    job_row_from_sqlite,
    leader_row,
    notification_row,
    queue_row,
    sqlite_job_columns,
    sqlite_now,
)
from river_protocol.errors import JobNotFoundError, QueueNotFoundError, ValidationError
from river_protocol.gotime import format_sqlite_time
from river_protocol.intents import (
    CancelJob,
    ClaimJobs,
    CountJobs,
    DeleteExpiredQueues,
    DeleteFinalizedBefore,
    DeleteJob,
    DeleteJobs,
    DeleteNotificationsBefore,
    DeleteQueue,
    DropIndex,
    FetchNotifications,
    FullJobRow,
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
    NotificationRow,
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
    SetStateUpdate,
    Statement,
    UpdateJobMetadata,
    UpdateQueue,
    UpsertQueue,
)
from river_protocol.job import JobRow
from river_protocol.states import JobState

S = sqlite_job_columns()
_FINALIZED = "('cancelled', 'completed', 'discarded')"
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NONCE_KEY = metadata_keys.UNIQUE_NONCE


def _b() -> Binder:
    return Binder("?")


def _t(value: datetime | None) -> str | None:
    return None if value is None else format_sqlite_time(value)


def _text(data: bytes) -> str:
    return data.decode()


def _jobs(rows: list[tuple[Any, ...]]) -> list[JobRow]:
    return [job_row_from_sqlite(r) for r in rows]


def _json_list(values: Any) -> str:
    return json.dumps(list(values))


def _identifier(name: str) -> str:
    if not _IDENT_RE.match(name):
        raise ValidationError(f"invalid index name {name!r}: must match [A-Za-z_][A-Za-z0-9_]*")
    return f'"{name}"'


def _ttl(ttl: timedelta) -> str:
    return f"{ttl.total_seconds():.3f} seconds"


def in_bitmask(alias: str = "") -> str:
    """``river_job_unique_idx``'s predicate, spelled as in the index so SQLite matches it."""
    q = f"{alias}." if alias else ""
    cases = " ".join(
        f"WHEN '{state.value}' THEN {q}unique_states & (1 << {bit})"
        for bit, state in enumerate(JobState)
    )
    return f"CASE {q}state {cases} ELSE 0 END >= 1"


_CONFLICT_TARGET = (
    f"(unique_key) WHERE unique_key IS NOT NULL AND unique_states IS NOT NULL AND {in_bitmask()}"
)


# ---------------------------------------------------------------- insert


def _insert_values(jobs: list[InsertParams]) -> str:
    return json.dumps([
        {
            "args": _text(j.encoded_args),
            "created_at": _t(j.created_at),
            "kind": j.kind,
            "max_attempts": j.max_attempts,
            "metadata": _text(j.metadata or b"{}"),
            "priority": j.priority,
            "queue": j.queue,
            "scheduled_at": _t(j.scheduled_at),
            "state": j.state.value,
            "tags": _json_list(j.tags),
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
    conflict = "DO UPDATE SET kind = excluded.kind" if nonce is not None else "DO NOTHING"
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
    to_insert, source = dedupe_batch(intent.jobs)
    b = _b()
    sql = _insert_sql(d, b, [intent.jobs[i] for i in to_insert], intent.nonce, S)
    # RETURNING yields rows in json_each order, which is the input order.
    rows = yield Statement(sql, tuple(b.params))
    inserted = []
    for r in rows:
        job = job_row_from_sqlite(r)
        inserted.append((job, job.metadata.get(_NONCE_KEY) != intent.nonce))
    return results_in_input_order(intent.jobs, inserted, source)


def _insert_jobs_fast(d: Any, intent: InsertJobsFast) -> Plan[int]:
    if not intent.jobs:
        raise ValidationError("no jobs to insert")
    b = _b()
    rows = yield Statement(_insert_sql(d, b, list(intent.jobs), None, "1"), tuple(b.params))
    return len(rows)


def _full_values(rs: tuple[FullJobRow, ...]) -> str:
    return json.dumps([
        {
            "args": _text(r.encoded_args),
            "attempt": r.attempt,
            "attempted_at": _t(r.attempted_at),
            "attempted_by": _json_list(r.attempted_by) if r.attempted_by else None,
            "created_at": _t(r.created_at),
            "errors": "[" + ",".join(e.decode() for e in r.errors) + "]" if r.errors else None,
            "finalized_at": _t(r.finalized_at),
            "kind": r.kind,
            "max_attempts": r.max_attempts,
            "metadata": _text(r.metadata or b"{}"),
            "priority": r.priority,
            "queue": r.queue,
            "scheduled_at": _t(r.scheduled_at),
            "state": r.state.value,
            "tags": _json_list(r.tags),
            "unique_key": r.unique_key.hex() if r.unique_key else None,
            "unique_states": r.unique_states or None,
        }
        for r in rs
    ])


def _insert_full_jobs(d: Any, intent: InsertFullJobs) -> Plan[list[JobRow]]:
    if not intent.rows:
        return []
    b = _b()
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
        RETURNING {S}
    """
    return _jobs((yield Statement(sql, tuple(b.params))))


# ---------------------------------------------------------------- fetch / complete


def _claim_filters(b: Binder, intent: ClaimJobs) -> str:
    """Extra claim conditions (leading `` AND``); empty when no filter is set."""
    out = ""
    if intent.kinds is not None:
        out += f" AND kind IN (SELECT value FROM json_each({b.p(_json_list(intent.kinds))}))"
    if intent.tags_any is not None:
        out += (" AND EXISTS (SELECT 1 FROM json_each(tags) AS tag WHERE tag.value IN"
                f" (SELECT value FROM json_each({b.p(_json_list(intent.tags_any))})))")
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
    b = _b()
    keep = intent.max_attempted_by - 1
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = 'running',
            attempt = attempt + 1,
            attempted_at = {sqlite_now(b, intent.now)},
            attempted_by = jsonb_insert(
                coalesce((
                    SELECT jsonb_group_array(kept.value) FROM (
                        SELECT value FROM json_each(river_job.attempted_by)
                        WHERE key >= json_array_length(river_job.attempted_by) - {b.p(keep)}
                        ORDER BY key
                    ) AS kept
                ), jsonb('[]')),
                '$[#]', {b.p(intent.client_id)})
        WHERE id IN (
            SELECT id FROM {d.prefix}river_job
            WHERE state = 'available' AND queue = {b.p(intent.queue)} AND priority >= 0
              AND scheduled_at <= {sqlite_now(b, intent.now)}{_claim_filters(b, intent)}
            ORDER BY priority ASC, scheduled_at ASC, id ASC
            LIMIT {b.p(intent.limit)}
        )
        RETURNING {S}
    """
    return _jobs((yield Statement(sql, tuple(b.params))))


def _set_state_one(d: Any, u: SetStateUpdate, now: datetime | None) -> Statement:
    b = _b()

    def cancel() -> str:
        # should_cancel (§8.1): a retry or snooze of a job someone tried to cancel.
        return (
            f"({b.p(u.state.value)} IN ('retryable', 'scheduled')"
            " AND json_type(metadata, '$.cancel_attempted_at') IS NOT NULL)"
        )

    error = None if u.error is None else _text(u.error)
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = CASE WHEN {cancel()} THEN 'cancelled' ELSE {b.p(u.state.value)} END,
            finalized_at = CASE WHEN {cancel()} THEN {sqlite_now(b, now)}
                                ELSE coalesce({b.p(_t(u.finalized_at))}, finalized_at) END,
            attempt = CASE WHEN {cancel()} THEN attempt ELSE coalesce({b.p(u.attempt)}, attempt) END,
            scheduled_at = CASE WHEN {cancel()} THEN scheduled_at
                                ELSE coalesce({b.p(_t(u.scheduled_at))}, scheduled_at) END,
            errors = CASE WHEN {b.p(error)} IS NULL THEN errors
                          ELSE jsonb_insert(coalesce(errors, jsonb('[]')), '$[#]', json({b.p(error)})) END,
            metadata = CASE WHEN {b.p(u.metadata_do_merge)}
                            THEN jsonb_patch(metadata, jsonb({b.p(_text(u.metadata_updates or b"{}"))}))
                            ELSE metadata END
        WHERE id = {b.p(u.id)} AND state = 'running'
        RETURNING {S}
    """
    return Statement(sql, tuple(b.params))


def _set_state_if_running(d: Any, intent: SetStateIfRunning) -> Plan[list[JobRow]]:
    out: list[JobRow] = []
    for u in intent.updates:
        rows = yield _set_state_one(d, u, intent.now)
        if not rows:
            # Not running (or gone): only metadata may change (§8.1).
            if u.metadata_do_merge:
                rows = yield Statement(
                    f"UPDATE {d.prefix}river_job SET metadata = jsonb_patch(metadata, jsonb(?))"
                    f" WHERE id = ? RETURNING {S}",
                    (_text(u.metadata_updates or b"{}"), u.id),
                )
            else:
                rows = yield Statement(f"SELECT {S} FROM {d.prefix}river_job WHERE id = ?", (u.id,))
        out.extend(_jobs(rows))
    return sorted(out, key=lambda job: job.id)


# ---------------------------------------------------------------- maintenance


def _schedule_jobs(d: Any, intent: ScheduleJobs) -> Plan[list[ScheduledJob]]:
    now = format_sqlite_time(intent.now)
    eligible = yield Statement(
        f"""
        SELECT id, unique_key IS NOT NULL AND unique_states IS NOT NULL FROM {d.prefix}river_job
        WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= ?
        ORDER BY priority, scheduled_at, id LIMIT ?
        """,
        (now, intent.limit),
    )
    results: dict[int, ScheduledJob] = {}
    plain: list[int] = []
    collision = f"""EXISTS (
        SELECT 1 FROM {d.prefix}river_job o
        WHERE o.unique_key = river_job.unique_key AND o.id <> river_job.id
          AND o.unique_states IS NOT NULL AND {in_bitmask("o")})"""
    for job_id, unique in eligible:
        if not unique:
            plain.append(int(job_id))
            continue
        # One at a time, in order: a row made available here blocks later rows with its key.
        rows = yield Statement(
            f"""
            UPDATE {d.prefix}river_job
            SET state = CASE WHEN {collision} THEN 'discarded' ELSE 'available' END,
                finalized_at = CASE WHEN {collision} THEN ? ELSE finalized_at END,
                metadata = CASE WHEN {collision}
                                THEN jsonb_set(metadata, '$.unique_key_conflict', 'scheduler_discarded')
                                ELSE metadata END
            WHERE id = ?
            RETURNING {S}
            """,
            (now, job_id),
        )
        job = job_row_from_sqlite(rows[0])
        results[job.id] = ScheduledJob(job, conflict_discarded=job.state is JobState.DISCARDED)
    if plain:
        rows = yield Statement(
            f"UPDATE {d.prefix}river_job SET state = 'available'"
            f" WHERE id IN (SELECT value FROM json_each(?)) RETURNING {S}",
            (_json_list(plain),),
        )
        for job in _jobs(rows):
            results[job.id] = ScheduledJob(job, conflict_discarded=False)
    return [results[int(r[0])] for r in eligible if int(r[0]) in results]


def _get_stuck_jobs(d: Any, intent: GetStuckJobs) -> Plan[list[JobRow]]:
    sql = f"""
        SELECT {S} FROM {d.prefix}river_job
        WHERE state = 'running' AND id > ? AND attempted_at < ?
        ORDER BY id LIMIT ?
    """
    params = (intent.after_id, format_sqlite_time(intent.stuck_horizon), intent.limit)
    return _jobs((yield Statement(sql, params)))


def _rescue_jobs(d: Any, intent: RescueJobs) -> Plan[None]:
    count = "metadata ->> '$.\"river:rescue_count\"'"
    sql = f"""
        UPDATE {d.prefix}river_job
        SET errors = jsonb_insert(coalesce(errors, jsonb('[]')), '$[#]', json(?)),
            finalized_at = ?,
            scheduled_at = ?,
            state = ?,
            metadata = jsonb_patch(
                jsonb_set(metadata, '$."river:rescue_count"',
                          coalesce(CASE json_type(metadata, '$."river:rescue_count"')
                                       WHEN 'integer' THEN {count}
                                       WHEN 'real' THEN CAST(round({count}) AS INTEGER) END, 0) + 1),
                jsonb(?))
        WHERE id = ?
    """
    for u in intent.updates:
        yield Statement(
            sql,
            (
                _text(u.error), _t(u.finalized_at), format_sqlite_time(u.scheduled_at),
                u.state.value, _text(u.metadata_updates or b"{}"), u.id,
            ),
            fetch=False,
        )
    return None


def _delete_finalized_before(d: Any, intent: DeleteFinalizedBefore) -> Plan[int]:
    b = _b()
    clauses = [
        f"(state = '{state}' AND finalized_at < {b.p(format_sqlite_time(horizon))})"
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
        where += f" AND queue IN (SELECT value FROM json_each({b.p(_json_list(intent.queues_included))}))"
    if intent.queues_excluded is not None:
        where += (
            f" AND queue NOT IN (SELECT value FROM json_each({b.p(_json_list(intent.queues_excluded))}))"
        )
    sql = f"""
        DELETE FROM {d.prefix}river_job WHERE id IN (
            SELECT id FROM {d.prefix}river_job WHERE {where} ORDER BY id LIMIT {b.p(intent.limit)}
        ) RETURNING 1
    """
    return len((yield Statement(sql, tuple(b.params))))


def _delete_expired_queues(d: Any, intent: DeleteExpiredQueues) -> Plan[list[str]]:
    sql = f"""
        DELETE FROM {d.prefix}river_queue WHERE name IN (
            SELECT name FROM {d.prefix}river_queue WHERE updated_at < ? ORDER BY name LIMIT ?
        ) RETURNING name
    """
    rows = yield Statement(sql, (format_sqlite_time(intent.updated_before), intent.limit))
    return sorted(str(r[0]) for r in rows)


def _delete_notifications_before(d: Any, intent: DeleteNotificationsBefore) -> Plan[int]:
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_notification WHERE created_at < ? RETURNING 1",
        (format_sqlite_time(intent.created_before),),
    )
    return len(rows)


def _list_reindex_artifacts(d: Any, intent: ListReindexArtifacts) -> Plan[list[str]]:
    # Plain REINDEX builds nothing on the side, so there are never leftovers.
    _identifier(intent.index)
    return []
    yield  # pragma: no cover - makes this a generator


def _index_exists(d: Any, intent: IndexExists) -> Plan[bool]:
    rows = yield Statement(
        f"SELECT EXISTS (SELECT 1 FROM {d.prefix}sqlite_master WHERE type = 'index' AND name = ?)",
        (intent.index,),
    )
    return bool(rows[0][0])


def _reindex(d: Any, intent: Reindex) -> Plan[None]:
    yield Statement(f"REINDEX {d.prefix}{_identifier(intent.index)}", fetch=False)
    return None


def _drop_index(d: Any, intent: DropIndex) -> Plan[None]:
    yield Statement(f"DROP INDEX IF EXISTS {d.prefix}{_identifier(intent.index)}", fetch=False)
    return None


# ---------------------------------------------------------------- queues


def _upsert_queue(d: Any, intent: UpsertQueue) -> Plan[QueueRow]:
    b = _b()
    sql = f"""
        INSERT INTO {d.prefix}river_queue (name, created_at, metadata, paused_at, updated_at)
        VALUES ({b.p(intent.name)}, {sqlite_now(b, intent.now)},
                jsonb({b.p(_text(intent.metadata or b"{}"))}), NULL, {sqlite_now(b, intent.now)})
        ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at
        RETURNING {SQLITE_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return queue_row(rows[0])


def _get_queue(d: Any, intent: GetQueue) -> Plan[QueueRow | None]:
    rows = yield Statement(
        f"SELECT {SQLITE_QUEUE_COLUMNS} FROM {d.prefix}river_queue WHERE name = ?", (intent.name,)
    )
    return queue_row(rows[0]) if rows else None


def _list_queues(d: Any, intent: ListQueues) -> Plan[list[QueueRow]]:
    b = _b()
    where = ["true"]
    if intent.after_name is not None:
        where.append(f"name > {b.p(intent.after_name)}")
    if intent.name_contains:
        where.append(f"instr(lower(name), lower({b.p(intent.name_contains)})) > 0")
    if intent.exclude:
        where.append(f"name NOT IN (SELECT value FROM json_each({b.p(_json_list(intent.exclude))}))")
    sql = f"""
        SELECT {SQLITE_QUEUE_COLUMNS} FROM {d.prefix}river_queue
        WHERE {" AND ".join(where)} ORDER BY name LIMIT {b.p(intent.limit)}
    """
    rows = yield Statement(sql, tuple(b.params))
    return [queue_row(r) for r in rows]


def _pause_or_resume(d: Any, name: str, now: datetime | None, pause: bool) -> Plan[int]:
    b = _b()
    if pause:
        assignments = (
            f"paused_at = coalesce(paused_at, {sqlite_now(b, now)}),"
            f" updated_at = CASE WHEN paused_at IS NULL THEN {sqlite_now(b, now)} ELSE updated_at END"
        )
    else:
        assignments = (
            "paused_at = NULL, updated_at = CASE WHEN paused_at IS NOT NULL"
            f" THEN {sqlite_now(b, now)} ELSE updated_at END"
        )
    target = "true" if name == "*" else f"name = {b.p(name)}"
    sql = f"UPDATE {d.prefix}river_queue SET {assignments} WHERE {target} RETURNING 1"
    count = len((yield Statement(sql, tuple(b.params))))
    if count == 0 and name != "*":
        raise QueueNotFoundError(f"queue {name!r} not found")
    return count


def _pause_queue(d: Any, intent: PauseQueue) -> Plan[int]:
    return (yield from _pause_or_resume(d, intent.name, intent.now, pause=True))


def _resume_queue(d: Any, intent: ResumeQueue) -> Plan[int]:
    return (yield from _pause_or_resume(d, intent.name, intent.now, pause=False))


def _update_queue(d: Any, intent: UpdateQueue) -> Plan[QueueRow]:
    b = _b()
    metadata = "metadata" if intent.metadata is None else f"jsonb({b.p(_text(intent.metadata))})"
    sql = f"""
        UPDATE {d.prefix}river_queue SET metadata = {metadata}, updated_at = {sqlite_now(b, None)}
        WHERE name = {b.p(intent.name)} RETURNING {SQLITE_QUEUE_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise QueueNotFoundError(f"queue {intent.name!r} not found")
    return queue_row(rows[0])


def _delete_queue(d: Any, intent: DeleteQueue) -> Plan[QueueRow]:
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_queue WHERE name = ? RETURNING {SQLITE_QUEUE_COLUMNS}",
        (intent.name,),
    )
    if not rows:
        raise QueueNotFoundError(f"queue {intent.name!r} not found")
    return queue_row(rows[0])


# ---------------------------------------------------------------- leader


def _expiry(b: Binder, now: datetime | None, ttl: timedelta) -> str:
    return f"datetime({sqlite_now(b, now)}, 'subsec', {b.p(_ttl(ttl))})"


def _leader_elect(d: Any, intent: LeaderElect) -> Plan[LeaderRow | None]:
    b = _b()
    yield Statement(
        f"DELETE FROM {d.prefix}river_leader WHERE expires_at < {sqlite_now(b, intent.now)}",
        tuple(b.params),
        fetch=False,
    )
    b = _b()
    sql = f"""
        INSERT INTO {d.prefix}river_leader (leader_id, elected_at, expires_at)
        VALUES ({b.p(intent.leader_id)}, {sqlite_now(b, intent.now)},
                {_expiry(b, intent.now, intent.ttl)})
        ON CONFLICT (name) DO NOTHING
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_reelect(d: Any, intent: LeaderReelect) -> Plan[LeaderRow | None]:
    b = _b()
    elected_at = format_sqlite_time(intent.elected_at)
    # elected_at matches as an instant at millisecond precision, whatever its text form (§10.1).
    sql = f"""
        UPDATE {d.prefix}river_leader SET expires_at = {_expiry(b, intent.now, intent.ttl)}
        WHERE unixepoch(elected_at, 'subsec') = unixepoch({b.p(elected_at)}, 'subsec')
          AND expires_at >= {sqlite_now(b, intent.now)}
          AND leader_id = {b.p(intent.leader_id)}
        RETURNING {LEADER_COLUMNS}
    """
    rows = yield Statement(sql, tuple(b.params))
    return leader_row(rows[0]) if rows else None


def _leader_resign(d: Any, intent: LeaderResign) -> Plan[bool]:
    rows = yield Statement(
        f"""
        DELETE FROM {d.prefix}river_leader
        WHERE unixepoch(elected_at, 'subsec') = unixepoch(?, 'subsec') AND leader_id = ?
        RETURNING 1
        """,
        (format_sqlite_time(intent.elected_at), intent.leader_id),
    )
    return bool(rows)


def _get_leader(d: Any, intent: GetLeader) -> Plan[LeaderRow | None]:
    rows = yield Statement(f"SELECT {LEADER_COLUMNS} FROM {d.prefix}river_leader")
    return leader_row(rows[0]) if rows else None


# ---------------------------------------------------------------- notifications


def _notify(d: Any, intent: Notify) -> Plan[None]:
    if not intent.payloads:
        return None
    # The outbox stores the bare topic (§12.5); the schema is the database itself.
    yield Statement(
        f"INSERT INTO {d.prefix}river_notification (topic, payload)"
        " SELECT ?, value FROM json_each(?)",
        (intent.topic, _json_list(intent.payloads)),
        fetch=False,
    )
    return None


def _fetch_notifications(d: Any, intent: FetchNotifications) -> Plan[list[NotificationRow]]:
    rows = yield Statement(
        f"SELECT {NOTIFICATION_COLUMNS} FROM {d.prefix}river_notification"
        " WHERE id > ? ORDER BY id LIMIT ?",
        (intent.after_id, intent.limit),
    )
    return [notification_row(r) for r in rows]


def _max_notification_id(d: Any, intent: MaxNotificationId) -> Plan[int]:
    rows = yield Statement(f"SELECT coalesce(max(id), 0) FROM {d.prefix}river_notification")
    return int(rows[0][0])


# ---------------------------------------------------------------- job administration


def _filter(b: Binder, f: JobListFilter) -> list[str]:
    def among(column: str, values: Any) -> str:
        return f"{column} IN (SELECT value FROM json_each({b.p(_json_list(values))}))"

    where: list[str] = []
    if f.ids is not None:
        where.append(among("id", f.ids))
    if f.kinds is not None:
        where.append(among("kind", f.kinds))
    if f.queues is not None:
        where.append(among("queue", f.queues))
    if f.states is not None:
        where.append(among("state", [s.value for s in f.states]))
    if f.priorities is not None:
        where.append(among("priority", f.priorities))
    if f.tags_any is not None:
        where.append(f"EXISTS (SELECT 1 FROM json_each(tags) AS tag WHERE {among('tag.value', f.tags_any)})")
    if f.created_before is not None:
        where.append(f"created_at < {b.p(format_sqlite_time(f.created_before))}")
    if f.created_after is not None:
        where.append(f"created_at > {b.p(format_sqlite_time(f.created_after))}")
    if f.finalized_before is not None:
        where.append(f"finalized_at < {b.p(format_sqlite_time(f.finalized_before))}")
    return where


def _list_jobs(d: Any, intent: ListJobs) -> Plan[list[JobRow]]:
    b = _b()
    where = _filter(b, intent.filter)
    order, cursor = order_and_cursor(b, intent, lambda b, v: b.p(format_sqlite_time(v)))
    where += cursor
    sql = f"""
        SELECT {S} FROM {d.prefix}river_job WHERE {" AND ".join(where) or "true"}
        ORDER BY {order} LIMIT {b.p(intent.limit)}
    """
    return _jobs((yield Statement(sql, tuple(b.params))))


def _count_jobs(d: Any, intent: CountJobs) -> Plan[dict[tuple[JobState, str, str], int]]:
    b = _b()
    where = _filter(b, intent.filter)
    sql = f"""
        SELECT state, queue, kind, count(*) FROM {d.prefix}river_job
        WHERE {" AND ".join(where) or "true"} GROUP BY 1, 2, 3
    """
    rows = yield Statement(sql, tuple(b.params))
    return {(JobState(r[0]), str(r[1]), str(r[2])): int(r[3]) for r in rows}


def _select_job(d: Any, job_id: int) -> Plan[JobRow]:
    rows = yield Statement(f"SELECT {S} FROM {d.prefix}river_job WHERE id = ?", (job_id,))
    if not rows:
        raise JobNotFoundError(f"job {job_id} not found")
    return job_row_from_sqlite(rows[0])


def _get_job(d: Any, intent: GetJob) -> Plan[JobRow]:
    return (yield from _select_job(d, intent.id))


def _get_jobs(d: Any, intent: GetJobs) -> Plan[list[JobRow]]:
    sql = f"SELECT {S} FROM {d.prefix}river_job WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id"
    return _jobs((yield Statement(sql, (_json_list(intent.ids),))))


def _changed_or_current(d: Any, job_id: int, statement: Statement) -> Plan[JobRow]:
    rows = yield statement
    if rows:
        return job_row_from_sqlite(rows[0])
    return (yield from _select_job(d, job_id))


def _cancel_job(d: Any, intent: CancelJob) -> Plan[JobRow]:
    # No notification: SQLite cancels reach running jobs through the completer and rescuer (§12.4).
    b = _b()
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
            finalized_at = CASE WHEN state = 'running' THEN finalized_at
                                ELSE {sqlite_now(b, intent.now)} END,
            metadata = jsonb_set(metadata, '$.cancel_attempted_at',
                                 json({b.p(_text(intent.cancel_attempted_at))}))
        WHERE id = {b.p(intent.id)} AND state NOT IN {_FINALIZED} AND finalized_at IS NULL
        RETURNING {S}
    """
    return (yield from _changed_or_current(d, intent.id, Statement(sql, tuple(b.params))))


def _retry_job(d: Any, intent: RetryJob) -> Plan[JobRow]:
    b = _b()
    sql = f"""
        UPDATE {d.prefix}river_job
        SET state = 'available',
            max_attempts = CASE WHEN attempt = max_attempts THEN max_attempts + 1 ELSE max_attempts END,
            finalized_at = NULL,
            scheduled_at = {sqlite_now(b, intent.now)}
        WHERE id = {b.p(intent.id)} AND state <> 'running'
          AND NOT (state = 'available' AND scheduled_at < {sqlite_now(b, intent.now)})
        RETURNING {S}
    """
    return (yield from _changed_or_current(d, intent.id, Statement(sql, tuple(b.params))))


def _delete_job(d: Any, intent: DeleteJob) -> Plan[JobRow]:
    rows = yield Statement(
        f"DELETE FROM {d.prefix}river_job WHERE id = ? AND state <> 'running' RETURNING {S}",
        (intent.id,),
    )
    if rows:
        return job_row_from_sqlite(rows[0])
    yield from _select_job(d, intent.id)
    raise ValidationError(f"job {intent.id} is running; running jobs cannot be deleted")


def _delete_jobs(d: Any, intent: DeleteJobs) -> Plan[list[JobRow]]:
    b = _b()
    where = [*_filter(b, intent.filter), "state <> 'running'"]
    sql = f"""
        DELETE FROM {d.prefix}river_job WHERE id IN (
            SELECT id FROM {d.prefix}river_job WHERE {" AND ".join(where)}
            ORDER BY id LIMIT {b.p(intent.limit)}
        ) RETURNING {S}
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(_jobs(rows), key=lambda job: job.id)


def shallow_merge_sql(b: Binder, target: str, updates: bytes) -> str:
    """``target`` with each top-level key of ``updates`` replaced, like Postgres ``||``.

    ``jsonb_patch`` would merge nested objects and drop null-valued keys, which
    is not what "set metadata key" means; each value is taken from the update
    document itself (``->`` keeps it JSON, so its text survives unchanged).
    """
    try:
        parsed = json.loads(updates)
    except ValueError as exc:
        raise ValidationError(f"metadata updates are not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValidationError(f"metadata updates must be a JSON object, got {parsed!r}")
    if not parsed:
        return target
    pairs = []
    for key in parsed:
        if '"' in key or "\\" in key:
            raise ValidationError(f"metadata key {key!r} cannot be set on SQLite (quote or backslash)")
        path = f"'$.\"{key}\"'"
        pairs.append(f"{path}, jsonb({b.p(_text(updates))}) -> {path}")
    return f"jsonb_set({target}, {', '.join(pairs)})"


def _update_job_metadata(d: Any, intent: UpdateJobMetadata) -> Plan[JobRow]:
    b = _b()
    merged = shallow_merge_sql(b, "metadata", intent.metadata_updates)
    sql = f"UPDATE {d.prefix}river_job SET metadata = {merged} WHERE id = {b.p(intent.id)} RETURNING {S}"
    rows = yield Statement(sql, tuple(b.params))
    if not rows:
        raise JobNotFoundError(f"job {intent.id} not found")
    return job_row_from_sqlite(rows[0])


def _requeue_running_jobs(d: Any, intent: RequeueRunningJobs) -> Plan[list[JobRow]]:
    b = _b()
    sql = f"""
        UPDATE {d.prefix}river_job SET state = 'available', scheduled_at = {sqlite_now(b, intent.now)}
        WHERE state = 'running' AND attempted_at < {b.p(format_sqlite_time(intent.attempted_before))}
        RETURNING {S}
    """
    rows = yield Statement(sql, tuple(b.params))
    return sorted(_jobs(rows), key=lambda job: job.id)


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
    FetchNotifications: _fetch_notifications,
    MaxNotificationId: _max_notification_id,
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
