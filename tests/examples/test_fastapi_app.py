"""The FastAPI example (examples/fastapi_app) on the suite's Postgres.

The app is served in this process through httpx's ``ASGITransport``, its lifespan
run around each test as a server runs it (the River client starts and stops with
it); the worker's client (``storefront_worker.make_client``) runs in the test's
event loop. The README's commands (``python -m storefront.create_tables``,
``uvicorn --factory ...``, ``python storefront_worker.py``) run as subprocesses,
as their users run them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest

import river_asyncio
from river_db.migrator import Migrator

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "fastapi_app"
WAIT = 30.0  # seconds; a bound, never a sleep
ORDER = {"item": "book", "quantity": 2, "email": "ada@example.com", "card": "tok_visa"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def app_env(url: str) -> dict[str, str]:
    """The environment the README's commands run in: DATABASE_URL, and this checkout importable."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "DATABASE_URL": url, "PYTHONPATH": path}


@pytest.fixture(scope="module", name="shop_url")
def shop_url_fixture(module_pg_url: str) -> Iterator[str]:
    """The module's database with River's tables and the shop's, made as the README makes them;
    the example's modules importable here meanwhile."""
    with Migrator(module_pg_url) as migrator:
        migrator.migrate_up()
    made = subprocess.run([sys.executable, "-m", "storefront.create_tables"], cwd=APP,
                          env=app_env(module_pg_url), capture_output=True, text=True, timeout=WAIT)
    assert made.returncode == 0 and "created the shop's tables" in made.stdout, made.stderr
    sys.path.insert(0, str(APP))
    try:
        yield module_pg_url
    finally:
        sys.path.remove(str(APP))
        for name in [m for m in sys.modules if m == "storefront_worker" or m.split(".")[0] == "storefront"]:
            del sys.modules[name]


@pytest.fixture(name="url")
def empty_fixture(shop_url: str) -> str:
    with psycopg.connect(shop_url, autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, river_leader, river_queue, orders RESTART IDENTITY")
    return shop_url


@asynccontextmanager
async def served(url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the app, inside the app's lifespan (ASGITransport does not run it)."""
    from storefront.app import create_app

    app = create_app(url)
    async with app.router.lifespan_context(app) as state:
        transport = _StateTransport(app, state)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as http:
            yield http


class _StateTransport(httpx.ASGITransport):
    """Hands each request the lifespan's state, as an ASGI server does (``scope["state"]``)."""

    def __init__(self, app: Any, state: dict[str, Any]) -> None:
        async def with_state(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await app({**scope, "state": dict(state)}, receive, send)

        super().__init__(app=with_state)


def table(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return [tuple(row) for row in conn.execute(sql)]


def orders(url: str) -> list[tuple[Any, ...]]:
    return table(url, "SELECT id, item, quantity, email, receipt_sent_at IS NOT NULL FROM orders ORDER BY id")


def jobs(url: str) -> list[tuple[Any, ...]]:
    return table(url, "SELECT id, kind, args, state::text FROM river_job ORDER BY id")


# ---------------------------------------------------------------- the web service


async def test_a_post_saves_the_order_and_exactly_one_job_in_one_transaction(url: str) -> None:
    async with served(url) as http:
        response = await http.post("/orders", json=ORDER)
        assert response.status_code == 201, response.text
        placed = response.json()
        assert placed == {"id": 1, "item": "book", "quantity": 2, "email": "ada@example.com",
                          "receipt_sent_at": None, "receipt_job_id": 1}
        read = await http.get("/orders/1")
        assert read.status_code == 200 and read.json()["receipt_sent_at"] is None
    assert orders(url) == [(1, "book", 2, "ada@example.com", False)]
    assert jobs(url) == [(1, "send_receipt", {"order_id": 1}, "available")]


async def test_a_declined_payment_after_the_insert_leaves_neither_the_order_nor_its_job(url: str) -> None:
    async with served(url) as http:
        declined = await http.post("/orders", json={**ORDER, "card": "tok_declined"})
        assert declined.status_code == 402
        assert declined.json() == {"detail": "card declined for order 1 (3000 cents)"}  # it had an id
        assert (await http.get("/orders/1")).status_code == 404
        assert orders(url) == [] and jobs(url) == []

        kept = await http.post("/orders", json={**ORDER, "item": "pen"})  # the next request is unaffected
        assert kept.status_code == 201
    assert [row[:2] for row in orders(url)] == [(2, "pen")]
    assert jobs(url) == [(kept.json()["receipt_job_id"], "send_receipt", {"order_id": 2}, "available")]


async def test_an_invalid_order_is_refused_before_anything_is_written(url: str) -> None:
    async with served(url) as http:
        for bad in ({**ORDER, "quantity": 0}, {**ORDER, "item": "spaceship"}, {**ORDER, "email": "nobody"}):
            response = await http.post("/orders", json=bad)
            assert response.status_code == 422, response.text
    assert orders(url) == [] and jobs(url) == []


# ---------------------------------------------------------------- the worker


async def test_the_worker_sends_the_receipt_of_a_committed_order(url: str) -> None:
    from storefront.db import Database
    from storefront_worker import make_client

    async with served(url) as http:
        placed = (await http.post("/orders", json=ORDER)).json()
        assert (await http.post("/orders", json={**ORDER, "card": "tok_declined"})).status_code == 402

        database = Database.open(url)
        try:
            worker = make_client(url, database=database)
            async with worker:
                sub = worker.subscribe([river_asyncio.EventKind.JOB_COMPLETED])
                event = await sub.get(timeout=WAIT)
            assert event.job.id == placed["receipt_job_id"] and event.job.args == {"order_id": placed["id"]}
        finally:
            await database.close()
        receipt = (await http.get(f"/orders/{placed['id']}")).json()["receipt_sent_at"]
    assert receipt is not None
    assert jobs(url) == [(1, "send_receipt", {"order_id": 1}, "completed")]  # the declined order had none


async def test_the_worker_as_river_work_builds_it_leaves_no_connection_behind(url: str) -> None:
    from storefront_worker import make_client

    async with served(url) as http:
        placed = (await http.post("/orders", json=ORDER)).json()
    worker = make_client(url)  # its jobs' engine has no pool: nothing is left for a shutdown to close
    async with worker:
        sub = worker.subscribe([river_asyncio.EventKind.JOB_COMPLETED])
        assert (await sub.get(timeout=WAIT)).job.id == placed["receipt_job_id"]
    assert orders(url)[0][-1] is True  # the receipt was sent
    deadline = time.monotonic() + WAIT
    while (left := _other_backends(url)) and time.monotonic() < deadline:
        time.sleep(0.05)  # a backend ends just after its client hangs up
    assert left == 0


def _other_backends(url: str) -> int:
    """Server connections to this database other than the one asking."""
    rows = table(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                 "AND pid <> pg_backend_pid()")
    return int(rows[0][0])


# ---------------------------------------------------------------- the README's commands


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_uvicorn_serves_the_app_as_the_readme_starts_it(url: str) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "storefront.app:create_app", "--port", str(port)],
        cwd=APP, env=app_env(url), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                response = httpx.post(f"http://127.0.0.1:{port}/orders", json=ORDER, timeout=WAIT)
                break
            except httpx.ConnectError:
                assert server.poll() is None and time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.1)
        assert response.status_code == 201, response.text
    finally:
        server.send_signal(signal.SIGINT)  # as Ctrl-C: the lifespan stops the River client
        output, _ = server.communicate(timeout=WAIT)
    assert server.returncode == 0, output
    assert "Application shutdown complete" in output
    assert jobs(url) == [(1, "send_receipt", {"order_id": 1}, "available")]


async def test_the_worker_script_works_the_job_and_stops_on_sigint(url: str) -> None:
    async with served(url) as http:
        assert (await http.post("/orders", json={**ORDER, "item": "mug", "quantity": 1})).status_code == 201
    worker = subprocess.Popen([sys.executable, "storefront_worker.py"], cwd=APP, env=app_env(url),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + WAIT
        while jobs(url)[0][-1] != "completed":
            assert worker.poll() is None and time.monotonic() < deadline, "the job was not worked"
            await anyio.sleep(0.1)
    finally:
        worker.send_signal(signal.SIGINT)  # a soft stop, as Ctrl-C
        output, _ = worker.communicate(timeout=WAIT)
    assert worker.returncode == 0, output
    assert "receipt for order 1 (1 x mug) sent to ada@example.com" in output
    assert "worker stopped (soft stop)" in output
    assert orders(url) == [(1, "mug", 1, "ada@example.com", True)]
