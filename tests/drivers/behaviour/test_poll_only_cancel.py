"""A poll-only client notices another client's cancellation of its running job by polling (§12.6)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

import river_sync
from river_sync import CancelCause, EventKind, JobState
from tests.drivers.behaviour.support import WAIT, fast_client, row, wait_for
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task

# The settings poll here (2 s in production): only polling can bring the cancel, sooner.
_POLL = timedelta(milliseconds=200)


def test_a_poll_only_worker_learns_of_a_remote_cancel_from_the_settings_poll(
    h: Harness, client_db_url: str
) -> None:
    entered = threading.Event()
    causes: list[object] = []
    workers = h.workers(h.cancellable_worker(entered, causes), Task, threaded=True)
    client = fast_client(h, client_db_url, workers, notifications=False)
    h.raw(client).testing_settings_poll_interval = _POLL
    other = river_sync.Client(client_db_url)  # another process's client, as far as this one knows
    sub = client.subscribe([EventKind.JOB_CANCELLED])
    with client:
        job_id = client.insert(Task("cancel me")).job.id
        assert entered.wait(WAIT)
        assert other.jobs.cancel(job_id).state is JobState.RUNNING  # a request: the job runs on
        wait_for(sub, job_id)  # within a settings poll, not the 60 s job timeout
    other.close()
    assert causes == [CancelCause.REMOTE_CANCEL]
    assert row(client_db_url, job_id).state is JobState.CANCELLED


def test_the_testing_settings_poll_defaults_to_river_s_and_must_be_positive(
    h: Harness, client_db_url: str
) -> None:
    client = fast_client(h, client_db_url, h.workers(lambda args: None, Task))
    raw = h.raw(client)
    assert raw.testing_settings_poll_interval == timedelta(seconds=2)
    with pytest.raises(ValueError, match="must be positive"):
        raw.testing_settings_poll_interval = timedelta(0)
    raw.testing_settings_poll_interval = _POLL
    assert raw.testing_settings_poll_interval == _POLL
