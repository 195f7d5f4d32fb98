"""A completion statement that fails: retried until it is recorded, never dropped for a reason a
retry cures; a refused update is isolated from the rest of its batch.

The fault is a trigger on ``river_job`` that refuses a running job's update to any other state
(what the completer writes) with a chosen SQLSTATE while a flag in a table says so; a sequence
counts the refusals (``nextval`` survives the rollback the error causes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from river_sync import EventKind, InsertManyParams, JobState
from tests.drivers.behaviour.support import fast_client, row, wait_for, wait_for_all
from tests.drivers.harness import WAIT, Harness
from tests.drivers.leader_support import wait_until
from tests.drivers.tcp_proxy import TcpProxy
from tests.drivers.test_client_support import Task

pytestmark = pytest.mark.postgres

# The completer's back-off unit here (1 s in production): retries wait 0.1, 0.2, 0.4 s, so the
# same sequences of refused attempts run in a tenth of the time.
_UNIT = timedelta(milliseconds=100)

_FAULT = """
CREATE TABLE river_test_fault (enabled boolean NOT NULL, code text NOT NULL, job_id bigint);
INSERT INTO river_test_fault VALUES (false, '40001', NULL);
CREATE SEQUENCE river_test_fault_hits;
CREATE FUNCTION river_test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE f record;
BEGIN
    SELECT * INTO f FROM river_test_fault;
    IF f.enabled AND OLD.state = 'running' AND NEW.state <> 'running'
            AND (f.job_id IS NULL OR f.job_id = NEW.id) THEN
        PERFORM nextval('river_test_fault_hits');
        RAISE EXCEPTION 'injected completion fault' USING ERRCODE = f.code;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER river_test_fault BEFORE UPDATE ON river_job FOR EACH ROW EXECUTE FUNCTION river_test_fault();
"""
_UNDO = """
DROP TRIGGER IF EXISTS river_test_fault ON river_job;
DROP FUNCTION IF EXISTS river_test_fault();
DROP SEQUENCE IF EXISTS river_test_fault_hits;
DROP TABLE IF EXISTS river_test_fault;
"""


class Fault:
    def __init__(self, url: str) -> None:
        self.url = url

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute(sql, params).fetchone() if sql.lstrip().startswith("SELECT") else (
                conn.execute(sql, params))

    def on(self, code: str, job_id: int | None = None) -> None:
        self._run("UPDATE river_test_fault SET enabled = true, code = %s, job_id = %s", (code, job_id))

    def off(self) -> None:
        self._run("UPDATE river_test_fault SET enabled = false")

    @property
    def hits(self) -> int:
        value, called = self._run("SELECT last_value, is_called FROM river_test_fault_hits")
        return int(value) if called else 0


@pytest.fixture(name="fault")
def fault_fixture(_migrated_pg: str) -> Iterator[Fault]:
    with psycopg.connect(_migrated_pg, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_queue, river_leader RESTART IDENTITY")
        conn.execute(_UNDO)
        conn.execute(_FAULT)
    try:
        yield Fault(_migrated_pg)
    finally:
        with psycopg.connect(_migrated_pg, autocommit=True) as conn:
            conn.execute(_UNDO)


def _not_recorded(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "could not be recorded" in r.getMessage()]


def _assert_recorded_once(fault: Fault, job_id: int, runs: dict[str, int], name: str,
                          caplog: pytest.LogCaptureFixture) -> None:
    """Completed at its first attempt, worked once, and nothing reported as not recorded."""
    stored = row(fault.url, job_id)
    assert stored.state is JobState.COMPLETED and stored.attempt == 1
    assert runs == {name: 1}
    assert _not_recorded(caplog) == []


def _quick(h: Harness, client: Any) -> Any:
    h.raw(client).testing_completer_backoff_unit = _UNIT
    return client


def _counting_worker(h: Harness, runs: dict[str, int]) -> Any:
    def work(args: Task) -> None:
        runs[args.name] = runs.get(args.name, 0) + 1

    return h.workers(work, Task)


@pytest.mark.one_async_backend  # its wait is the completer's retry timers
@pytest.mark.parametrize("code", ["40001", "26000"])  # serialization failure; prepared statement lost
def test_a_transient_completion_failure_is_retried_until_recorded(
    h: Harness, fault: Fault, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    runs: dict[str, int] = {}
    client = _quick(h, fast_client(h, fault.url, _counting_worker(h, runs), leader_election=False))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    fault.on(code)
    with caplog.at_level(logging.INFO), client:
        job_id = client.insert(Task("once")).job.id
        # More refusals than the completer's attempts per round: it starts over, it never drops.
        wait_until(lambda: fault.hits >= 5, "five refused completions", timeout=WAIT * 2)
        assert row(fault.url, job_id).state is JobState.RUNNING
        fault.off()
        done = wait_for(sub, job_id)
    assert done.job.state is JobState.COMPLETED
    _assert_recorded_once(fault, job_id, runs, "once", caplog)


@pytest.mark.one_async_backend  # its wait is the completer's retry timers
def test_a_stopping_client_keeps_retrying_its_last_completions(
    h: Harness, fault: Fault, caplog: pytest.LogCaptureFixture
) -> None:
    runs: dict[str, int] = {}
    client = _quick(h, fast_client(h, fault.url, _counting_worker(h, runs), leader_election=False))
    fault.on("40001")
    with caplog.at_level(logging.INFO):
        client.start()
        job_id = client.insert(Task("at stop")).job.id
        wait_until(lambda: fault.hits >= 1, "a refused completion")
        stopper = threading.Thread(target=client.stop)
        stopper.start()
        # Past the attempts after which a stopping completer used to give up.
        wait_until(lambda: fault.hits >= 5, "five refused completions", timeout=WAIT * 2)
        assert stopper.is_alive()
        fault.off()
        stopper.join(WAIT)
        assert not stopper.is_alive()
    _assert_recorded_once(fault, job_id, runs, "at stop", caplog)


def test_a_refused_update_does_not_hold_back_its_batch(
    h: Harness, fault: Fault, caplog: pytest.LogCaptureFixture
) -> None:
    gate = threading.Event()
    client = _quick(h, fast_client(h, fault.url, h.workers(lambda args: gate.wait(WAIT), Task, threaded=True),
                                   leader_election=False))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with caplog.at_level(logging.INFO), client:
        results = client.insert_many([InsertManyParams(Task(f"b {i}")) for i in range(8)])
        ids = [r.job.id for r in results]
        poison = ids[3]
        wait_until(lambda: all(row(fault.url, i).state is JobState.RUNNING for i in ids), "all running")
        fault.on("22023", poison)  # invalid_parameter_value: sending it again cannot help
        gate.set()  # all eight finish at once: their completions share a batch
        wait_for_all(sub, [i for i in ids if i != poison])
        wait_until(lambda: _not_recorded(caplog), "the refused outcome reported", timeout=WAIT)
    assert fault.hits >= 3  # the batch, then the poison alone until its last attempt
    messages = _not_recorded(caplog)
    assert len(messages) == 1 and f"job {poison} " in messages[0]
    assert all(row(fault.url, i).state is JobState.COMPLETED for i in ids if i != poison)


@pytest.mark.one_async_backend  # its wait is the completer's retry timers
def test_completions_survive_an_outage_during_stop(h: Harness, fault: Fault,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """The connection is lost, not refused by a statement: the proxy drops every connection and
    refuses new ones while the client stops, for longer than three attempts take."""
    gate = threading.Event()
    proxy, url = TcpProxy.in_front_of(fault.url)
    try:
        client = _quick(h, fast_client(h, url, h.workers(lambda args: gate.wait(WAIT), Task, threaded=True),
                                       leader_election=False, notifications=False))
        with caplog.at_level(logging.INFO):
            client.start()
            job_id = client.insert(Task("through the outage")).job.id
            wait_until(lambda: row(fault.url, job_id).state is JobState.RUNNING, "running")
            proxy.cut()
            gate.set()
            stopper = threading.Thread(target=client.stop)
            stopper.start()
            stopper.join(1)  # three attempts (0.1 s and 0.2 s apart) are over by now
            assert stopper.is_alive()
            proxy.restore()
            stopper.join(WAIT)
            assert not stopper.is_alive()
    finally:
        proxy.close()
    stored = row(fault.url, job_id)
    assert stored.state is JobState.COMPLETED and stored.attempt == 1
    assert _not_recorded(caplog) == []


def test_the_testing_backoff_unit_defaults_to_a_second_and_must_be_positive(h: Harness, fault: Fault) -> None:
    client = fast_client(h, fault.url, _counting_worker(h, {}), leader_election=False)
    raw = h.raw(client)
    assert raw.testing_completer_backoff_unit == timedelta(seconds=1)
    with pytest.raises(ValueError, match="must be positive"):
        raw.testing_completer_backoff_unit = timedelta(0)
    raw.testing_completer_backoff_unit = _UNIT
    assert raw.testing_completer_backoff_unit == _UNIT
