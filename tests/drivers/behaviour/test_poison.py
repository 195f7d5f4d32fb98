"""Rows other writers got wrong: each fails alone through the normal error path; the queue keeps flowing."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from river_protocol.job import AttemptError
from river_sync import Database, EventKind, InsertOpts, JobState
from tests.drivers.behaviour.support import fast_client, next_of, row, wait_for_all
from tests.drivers.harness import WAIT, Harness
from tests.drivers.test_client_support import Task

GOOD = 20

# (label, SQL fragment after SET, the text the recorded error must mention)
PG_POISON = [
    ("metadata null", "metadata = 'null'::jsonb", "metadata"),
    ("metadata array", "metadata = '[]'::jsonb", "metadata"),
    ("metadata string", "metadata = '\"s\"'::jsonb", "metadata"),
    ("metadata huge number", "metadata = ('{\"n\": ' || repeat('9', 5000) || '}')::jsonb", "metadata"),
    ("args array", "args = '[]'::jsonb", "args"),
    ("args string", "args = '\"s\"'::jsonb", "args"),
    ("tags with a null", "tags = ARRAY['a', NULL]::varchar(255)[]", "tags"),
]

SQLITE_POISON = [
    ("metadata null", "metadata = jsonb('null')", "metadata"),
    ("metadata array", "metadata = '[]'", "metadata"),
    ("metadata string", "metadata = jsonb('\"s\"')", "metadata"),
    ("metadata huge number", "metadata = '{\"n\": ' || printf('%.5000c', '9') || '}'", "metadata"),
    ("args array", "args = jsonb('[]')", "args"),
    ("tags string", "tags = jsonb('\"a\"')", "tags"),
    ("tags numbers", "tags = '[1, 2]'", "tags"),
    ("attempted_by object", "attempted_by = '{\"a\": 1}'", "attempted_by"),
    ("errors an object", "errors = '{\"at\": 1}'", "errors"),
    ("created_at unreadable", "created_at = 'last tuesday'", "created_at"),
    # Text that is no JSON at all: json() would fail the claim statement itself.
    ("args malformed", "args = '{bad json'", "args"),
    ("metadata malformed", "metadata = '{\"a\": '", "metadata"),
    ("tags malformed", "tags = '[1,'", "tags"),
]


def _corrupt(url: str, job_id: int, assignment: str) -> None:
    with Database.from_url(url) as db, db.executor() as ex:
        mark = "%s" if db.dialect.name == "postgres" else "?"
        ex.conn.execute(f"UPDATE river_job SET {assignment} WHERE id = {mark}", (job_id,))


def _poison(url: str) -> list[tuple[str, str, str]]:
    return PG_POISON if url.startswith("postgres") else SQLITE_POISON


def test_poison_rows_fail_alone_and_good_jobs_flow(
    h: Harness, client_db_url: str
) -> None:
    seen: list[str] = []
    workers = h.workers(lambda args: seen.append(args.name), Task)
    client = fast_client(h, client_db_url, workers)
    poison = _poison(client_db_url)
    bad: dict[int, tuple[str, str]] = {}
    for label, assignment, column in poison:
        job_id = client.insert(Task(label), InsertOpts(max_attempts=1)).job.id
        _corrupt(client_db_url, job_id, assignment)
        bad[job_id] = (label, column)
    # One poison row with attempts left: it must come back as retryable, not discarded.
    retried = client.insert(Task("retried"), InsertOpts(max_attempts=5)).job.id
    _corrupt(client_db_url, retried, poison[0][1])
    good = [client.insert(Task(f"good-{i}")).job.id for i in range(GOOD)]
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED])
    with client:
        wait_for_all(sub, [*good, *bad, retried])
    assert sorted(seen) == sorted(f"good-{i}" for i in range(GOOD))
    for job_id in good:
        assert row(client_db_url, job_id).state is JobState.COMPLETED
    for job_id, (label, column) in bad.items():
        stored = row(client_db_url, job_id)
        assert stored.state is JobState.DISCARDED, label
        assert stored.attempt == 1, label
        assert stored.errors, (label, stored)
        error = stored.errors[-1].error
        # Args the row reader hands on as stored fail later, in the worker's args decoding.
        assert column in error and ("decode" in error or "not valid JSON" in error), label
    stored = row(client_db_url, retried)
    # A short first retry goes straight back to available, and may have been failed again since.
    assert stored.state in (JobState.RETRYABLE, JobState.AVAILABLE)
    assert 1 <= stored.attempt == len(stored.errors) < 5
    assert all("metadata" in e.error for e in stored.errors)


ODD_ERRORS = ('{"at": "2024-01-02 03:04:05+00", "attempt": "1", "error": {"message": "boom"},'
              ' "trace": ["frame"]}', '{"error": "sparse", "extra": true}', "42")


def test_attempt_errors_in_other_shapes_are_read_leniently_and_the_job_runs(
    h: Harness, client_db_url: str
) -> None:
    # As newer River reads them (its harness leaf Chaos/DecodeIsolation): not poison.
    seen: list[str] = []
    client = fast_client(h, client_db_url, h.workers(lambda args: seen.append(args.name), Task))
    job_id = client.insert(Task("odd errors")).job.id
    if client_db_url.startswith("postgres"):
        elements = ", ".join(f"'{e}'::jsonb" for e in ODD_ERRORS)
        _corrupt(client_db_url, job_id, f"errors = ARRAY[{elements}]")
        read = "SELECT errors::text FROM river_job WHERE id = %s"
    else:
        _corrupt(client_db_url, job_id, "errors = jsonb('[" + ", ".join(ODD_ERRORS) + "]')")
        read = "SELECT json(errors) FROM river_job WHERE id = ?"
    with Database.from_url(client_db_url) as db, db.executor(readonly=True) as ex:
        before = ex.conn.execute(read, (job_id,)).fetchone()
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED])
    with client:
        event = next_of(sub, EventKind.JOB_COMPLETED)
    assert event.job.id == job_id and seen == ["odd errors"]
    stored = row(client_db_url, job_id)
    zero = datetime(1, 1, 1, tzinfo=UTC)
    assert (stored.state, stored.attempt) == (JobState.COMPLETED, 1)
    assert stored.errors == (AttemptError(zero, 1, '{"message":"boom"}', '["frame"]'),
                             AttemptError(zero, 0, "sparse"), AttemptError(zero, 0, "42"))
    with Database.from_url(client_db_url) as db, db.executor(readonly=True) as ex:
        assert ex.conn.execute(read, (job_id,)).fetchone() == before


def test_the_error_handler_sees_a_job_failed_without_running(h: Harness, client_db_url: str) -> None:
    # As River Go's does (harness leaf Chaos/DecodeIsolation): an undecodable row, an unknown
    # kind and args that do not decode are each handed to it as a JobNotRunError, and its
    # cancel applies.
    seen: list[tuple[int, str, str]] = []

    def handler(job: Any, exc: BaseException) -> bool:
        seen.append((job.id, type(exc).__name__, str(exc)))
        return True

    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task),
                         error_handler=h.callback(handler))
    poison = client.insert(Task("poison"), InsertOpts(max_attempts=5)).job.id
    _corrupt(client_db_url, poison, _poison(client_db_url)[1][1])
    unknown = client.insert(Task("unknown"), InsertOpts(max_attempts=5)).job.id
    _corrupt(client_db_url, unknown, "kind = 'no_such_kind'")
    bad_args = client.insert(Task("bad args"), InsertOpts(max_attempts=5)).job.id
    pg = client_db_url.startswith("postgres")
    wrong_shape = """args = '{"name": 5}'::jsonb""" if pg else """args = jsonb('{"name": 5}')"""
    _corrupt(client_db_url, bad_args, wrong_shape)
    sub = client.subscribe([EventKind.JOB_CANCELLED])
    with client:
        wait_for_all(sub, [poison, unknown, bad_args], (EventKind.JOB_CANCELLED,))
    for job_id in (poison, unknown, bad_args):
        stored = row(client_db_url, job_id)
        assert (stored.state, stored.attempt, len(stored.errors)) == (JobState.CANCELLED, 1, 1)
    by_id = {job_id: (name, text) for job_id, name, text in seen}
    assert by_id[poison][0] == "JobNotRunError"
    assert by_id[poison][1].startswith("job row couldn't be decoded: metadata")
    assert by_id[unknown] == ("JobNotRunError",
                              "job kind is not registered in the client's Workers bundle: no_such_kind")
    assert by_id[bad_args][0] == "JobNotRunError"
    assert by_id[bad_args][1] == row(client_db_url, bad_args).errors[0].error


@pytest.mark.parametrize("client_db_url", ["postgres"], indirect=True)
def test_pg_attempt_at_the_smallint_limit_does_not_stop_the_claim(h: Harness, client_db_url: str) -> None:
    workers = h.workers(lambda args: None, Task)
    client = fast_client(h, client_db_url, workers)
    edge = client.insert(Task("edge")).job.id
    _corrupt(client_db_url, edge, "attempt = 32767")
    good = [client.insert(Task(f"good-{i}")).job.id for i in range(5)]
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED])
    with client:
        wait_for_all(sub, [*good, edge])
    assert all(row(client_db_url, i).state is JobState.COMPLETED for i in good)
    assert row(client_db_url, edge).state is JobState.COMPLETED


@pytest.mark.parametrize("client_db_url", ["sqlite"], indirect=True)
def test_sqlite_unknown_state_and_odd_times_leave_the_queue_flowing(h: Harness, client_db_url: str) -> None:
    workers = h.workers(lambda args: None, Task)
    client = fast_client(h, client_db_url, workers)
    odd = client.insert(Task("odd")).job.id
    stranger = client.insert(Task("stranger")).job.id
    with Database.from_url(client_db_url) as db, db.executor() as ex:
        # Readable times in forms our writers never produce: the job runs as usual.
        ex.conn.execute("UPDATE river_job SET created_at = 1700000000,"
                        " scheduled_at = '2024-01-02T03:04:05.123456789Z' WHERE id = ?", (odd,))
        ex.conn.execute("PRAGMA ignore_check_constraints = ON")
        ex.conn.execute("UPDATE river_job SET state = 'paused_by_hand' WHERE id = ?", (stranger,))
    good = [client.insert(Task(f"good-{i}")).job.id for i in range(5)]
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED])
    with client:
        wait_for_all(sub, [*good, odd], (EventKind.JOB_COMPLETED,))
    assert all(row(client_db_url, i).state is JobState.COMPLETED for i in good)
    with Database.from_url(client_db_url) as db, db.executor(readonly=True) as ex:
        state = ex.conn.execute("SELECT state FROM river_job WHERE id = ?", (stranger,)).fetchone()[0]
    assert state == "paused_by_hand"



class _Waiter(logging.Handler):
    """Sets ``seen`` once a record at ``level`` or above mentions every one of ``words``."""

    def __init__(self, level: int, *words: str) -> None:
        super().__init__(level)
        self.words = words
        self.seen = threading.Event()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if all(w in record.getMessage() for w in self.words):
            self.seen.set()


def _claims_fail(url: str, on: bool) -> None:
    """A trigger that makes every update of river_job fail, as a broken database would."""
    with Database.from_url(url) as db, db.executor() as ex:
        if db.dialect.name == "postgres":
            if on:
                ex.conn.execute("CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql"
                                " AS $$ BEGIN RAISE EXCEPTION 'boom from a trigger'; END $$")
                ex.conn.execute("CREATE TRIGGER boom BEFORE UPDATE ON river_job"
                                " FOR EACH ROW EXECUTE FUNCTION boom()")
            else:
                ex.conn.execute("DROP TRIGGER IF EXISTS boom ON river_job")
                ex.conn.execute("DROP FUNCTION IF EXISTS boom()")
        elif on:
            ex.conn.execute("CREATE TRIGGER boom BEFORE UPDATE ON river_job"
                            " BEGIN SELECT RAISE(ABORT, 'boom from a trigger'); END")
        else:
            ex.conn.execute("DROP TRIGGER IF EXISTS boom")


def test_repeated_claim_failure_is_a_warning_with_its_cause(h: Harness, client_db_url: str) -> None:
    workers = h.workers(lambda args: None, Task)
    client = fast_client(h, client_db_url, workers)
    job_id = client.insert(Task("later")).job.id
    waiter = _Waiter(logging.WARNING, "boom from a trigger", "2 in a row")
    root = logging.getLogger()
    root.addHandler(waiter)
    _claims_fail(client_db_url, True)
    try:
        sub = client.subscribe([EventKind.JOB_COMPLETED])
        with client:
            assert waiter.seen.wait(WAIT)
            # The first failure alone may be a blip: it is never a warning.
            assert not [r for r in waiter.records if "1 in a row" in r.getMessage()]
            _claims_fail(client_db_url, False)
            wait_for_all(sub, [job_id])
    finally:
        root.removeHandler(waiter)
        _claims_fail(client_db_url, False)


@pytest.mark.parametrize("client_db_url", ["sqlite"], indirect=True)
def test_sqlite_malformed_attempted_by_does_not_stop_the_claim(h: Harness, client_db_url: str) -> None:
    seen: list[str] = []
    workers = h.workers(lambda args: seen.append(args.name), Task)
    client = fast_client(h, client_db_url, workers)
    odd = client.insert(Task("odd")).job.id
    _corrupt(client_db_url, odd, "attempted_by = '[\"a\",'")
    good = [client.insert(Task(f"good-{i}")).job.id for i in range(5)]
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED])
    with client:
        wait_for_all(sub, [odd, *good])
    assert sorted(seen) == sorted(["odd", *(f"good-{i}" for i in range(5))])
    stored = row(client_db_url, odd)
    # The unreadable list was read as empty: the claim's own client id is all it holds now.
    assert stored.state is JobState.COMPLETED and stored.attempted_by == (client.client_id,)
