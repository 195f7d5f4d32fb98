"""Test-run pieces with no waiting in them: the offline ``ctx.client`` and claiming one job by id."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from river_db.executor import Executor
from river_db.testing.builder import TEST_CLIENT_ID
from river_protocol.dialects.base import Dialect, Plan, drive
from river_protocol.errors import RiverError, ValidationError
from river_protocol.intents import ClaimJobs, GetJob, Statement
from river_protocol.job import JobRow
from river_protocol.states import JobState


class NoDatabaseError(RiverError):
    """A worker run by ``work_once`` used ``ctx.client`` although no client was given."""


class OfflineClient:
    """``ctx.client`` for a run without a database: anything beyond its identity raises
    ``NoDatabaseError``, which ``work_once`` lets through to the test instead of failing the job.

    ``schema`` and ``client_id`` are answered so that code which only reads them
    (``ctx.complete_in(tx)`` reads the schema) still works.
    """

    schema: str | None = None

    def __init__(self, client_id: str = TEST_CLIENT_ID) -> None:
        self.client_id = client_id

    def __getattr__(self, name: str) -> Any:
        raise NoDatabaseError(
            f"ctx.client.{name}: this worker ran without a database (work_once); pass "
            "client=Client(...) to work_once, or use work_with_client, to give it one"
        )


_SAVEPOINT = "river_testing_claim"


def _mark_running(dialect: Dialect, job_id: int, client_id: str, now: datetime) -> Statement:
    """The statement putting one job in ``running`` by id, the way a claim would (River's test
    worker does the same)."""
    prefix = getattr(dialect, "prefix", "")
    if dialect.name == "postgres":
        sql = (f"UPDATE {prefix}river_job SET state = 'running', attempt = attempt + 1, attempted_at = %s, "
               "attempted_by = array_append(coalesce(attempted_by, '{}'::text[]), %s::text) WHERE id = %s")
        return Statement(sql, (now, client_id, job_id), fetch=False)
    from river_protocol.golang.gotime import format_sqlite_time

    sql = (f"UPDATE {prefix}river_job SET state = 'running', attempt = attempt + 1, attempted_at = ?, "
           "attempted_by = jsonb_insert(coalesce(attempted_by, jsonb('[]')), '$[#]', ?) WHERE id = ?")
    return Statement(sql, (format_sqlite_time(now), client_id, job_id), fetch=False)


def claim_plan(dialect: Dialect, job: JobRow, client_id: str) -> Plan[JobRow]:
    """The plan claiming ``job`` inside an open transaction and returning it running.

    The producer's own claim (``ClaimJobs`` on the job's queue) is tried first;
    when it would pick another job (one ahead in the queue, or this one is not
    yet available) that attempt is rolled back to a savepoint and the job is
    moved to ``running`` by id instead. A plan (statements only), so a blocking
    executor and an async one (threads or an asyncio-native caller's
    transaction) run the same steps; ``ValidationError`` is raised before any
    statement when ``job`` cannot be claimed.
    """
    if job.state is JobState.RUNNING:
        raise ValidationError(f"job {job.id} is already running; it cannot be claimed again")
    if job.state.finalized:
        raise ValidationError(f"job {job.id} is already {job.state.value}; there is nothing to work")
    return _claim_steps(dialect, job, client_id)


def _claim_steps(dialect: Dialect, job: JobRow, client_id: str) -> Plan[JobRow]:
    yield Statement(f"SAVEPOINT {_SAVEPOINT}", fetch=False)
    claimed = yield from dialect.plan(ClaimJobs(queue=job.queue, limit=1, client_id=client_id))
    if [row.id for row in claimed] == [job.id]:
        yield Statement(f"RELEASE SAVEPOINT {_SAVEPOINT}", fetch=False)
        row: JobRow = claimed[0]
        return row
    yield Statement(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}", fetch=False)
    yield Statement(f"RELEASE SAVEPOINT {_SAVEPOINT}", fetch=False)
    yield _mark_running(dialect, job.id, client_id, datetime.now(UTC))
    fetched: JobRow = yield from dialect.plan(GetJob(job.id))
    return fetched


def claim_job(ex: Executor, job: JobRow, client_id: str) -> JobRow:
    """Claim ``job`` inside ``ex``'s open transaction and return it running (``claim_plan``)."""
    return drive(claim_plan(ex.dialect, job, client_id), ex.execute)
