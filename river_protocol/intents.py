"""SQL intents: every statement the protocol needs, as typed immutable values.

Machines and the client API produce intents; a dialect
(``river_protocol.dialects``) turns each into a *plan*: a generator yielding
``Statement`` values and receiving their rows, returning the parsed result.
Drivers only run statements, so the same intent means the same thing on
Postgres and SQLite, from the threaded driver or from trio.

``now`` fields: ``None`` means "the database clock" (what Go does outside
tests); machines pass the client clock where Go uses it (docs/protocol.md §3.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.frozen import quick_init
from river_protocol.job import JobRow
from river_protocol.states import JobState

# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement in the driver's DB-API paramstyle (``%s`` for psycopg, ``?`` for sqlite3)."""

    sql: str
    params: tuple[Any, ...] = ()
    fetch: bool = True
    # Ask for the result rows in Postgres's binary format where the driver can (psycopg 3): the
    # same values, parsed faster. For the statements that return a row per job.
    binary: bool = False


@dataclass(frozen=True, slots=True)
class CopyRows:
    """A Postgres ``COPY ... FROM STDIN`` of ``rows`` into ``table(columns)``; yields no rows."""

    table: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


class Intent:
    """Base of all intents. ``transactional`` intents need BEGIN/COMMIT around their plan
    unless they already run inside a caller's transaction."""

    transactional: bool = False


# ---------------------------------------------------------------- insert


@dataclass(frozen=True, slots=True)
class InsertParams:
    """One row to insert, fully resolved (options applied, unique key computed)."""

    kind: str
    encoded_args: bytes
    state: JobState = JobState.AVAILABLE
    queue: str = "default"
    priority: int = 1
    max_attempts: int = 25
    metadata: bytes = b"{}"
    tags: tuple[str, ...] = ()
    scheduled_at: datetime | None = None
    created_at: datetime | None = None
    unique_key: bytes | None = None
    unique_states: int | None = None


@dataclass(frozen=True, slots=True)
class InsertResult:
    job: JobRow
    unique_skipped_as_duplicate: bool


@dataclass(frozen=True, slots=True)
class InsertJobs(Intent):
    """Multi-row insert returning rows; unique conflicts return the existing row, flagged skipped.

    Result: ``list[InsertResult]`` in input order. Inputs whose unique keys collide with an
    earlier input of the same batch are not sent; they get that input's row, flagged skipped
    (as if inserted one by one). SQLite requires ``nonce``.
    """

    jobs: tuple[InsertParams, ...]
    nonce: str = ""  # SQLite skip detection: 16 hex chars drawn by the caller (§5.2)
    transactional = True


@dataclass(frozen=True, slots=True)
class InsertJobsFast(Intent):
    """Bulk insert without returning rows (COPY on Postgres); result: inserted count."""

    jobs: tuple[InsertParams, ...]
    transactional = True


@dataclass(frozen=True, slots=True)
class FullJobRow:
    """Any column values, for tests and administrative imports."""

    kind: str
    encoded_args: bytes = b"{}"
    state: JobState = JobState.AVAILABLE
    queue: str = "default"
    priority: int = 1
    attempt: int = 0
    max_attempts: int = 25
    attempted_at: datetime | None = None
    attempted_by: tuple[str, ...] = ()
    created_at: datetime | None = None
    errors: tuple[bytes, ...] = ()
    finalized_at: datetime | None = None
    metadata: bytes = b"{}"
    scheduled_at: datetime | None = None
    tags: tuple[str, ...] = ()
    unique_key: bytes | None = None
    unique_states: int | None = None


@dataclass(frozen=True, slots=True)
class InsertFullJobs(Intent):
    rows: tuple[FullJobRow, ...]
    transactional = True


# ---------------------------------------------------------------- fetch / complete


@dataclass(frozen=True, slots=True)
class ClaimJobs(Intent):
    """Lock up to ``limit`` due available jobs of ``queue`` as running for ``client_id``.

    Optional filters (all off by default, as in River): ``kinds`` claims only
    those kinds (``fetch_only_known_kinds``); ``tags_any`` claims only jobs
    carrying at least one of those tags, and ``untagged_only`` only jobs
    without tags (a tag-filtered worker pool). An empty ``kinds`` or
    ``tags_any`` tuple claims nothing.

    ``asynchronous_commit`` (off by default, as in River): on Postgres the claim's own
    transaction commits without waiting for its WAL flush (``synchronous_commit = off``
    for that transaction only; the session keeps its setting; inside a caller's
    transaction, it is that transaction's commit). A crash of the server, or a failover
    to a standby, can then lose the last claims (their jobs become available again and
    run again, as River's at-least-once delivery allows), never a later completion: a
    completion's commit flushes every earlier record. SQLite ignores it.
    """

    queue: str
    limit: int
    client_id: str
    max_attempted_by: int = 100
    now: datetime | None = None
    kinds: tuple[str, ...] | None = None
    tags_any: tuple[str, ...] | None = None
    untagged_only: bool = False
    asynchronous_commit: bool = False
    transactional = True  # single statement on Postgres; several on SQLite


@dataclass(frozen=True, slots=True)
class ReconcileClaim(Intent):
    """Undo a claim whose answer was lost: its rows may be committed as running for
    ``client_id`` although the client never saw them, and nothing else would touch
    them until the rescuer.

    Puts back to ``available`` every row of ``queue`` that is running, was last
    attempted by ``client_id`` at or after ``claimed_since`` (``None``: any time),
    and is not in ``exclude_ids`` (what the client is running, plus the rows of the
    claim that set ``claimed_since``, whose outcomes may still be on their way).
    The claim's changes are undone as far as River's columns keep them: attempt
    decremented, this client's entry dropped from the end of ``attempted_by``,
    and ``attempted_at`` cleared when no attempt remains (an earlier value is
    not stored anywhere). Returns the ids put back, ascending.
    """

    queue: str
    client_id: str
    claimed_since: datetime | None
    exclude_ids: tuple[int, ...] = ()


@quick_init
@dataclass(frozen=True, slots=True)
class SetStateUpdate:
    """One job's requested final state (docs/protocol.md §8.1); ``None`` = leave unchanged."""

    id: int
    state: JobState
    attempt: int | None = None
    error: bytes | None = None  # encoded AttemptError JSON
    finalized_at: datetime | None = None
    scheduled_at: datetime | None = None
    metadata_do_merge: bool = False
    metadata_updates: bytes = b"{}"
    # The row as the claim returned it, when the update is for a run of it. No writer changes a
    # running job's other columns, so a dialect may read back only what an update can change
    # (state, attempt, times, errors, metadata) and take the rest from here; both dialects do
    # when every update of a batch has it (on SQLite the JSON columns' conversion to text is most
    # of a completion's cost). A hint about where the row came from, not part of the update's
    # value: it takes no part in equality, and the rows returned are the same.
    claimed: JobRow | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class SetStateIfRunning(Intent):
    """Batched completion; returns the current rows of every id that still exists, by id."""

    updates: tuple[SetStateUpdate, ...]
    now: datetime | None = None
    transactional = True


# ---------------------------------------------------------------- maintenance


@dataclass(frozen=True, slots=True)
class ScheduledJob:
    job: JobRow
    conflict_discarded: bool


@dataclass(frozen=True, slots=True)
class ScheduleJobs(Intent):
    """Move due retryable/scheduled jobs to available (or discard unique conflicts)."""

    now: datetime  # client now + look-ahead (the scheduler passes now + 5 s)
    limit: int
    transactional = True


@dataclass(frozen=True, slots=True)
class GetStuckJobs(Intent):
    stuck_horizon: datetime
    limit: int
    after_id: int = 0


@dataclass(frozen=True, slots=True)
class RescueUpdate:
    id: int
    state: JobState
    error: bytes
    finalized_at: datetime | None
    scheduled_at: datetime
    metadata_updates: bytes = b"{}"


@dataclass(frozen=True, slots=True)
class RescueJobs(Intent):
    updates: tuple[RescueUpdate, ...]
    transactional = True


@dataclass(frozen=True, slots=True)
class DeleteFinalizedBefore(Intent):
    """Job cleaner batch; a ``None`` horizon leaves that state alone. Result: deleted count."""

    cancelled_before: datetime | None
    completed_before: datetime | None
    discarded_before: datetime | None
    limit: int
    queues_included: tuple[str, ...] | None = None
    queues_excluded: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DeleteExpiredQueues(Intent):
    updated_before: datetime
    limit: int


@dataclass(frozen=True, slots=True)
class DeleteNotificationsBefore(Intent):
    created_before: datetime


@dataclass(frozen=True, slots=True)
class ListReindexArtifacts(Intent):
    """Names of ``<index>_ccnew[N]`` / ``<index>_ccold[N]`` leftovers (Postgres; SQLite: none)."""

    index: str


@dataclass(frozen=True, slots=True)
class IndexExists(Intent):
    index: str


@dataclass(frozen=True, slots=True)
class Reindex(Intent):
    index: str


@dataclass(frozen=True, slots=True)
class DropIndex(Intent):
    index: str


# ---------------------------------------------------------------- queues


@dataclass(frozen=True, slots=True)
class QueueRow:
    name: str
    created_at: datetime
    metadata: dict[str, Any]
    paused_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class UpsertQueue(Intent):
    name: str
    metadata: bytes = b"{}"
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class GetQueue(Intent):
    name: str


@dataclass(frozen=True, slots=True)
class GetCancelRequested(Intent):
    """Of ``ids``, the jobs still running whose metadata holds a ``cancel_attempted_at``: how a
    poll-only producer learns of cancellations it cannot hear (§12.6). Result: ``(id, value)``
    pairs in id order, the value being the ``cancel_attempted_at`` string."""

    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ListQueues(Intent):
    limit: int = 100
    after_name: str | None = None
    name_contains: str | None = None
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PauseQueue(Intent):
    """``name`` may be ``*``; result: affected count; a missing named queue raises QueueNotFoundError."""

    name: str
    now: datetime | None = None
    transactional = True


@dataclass(frozen=True, slots=True)
class ResumeQueue(Intent):
    name: str
    now: datetime | None = None
    transactional = True


@dataclass(frozen=True, slots=True)
class UpdateQueue(Intent):
    name: str
    metadata: bytes | None = None


@dataclass(frozen=True, slots=True)
class DeleteQueue(Intent):
    """Result: the deleted QueueRow; a missing queue raises QueueNotFoundError."""

    name: str


# ---------------------------------------------------------------- leader


@dataclass(frozen=True, slots=True)
class LeaderRow:
    leader_id: str
    elected_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class LeaderElect(Intent):
    leader_id: str
    ttl: timedelta
    now: datetime | None = None
    transactional = True


@dataclass(frozen=True, slots=True)
class LeaderReelect(Intent):
    leader_id: str
    elected_at: datetime
    ttl: timedelta
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class LeaderResign(Intent):
    """Result: True when a row was deleted (Postgres also notifies ``river_leadership``)."""

    leader_id: str
    elected_at: datetime


@dataclass(frozen=True, slots=True)
class GetLeader(Intent):
    pass


# ---------------------------------------------------------------- notifications


@dataclass(frozen=True, slots=True)
class Notify(Intent):
    """Send payloads on a topic (bare name, e.g. ``river_insert``): pg_notify or the SQLite outbox."""

    topic: str
    payloads: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NotificationRow:
    id: int
    topic: str
    payload: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class FetchNotifications(Intent):
    """SQLite outbox poll: rows with id > after_id, oldest first (Postgres: ValidationError)."""

    after_id: int
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class MaxNotificationId(Intent):
    pass


# ---------------------------------------------------------------- job administration


@dataclass(frozen=True, slots=True)
class GetJob(Intent):
    """Result: the JobRow; a missing id raises JobNotFoundError."""

    id: int


@dataclass(frozen=True, slots=True)
class GetJobs(Intent):
    ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class JobListFilter:
    ids: tuple[int, ...] | None = None
    kinds: tuple[str, ...] | None = None
    queues: tuple[str, ...] | None = None
    states: tuple[JobState, ...] | None = None
    priorities: tuple[int, ...] | None = None
    tags_any: tuple[str, ...] | None = None
    created_before: datetime | None = None
    created_after: datetime | None = None
    finalized_before: datetime | None = None
    tags_all: tuple[str, ...] | None = None  # every one of these tags
    metadata_contains: bytes | None = None  # a JSON object the metadata contains (Postgres's @>)


@dataclass(frozen=True, slots=True)
class ListJobs(Intent):
    """``order_by`` is ``id`` | ``scheduled_at`` | ``finalized_at`` | ``created_at`` | ``attempted_at``;
    cursor pagination is keyset on (order column, id) after ``after``.

    ``go_keyset``: River's ``JobList`` order and keyset instead of ours (as River's
    ports and its harness leaf List/CursorInterchange have it): NULLs of the
    order column last ascending and first descending on both databases, and an
    ``after`` whose value is None stands on a NULL of the order column (Go's
    zero cursor time); ordering by id, ids alone decide.
    """

    filter: JobListFilter = field(default_factory=JobListFilter)
    order_by: str = "id"
    descending: bool = False
    limit: int = 100
    after: tuple[Any, int] | None = None
    go_keyset: bool = False


@dataclass(frozen=True, slots=True)
class CountJobs(Intent):
    """Counts grouped by (state, queue, kind); result: ``dict[(JobState, queue, kind), int]``."""

    filter: JobListFilter = field(default_factory=JobListFilter)


@dataclass(frozen=True, slots=True)
class CancelJob(Intent):
    id: int
    cancel_attempted_at: bytes  # exact JSON string value stored in metadata
    now: datetime | None = None
    transactional = True


@dataclass(frozen=True, slots=True)
class RetryJob(Intent):
    id: int
    now: datetime | None = None
    transactional = True


@dataclass(frozen=True, slots=True)
class DeleteJob(Intent):
    """Result: the deleted row; running -> ValidationError, missing -> JobNotFoundError."""

    id: int
    transactional = True


@dataclass(frozen=True, slots=True)
class DeleteJobs(Intent):
    filter: JobListFilter
    limit: int
    transactional = True


@dataclass(frozen=True, slots=True)
class UpdateJobMetadata(Intent):
    """Shallow-merge ``metadata_updates`` into the job's metadata (e.g. ``{"output": ...}``)."""

    id: int
    metadata_updates: bytes


@dataclass(frozen=True, slots=True)
class RequeueRunningJobs(Intent):
    """Operator tool: running jobs attempted before ``attempted_before`` back to available
    (scheduled_at = now, attempt unchanged); result: the moved rows by id."""

    attempted_before: datetime
    now: datetime | None = None


# ---------------------------------------------------------------- migrations


@dataclass(frozen=True, slots=True)
class GetMigrations(Intent):
    """Applied versions of ``line`` (handles pre-v5 tables without ``line``); [] when no table."""

    line: str = "main"


@dataclass(frozen=True, slots=True)
class ApplyMigration(Intent):
    """One version's script plus its bookkeeping, in one transaction."""

    line: str
    version: int
    direction: str  # "up" | "down"
    sql: str
    transactional = True


@dataclass(frozen=True, slots=True)
class CheckMigration(Intent):
    """Whether one version may run here, asked without running it (a dry run): raises the
    refusal ``ApplyMigration`` of the same version would raise before its script (River Pro's
    schema beside SQLite's version 8, ``river_protocol.migrations.pro_guard``); None when the
    version would run. Checks nothing else: a script may still fail when it runs."""

    line: str
    version: int
    direction: str  # "up" | "down"


# ---------------------------------------------------------------- workflows (river_protocol.workflow)


@dataclass(frozen=True, slots=True)
class PromoteWorkflowTasks(Intent):
    """Move pending workflow tasks on whose deps allow it (``river_protocol.workflow.decide``):
    to ``available``, or to ``cancelled`` with the reason appended to ``errors``.

    Which pending tasks are looked at: those depending on one of ``finished`` ((workflow id,
    task name) pairs: the completer's promotion after its own completions), and every
    pending task of ``workflow_ids`` (a workflow grown or retried), and every pending task
    of a workflow with a task finalized at or after ``finished_since`` (the leader's
    sweep between its full ones); with none of these, every pending workflow task (the
    leader's full sweep). ``limit`` of them with ids above ``after_id``: a sweep pages on.
    Each update is guarded by ``state = 'pending'``, so a task moves once whoever else
    promotes at the same time. A cancellation can make its own
    dependents final: the plan goes on with the dependents of the tasks it cancelled until
    none is left to cancel. Result: ``PromotionResult``.
    """

    now: datetime
    workflow_ids: tuple[str, ...] | None = None
    limit: int = 1000
    after_id: int = 0
    finished: tuple[tuple[str, str], ...] | None = None
    finished_since: datetime | None = None

    @property
    def sweep(self) -> bool:
        """Every pending workflow task (nothing narrows the candidates)."""
        return self.workflow_ids is None and self.finished is None and self.finished_since is None


@dataclass(frozen=True, slots=True)
class PromotionResult:
    examined: int  # pending tasks of the first read (a full page: the sweep continues)
    last_id: int  # the highest id examined by the first read (0 when none)
    promoted: tuple[tuple[int, str], ...] = ()  # (id, queue)
    cancelled: tuple[tuple[int, str], ...] = ()  # (id, workflow id)


@dataclass(frozen=True, slots=True)
class HoldLease(Intent):
    """Take or renew the lease ``name`` in ``river_py_lease`` (the python migration line) for
    ``holder``, until the database's now + ``ttl``: taken when no row holds it, renewed when
    ``holder`` holds it, refused while another holder's lease has not expired. One atomic upsert,
    so two contenders never both take it. Result: True (held by ``holder``), False (another
    holds it), None (no ``river_py_lease`` table: the python line is not applied)."""

    name: str
    holder: str
    ttl: timedelta

    def __post_init__(self) -> None:
        _check_lease_text("name", self.name)
        _check_lease_text("holder", self.holder)
        if not isinstance(self.ttl, timedelta):
            raise ValidationError(f"lease ttl must be a timedelta, got {type(self.ttl).__name__}")
        if self.ttl <= timedelta(0):
            raise ValidationError(f"lease ttl must be positive, got {self.ttl}")


@dataclass(frozen=True, slots=True)
class ReleaseLease(Intent):
    """Give up the lease ``name`` if ``holder`` holds it (another client may take it at once).
    Result: True when a row was deleted."""

    name: str
    holder: str

    def __post_init__(self) -> None:
        _check_lease_text("name", self.name)
        _check_lease_text("holder", self.holder)


# river_py_lease's CHECK constraints: a name and a holder of 1 to 127 characters.
LEASE_TEXT_MAX_LEN = 127


def _check_lease_text(what: str, value: object) -> None:
    """A typed error here rather than a constraint violation from the database."""
    if not isinstance(value, str):
        raise ValidationError(f"lease {what} must be a string, got {type(value).__name__}")
    if not value:
        raise ValidationError(f"lease {what} cannot be empty")
    if len(value) > LEASE_TEXT_MAX_LEN:
        raise ValidationError(
            f"lease {what} cannot be longer than {LEASE_TEXT_MAX_LEN} characters, got {len(value)}")


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """A row of ``river_py_lease``: who holds lease ``name``, since when, until when."""

    name: str
    holder: str
    held_since: datetime  # when ``holder`` took it (its renewals keep this)
    expires_at: datetime  # when it lapses unless renewed (each renewal moves it on)


@dataclass(frozen=True, slots=True)
class LeaseRead:
    """What ``GetLease`` found, with the database's clock, which a lease's expiry is counted by."""

    read_at: datetime
    table_exists: bool  # False: the python migration line is not applied
    row: LeaseRow | None  # None: nobody holds the lease (or no table)


@dataclass(frozen=True, slots=True)
class GetLease(Intent):
    """Read lease ``name`` of ``river_py_lease``, expired or not, and the database's now.
    Result: ``LeaseRead``; a database without the python line is an answer, not an error."""

    name: str


@dataclass(frozen=True, slots=True)
class ListWorkflowTasks(Intent):
    """Every row of one workflow (its tasks by id), or, with ``tasks``, only those task names."""

    workflow_id: str
    tasks: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ListWorkflows(Intent):
    """Workflows by most recent first task, ``limit`` of them, with task counts by state
    (result: ``list[river_protocol.workflow.WorkflowSummary]``). ``before_id``: page on
    from the last id returned (ids sort by creation for generated ids)."""

    limit: int = 100
    before_created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class CancelWorkflow(Intent):
    """Cancel a workflow's tasks: pending, available, scheduled and retryable ones at once
    (finalized now, reason in ``errors``), running ones get River's remote cancel
    (``cancel_attempted_at`` in metadata, as the cancel API sets it). Result: the updated rows."""

    workflow_id: str
    cancel_attempted_at: bytes
    error: bytes
    now: datetime
    transactional = True


@dataclass(frozen=True, slots=True)
class RetryWorkflow(Intent):
    """Retry the failed part of a workflow: its discarded tasks, and its cancelled tasks
    that ran (attempt > 0), go back to ``available``; the tasks cancelled because of a
    dep (never attempted) go back to ``pending`` for the promoter. Result: the updated rows."""

    workflow_id: str
    now: datetime
    transactional = True
