"""Every run that does not complete logs one line (river_protocol.run_log), on each client and
database: its level, its words, its structured fields and, for the worker's own exception, its
traceback."""

from __future__ import annotations

import dataclasses
import logging
import threading
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from river_protocol.run_log import JobLogLevels
from river_sync import InsertOpts, JobCancel
from tests.drivers.behaviour.support import fast_client, wait_for
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task


def _logger(h: Harness) -> str:
    return "river_sync.jobs" if h.driver == "sync" else "river_anyio.jobs"


def _records(caplog: pytest.LogCaptureFixture, h: Harness, job_id: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == _logger(h) and getattr(r, "job_id", None) == job_id]


def _run_one(h: Harness, url: str, fn: Any, opts: InsertOpts | None = None, *, args: Any = None,
             worker_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> int:
    client = fast_client(h, url, h.workers(fn, Task, **(worker_kwargs or {})), **kwargs)
    sub = client.subscribe()
    with client:
        if args is None:
            job_id = client.insert(Task("t"), opts).job.id
        else:  # a job the working client refuses to insert: through an insert-only one
            with h.client(url) as inserter:
                job_id = inserter.insert(args, opts).job.id
        wait_for(sub, job_id)
    return job_id


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="river_sync.jobs")
    caplog.set_level(logging.DEBUG, logger="river_anyio.jobs")


def test_an_error_retried_is_a_warning_with_the_traceback(
        h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    def kaboom(args: Task) -> None:
        raise RuntimeError("kaboom")

    job_id = _run_one(h, client_db_url, kaboom, InsertOpts(max_attempts=3))
    (record,) = _records(caplog, h, job_id)
    assert record.levelno == logging.WARNING
    fields = {k: getattr(record, k) for k in ("job_id", "kind", "queue", "attempt", "max_attempts", "error")}
    assert fields == {"job_id": job_id, "kind": "task", "queue": "default", "attempt": 1, "max_attempts": 3,
                      "error": "RuntimeError: kaboom"}
    assert (record.outcome, record.failure) == ("retried", "error")  # type: ignore[attr-defined]
    assert record.getMessage().startswith(
        f"river: job {job_id} (kind 'task', queue 'default', attempt 1 of 3) failed; will be retried at ")
    assert record.exc_info is not None and record.exc_info[1] is not None
    text = logging.Formatter().format(record)
    assert "Traceback (most recent call last)" in text and "in kaboom" in text
    assert "RuntimeError: kaboom" in text


def test_an_error_discarded_is_an_error_with_the_traceback(
        h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    def kaboom(args: Task) -> None:
        raise RuntimeError("kaboom")

    job_id = _run_one(h, client_db_url, kaboom, InsertOpts(max_attempts=1))
    (record,) = _records(caplog, h, job_id)
    assert record.levelno == logging.ERROR and record.outcome == "discarded"  # type: ignore[attr-defined]
    assert "attempt 1 of 1) failed; discarded: RuntimeError: kaboom" in record.getMessage()
    assert "in kaboom" in logging.Formatter().format(record)


@dataclasses.dataclass
class Unknown:
    kind: ClassVar[str] = "nobody_works_this"
    n: int = 0


@dataclasses.dataclass
class TaskOfWrongShape:
    kind: ClassVar[str] = "task"
    name: int = 0  # Task.name is a str: these args do not decode into Task


def test_an_unknown_kind_says_so(h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    job_id = _run_one(h, client_db_url, lambda args: None, InsertOpts(max_attempts=1), args=Unknown(1))
    (record,) = _records(caplog, h, job_id)
    assert (record.levelno, record.failure, record.exc_info) == (  # type: ignore[attr-defined]
        logging.ERROR, "unknown_kind", None)
    assert record.kind == "nobody_works_this"  # type: ignore[attr-defined]
    assert "has a kind no worker is registered for; discarded" in record.getMessage()


def test_undecodable_args_say_so(h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    job_id = _run_one(h, client_db_url, lambda args: None, InsertOpts(max_attempts=2),
                      args=TaskOfWrongShape(5))
    (record,) = _records(caplog, h, job_id)
    assert (record.levelno, record.failure) == (logging.WARNING, "undecodable_args")  # type: ignore[attr-defined]
    assert "has args that do not decode; will be retried" in record.getMessage()
    assert "cannot decode" in record.error  # type: ignore[attr-defined]


def test_a_cancel_the_worker_asked_for_is_info(
        h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    def cancel(args: Task) -> None:
        raise JobCancel("not wanted")

    job_id = _run_one(h, client_db_url, cancel)
    (record,) = _records(caplog, h, job_id)
    assert (record.levelno, record.outcome, record.failure, record.exc_info) == (  # type: ignore[attr-defined]
        logging.INFO, "cancelled", "requested", None)
    assert "asked to be cancelled; cancelled: JobCancelError: not wanted" in record.getMessage()


def test_a_timeout_says_so_with_where_the_worker_was(
        h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    job_id = _run_one(h, client_db_url, h.cancellable_worker(threading.Event()),
                      worker_kwargs={"timeout": timedelta(milliseconds=50)})
    (record,) = _records(caplog, h, job_id)
    assert (record.levelno, record.failure) == (logging.WARNING, "timeout")  # type: ignore[attr-defined]
    assert "timed out; will be retried at" in record.getMessage()
    assert "context deadline exceeded" in record.getMessage()
    text = logging.Formatter().format(record)
    assert "Traceback (most recent call last)" in text and "in work" in text  # the worker's frame


def test_levels_are_configurable(h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    def kaboom(args: Task) -> None:
        raise RuntimeError("kaboom")

    job_id = _run_one(h, client_db_url, kaboom, InsertOpts(max_attempts=1),
                      job_log_levels=JobLogLevels(discarded=logging.CRITICAL))
    (record,) = _records(caplog, h, job_id)
    assert record.levelno == logging.CRITICAL


def test_a_completed_run_logs_nothing(
        h: Harness, client_db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    job_id = _run_one(h, client_db_url, lambda args: None)
    assert _records(caplog, h, job_id) == []
