"""The Django example (examples/django_app) on the suite's Postgres: one transaction for the model row
and its job, a worker started with ``river work``, and what Django on SQLite gets.

Django is set up in this process once, on a scratch database of this module (its settings can be
configured only once per process); the ``river work`` worker and the SQLite check run as
subprocesses, as their users run them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

import river_trio
from river_db.migrator import Migrator
from river_protocol.errors import ValidationError
from river_sync import Client, EventKind, JobState

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "django_app"
WAIT = 30.0  # seconds; a bound, never a sleep


@pytest.fixture(scope="module", name="shop")
def shop_fixture(module_pg_url: str) -> Iterator[dict[str, Any]]:
    """The example shop, set up on this module's scratch database with both sets of tables."""
    with Migrator(module_pg_url) as migrator:
        migrator.migrate_up()
    saved = {name: os.environ.get(name) for name in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    os.environ["DATABASE_URL"] = module_pg_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "shop_project.settings"
    sys.path.insert(0, str(APP))
    import django
    from django.core.management import call_command
    from django.db import connections

    django.setup()
    call_command("migrate", verbosity=0)
    from shop import jobs, models, views

    try:
        yield {"models": models, "jobs": jobs, "views": views, "url": module_pg_url}
    finally:
        connections.close_all()
        jobs.inserter().stop()
        sys.path.remove(str(APP))
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(name="db")
def empty_fixture(shop: dict[str, Any]) -> Iterator[dict[str, Any]]:
    with psycopg.connect(shop["url"], autocommit=True) as conn:
        conn.execute("TRUNCATE river_job, shop_order RESTART IDENTITY")
    yield shop


def river_jobs(url: str) -> list[tuple[int, dict[str, Any], str, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, args, state::text, attempt FROM river_job ORDER BY id").fetchall()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def post_order(**data: str) -> Any:
    from django.test import Client

    return Client(raise_request_exception=False).post("/orders/", {"item": "book", **data})


def test_a_rolled_back_request_leaves_neither_the_order_nor_its_job(db: dict[str, Any]) -> None:
    response = post_order(fail_after_enqueue="1")
    assert response.status_code == 500
    assert db["models"].Order.objects.count() == 0
    assert river_jobs(db["url"]) == []


def test_a_committed_request_leaves_both_and_the_job_is_worked_once(db: dict[str, Any]) -> None:
    response = post_order(item="lamp")
    assert response.status_code == 201
    order_id, job_id = response.json()["order"], response.json()["job"]
    assert river_jobs(db["url"]) == [(job_id, {"order_id": order_id}, "available", 0)]

    import shop_worker  # type: ignore[import-not-found]

    client = shop_worker.make_client(db["url"])
    sub = client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED])
    with client:
        event = sub.get(timeout=WAIT)
    assert (event.kind, event.job.id) == (EventKind.JOB_COMPLETED, job_id)
    assert db["models"].Order.objects.get(id=order_id).receipts_sent == 1
    assert river_jobs(db["url"]) == [(job_id, {"order_id": order_id}, "completed", 1)]


def test_a_nested_atomic_block_rolls_back_only_its_own_job(db: dict[str, Any]) -> None:
    from django.db import connection, transaction

    Order, SendReceipt, client = db["models"].Order, db["jobs"].SendReceipt, db["jobs"].inserter()
    with transaction.atomic():
        kept = Order.objects.create(item="kept")
        client.insert(SendReceipt(order_id=kept.id), tx=connection)
        with pytest.raises(RuntimeError), transaction.atomic():  # a savepoint
            gone = Order.objects.create(item="gone")
            client.insert(SendReceipt(order_id=gone.id), tx=connection)
            raise RuntimeError("undo the inner block")
    assert list(Order.objects.values_list("item", flat=True)) == ["kept"]
    assert [args for _, args, _, _ in river_jobs(db["url"])] == [{"order_id": kept.id}]


def test_a_django_connection_outside_atomic_or_after_an_error_is_refused(db: dict[str, Any]) -> None:
    from django.db import DatabaseError, connection, connections, transaction

    client, args = db["jobs"].inserter(), db["jobs"].SendReceipt(order_id=1)
    with pytest.raises(ValidationError, match=r"cannot use Django ConnectionHandler as a transaction"):
        client.insert(args, tx=connections)
    with pytest.raises(ValidationError, match=r"inside `with transaction\.atomic\(\):`"):
        client.insert(args, tx=connection)
    with transaction.atomic():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT no_such_column FROM shop_order")
        except DatabaseError:
            pass
        transaction.set_rollback(True)
        with pytest.raises(ValidationError, match="marked for rollback"):
            client.insert(args, tx=connection)
    assert river_jobs(db["url"]) == []


def test_the_trio_client_inserts_in_the_django_transaction_too(db: dict[str, Any]) -> None:
    from django.db import connection, transaction

    Order, SendReceipt = db["models"].Order, db["jobs"].SendReceipt

    async def insert(order_id: int) -> int:
        client = river_trio.Client(db["url"])
        try:
            return (await client.insert(SendReceipt(order_id=order_id), tx=connection)).job.id
        finally:
            await client.aclose()

    with pytest.raises(RuntimeError), transaction.atomic():
        trio.run(insert, Order.objects.create(item="gone").id)
        raise RuntimeError("roll back")
    with transaction.atomic():
        order = Order.objects.create(item="kept")
        job_id = trio.run(insert, order.id)
    assert river_jobs(db["url"]) == [(job_id, {"order_id": order.id}, "available", 0)]


def test_river_work_runs_the_example_worker_until_sigterm(db: dict[str, Any]) -> None:
    order_id = post_order(item="desk").json()["order"]
    env = {**os.environ, "DATABASE_URL": db["url"], "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "river_tools.cli", "work", "shop_worker:make_client",
         "--log-level", "warning"],
        cwd=APP, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + WAIT
        while river_jobs(db["url"])[0][2] != "completed":
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker did not complete the job"
            time.sleep(0.1)  # polling another process's work: nothing to wait on but the database
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert db["models"].Order.objects.get(id=order_id).receipts_sent == 1
    assert [(state, attempt) for _, _, state, attempt in river_jobs(db["url"])] == [("completed", 1)]


DJANGO_ON_SQLITE = textwrap.dedent(
    """
    import dataclasses, sqlite3, sys
    from typing import ClassVar
    import django
    from django.conf import settings

    settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}})
    django.setup()
    from django.db import connection, transaction

    import river_sync
    from river_protocol.errors import ValidationError

    @dataclasses.dataclass
    class Task:
        kind: ClassVar[str] = "task"

    client = river_sync.Client("sqlite:///" + sys.argv[1])
    try:
        with transaction.atomic():
            client.insert(Task(), tx=connection)
            print("inserted with Django's sqlite3", sqlite3.sqlite_version)
    except ValidationError as exc:
        print("refused:", exc)

    # What the docs offer instead: Django's rows and River's share the file, each through its own
    # SQLite; the job is inserted once Django's transaction has committed.
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT)")
    for body, fail in (("rolled back", True), ("committed", False)):
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("INSERT INTO note (body) VALUES (%s)", [body])
                transaction.on_commit(lambda: client.insert(Task()))
                if fail:
                    raise RuntimeError(body)
        except RuntimeError:
            pass
    with connection.cursor() as cursor:
        cursor.execute("SELECT body FROM note")
        print("notes:", [row[0] for row in cursor.fetchall()])
    print("jobs:", len(client.jobs.list().jobs))
    client.stop()
    """
)


def test_django_on_sqlite_refuses_an_old_sqlite3_and_inserts_on_commit(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "django.sqlite3"
    with Migrator(f"sqlite:///{path}") as migrator:
        migrator.migrate_up()
    proc = subprocess.run(
        [sys.executable, "-c", DJANGO_ON_SQLITE, str(path)],
        capture_output=True, text=True, timeout=WAIT, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    if sqlite3.sqlite_version_info < (3, 45):
        assert proc.stdout.startswith(f"refused: SQLite {sqlite3.sqlite_version} is too old")
        assert "set the database's ENGINE to 'river_db.django_sqlite'" in proc.stdout
        assert "or keep Django's and River's tables on PostgreSQL" in proc.stdout
        assert "or insert from transaction.on_commit()" in proc.stdout
        expected = [JobState.AVAILABLE]  # the on_commit insert only
    else:  # a newer interpreter: Django's own connection works, in its transaction
        assert proc.stdout.startswith("inserted with Django's sqlite3")
        expected = [JobState.AVAILABLE, JobState.AVAILABLE]
    assert "notes: ['committed']" in proc.stdout  # on_commit: the rolled-back request inserted nothing
    with Client(f"sqlite:///{path}") as client:
        assert [job.state for job in client.jobs.list().jobs] == expected


SHOP_ON_SQLITE = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, os.getcwd())
    os.environ["DJANGO_SETTINGS_MODULE"] = "shop_project.settings"
    import django
    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.db.models.functions import Now
    from django.test import Client

    import shop_worker
    from shop.models import Order
    from river_sync import EventKind

    call_command("migrate", verbosity=0)
    print("backend:", type(connection.connection).__module__, connection.Database.sqlite_version)
    web = Client(raise_request_exception=False)
    print("rolled back:", web.post("/orders/", {"item": "x", "fail_after_enqueue": "1"}).status_code)
    print("committed:", web.post("/orders/", {"item": "lamp"}).json())
    print("now is a", type(Order.objects.annotate(now=Now()).get().now).__name__)
    client = shop_worker.make_client()
    with client.subscribe([EventKind.JOB_COMPLETED, EventKind.JOB_FAILED]) as sub, client:
        event = sub.get(timeout=30)
    print("event:", event.kind.value, event.job.id)
    print("orders:", list(Order.objects.values_list("item", "receipts_sent")))
    from shop.jobs import inserter
    print("jobs:", [(j.id, j.args, j.state.value, j.attempt) for j in inserter().jobs.list().jobs])
    """
)


def test_the_example_shop_on_sqlite_through_the_sqlean_backend(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shop.sqlite3"
    with Migrator(url) as migrator:
        migrator.migrate_up()
    proc = subprocess.run(
        [sys.executable, "-c", SHOP_ON_SQLITE], cwd=APP, capture_output=True, text=True, timeout=WAIT,
        env={**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("backend: sqlean")
    assert tuple(int(n) for n in lines[0].split()[-1].split(".")) >= (3, 45)
    assert lines[1:] == [
        "rolled back: 500",
        "committed: {'order': 1, 'job': 1}",  # the rolled-back order and job used no ids
        "now is a datetime",
        "event: job_completed 1",
        "orders: [('lamp', 1)]",
        "jobs: [(1, {'order_id': 1}, 'completed', 1)]",
    ]
