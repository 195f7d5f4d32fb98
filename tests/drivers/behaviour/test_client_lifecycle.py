"""The mirrored lifecycle on both drivers: the same states, wait(timeout) and Subscription.get(timeout)."""

from __future__ import annotations

from typing import Any

import pytest

from river_protocol.lifecycle import ClientState
from river_sync import EventKind, SubscriptionTimeoutError
from tests.drivers.behaviour.support import fast_client, wait_for
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task


def _noop(h: Harness) -> Any:
    return h.workers(lambda args: None, Task)


def test_states_new_started_stopped(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, _noop(h))
    assert client.state is ClientState.NEW
    assert client.dialect_name == ("postgres" if client_db_url.startswith("postgres") else "sqlite")
    client.start()
    assert client.state is ClientState.STARTED
    client.stop()
    assert client.state is ClientState.STOPPED


def test_a_stopped_client_cannot_start_again(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, _noop(h))
    client.stop()  # never started: straight to stopped
    assert client.state is ClientState.STOPPED
    with pytest.raises(Exception, match="cannot start: it is stopped"):
        client.start()


def test_wait_with_a_timeout_says_whether_the_client_stopped(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, _noop(h))
    client.start()
    assert client.wait(0.05) is False
    assert client.wait(0) is False
    client.stop()
    assert client.wait(0) is True  # already stopped: no wait, even with a zero timeout
    assert client.wait(None) is True


def test_subscription_get_times_out_with_the_same_error(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, _noop(h))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        with pytest.raises(SubscriptionTimeoutError):
            sub.get(timeout=0.05)
        with pytest.raises(SubscriptionTimeoutError):
            sub.get_nowait()
        assert not sub.closed  # a timeout leaves it open
        inserted = client.insert(Task("t"))
        assert wait_for(sub, inserted.job.id).kind is EventKind.JOB_COMPLETED
    with pytest.raises(EOFError):  # closed with the client, and drained
        sub.get(timeout=0.05)
    with pytest.raises(EOFError):
        sub.get_nowait()


def test_subscription_get_zero_timeout_returns_a_queued_event(h: Harness, client_db_url: str) -> None:
    client = fast_client(h, client_db_url, _noop(h))
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        inserted = client.insert(Task("t"))
        watcher = client.subscribe([EventKind.JOB_COMPLETED])
        wait_for(watcher, inserted.job.id)
        # Delivered to both subscriptions at once: `sub` holds it now, so a zero wait gets it.
        assert sub.get(timeout=0).job.id == inserted.job.id
