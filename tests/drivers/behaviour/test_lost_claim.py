"""A claim the database committed but whose answer never reached the client: its rows come back at once."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import river_sync.database
import river_trio.database
from river_protocol.intents import ClaimJobs
from river_sync import EventKind, JobState
from tests.drivers.behaviour.support import fast_client, row, wait_for_all
from tests.drivers.harness import WAIT, Harness
from tests.drivers.test_client_support import Task

JOBS = 20


class _Waiter(logging.Handler):
    def __init__(self, *words: str) -> None:
        super().__init__(logging.WARNING)
        self.words = words
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if all(w in record.getMessage() for w in self.words):
            self.seen.set()


@pytest.fixture(name="restored_warning")
def restored_warning_fixture() -> Iterator[_Waiter]:
    waiter = _Waiter("put", "back to available")
    logging.getLogger().addHandler(waiter)
    try:
        yield waiter
    finally:
        logging.getLogger().removeHandler(waiter)


def _run_and_check(h: Harness, url: str, client_url: str, waiter: _Waiter, cut: threading.Event) -> None:
    workers = h.workers(lambda args: None, Task)
    client = fast_client(h, client_url, workers)
    ids = [client.insert(Task(f"j{i}")).job.id for i in range(JOBS)]
    sub = client.subscribe([EventKind.JOB_COMPLETED])
    with client:
        # Without the reconcile these rows would stay running until the rescuer (1 h).
        wait_for_all(sub, ids)
        assert cut.is_set(), "the claim's answer was never lost: the test tested nothing"
        assert waiter.seen.wait(WAIT)
    for job_id in ids:
        stored = row(url, job_id)
        # The lost claim's attempt was given back: one attempt, one attempted_by entry.
        assert stored.state is JobState.COMPLETED
        assert stored.attempt == 1 and stored.attempted_by == (client.client_id,)


# ---------------------------------------------------------------- injected, both databases


@pytest.fixture(name="lose_first_claim")
def lose_first_claim_fixture(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Both drivers' databases: the first claim that returns rows commits, then raises as a dropped
    connection would, so the client never sees its rows."""
    lost = threading.Event()
    sync_run = river_sync.database.Database.run
    trio_run = river_trio.database.AsyncDatabase.run

    def check(intent: Any, result: Any) -> Any:
        if isinstance(intent, ClaimJobs) and result and not lost.is_set():
            lost.set()
            raise ConnectionError("connection lost after COMMIT (injected)")
        return result

    def run(self: Any, intent: Any, **kw: Any) -> Any:
        return check(intent, sync_run(self, intent, **kw))

    async def arun(self: Any, intent: Any, **kw: Any) -> Any:
        return check(intent, await trio_run(self, intent, **kw))

    monkeypatch.setattr(river_sync.database.Database, "run", run)
    monkeypatch.setattr(river_trio.database.AsyncDatabase, "run", arun)
    return lost


def test_claim_lost_after_commit_is_reconciled(
    h: Harness, client_db_url: str, lose_first_claim: threading.Event, restored_warning: _Waiter
) -> None:
    _run_and_check(h, client_db_url, client_db_url, restored_warning, lose_first_claim)


# ---------------------------------------------------------------- a real cut connection, Postgres


# On Postgres the claim is one statement, its own transaction: the server commits it before
# it reports itself ready again, ReadyForQuery("I", idle): type byte, int32 length 5, status.
# (Were the claim wrapped in BEGIN/COMMIT, the first idle ReadyForQuery would follow COMMIT.)
_CLAIM_MARK = b"attempted_by = array_append("
_COMMIT_DONE = b"Z\x00\x00\x00\x05I"


class _CuttingProxy:
    """A loopback TCP proxy to the test Postgres that, once, drops the connection carrying a
    claim right after the server committed it, before the client reads that reply."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.cut = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closing = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            with self._lock:
                self._sockets += [client, server]
            armed = threading.Event()
            threading.Thread(target=self._pump_up, args=(client, server, armed), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(server, client, armed), daemon=True).start()

    def _pump_up(self, src: socket.socket, dst: socket.socket, armed: threading.Event) -> None:
        tail = b""
        try:
            while data := src.recv(65536):
                if not self.cut.is_set() and _CLAIM_MARK in tail + data:
                    armed.set()  # before forwarding: the server cannot answer earlier
                tail = data[-len(_CLAIM_MARK):]
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)

    def _pump_down(self, src: socket.socket, dst: socket.socket, armed: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if armed.is_set() and not self.cut.is_set() and _COMMIT_DONE in data:
                    self.cut.set()
                    return  # the commit happened; its answer never arrives
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src, dst)

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        with self._lock:
            _close(*self._sockets)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()


@pytest.mark.parametrize("client_db_url", ["postgres"], indirect=True)
def test_pg_connection_cut_between_commit_and_reply_is_reconciled(
    h: Harness, client_db_url: str, restored_warning: _Waiter
) -> None:
    parts = urlsplit(client_db_url)
    proxy = _CuttingProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    netloc = f"{parts.username}@127.0.0.1:{proxy.port}" if parts.username else f"127.0.0.1:{proxy.port}"
    query = "sslmode=disable&gssencmode=disable" + (f"&{parts.query}" if parts.query else "")
    proxied = urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    try:
        _run_and_check(h, client_db_url, proxied, restored_warning, proxy.cut)
    finally:
        proxy.close()
