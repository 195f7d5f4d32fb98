"""`river queues ...` through ``river_tools.cli.main.main`` on Postgres and SQLite.

Pause/resume must change river_queue and send River's control payload in the same transaction:
on Postgres a LISTEN connection receives it, on SQLite it lands in the notification outbox.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from river_db.connect import open_connection
from river_db.executor import Executor
from river_db.migrator import Migrator
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.intents import (
    FetchNotifications,
    FullJobRow,
    GetQueue,
    InsertFullJobs,
    QueueRow,
    UpsertQueue,
)
from river_protocol.states import JobState
from river_tools.cli.main import main

ALL_TABLES = ("river_job", "river_queue", "river_leader", "river_notification")
T0 = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


class DB:
    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.conn, _ = open_connection(url)
        self.ex = Executor(self.conn, PostgresDialect() if name == "postgres" else SQLiteDialect())

    def run(self, intent: Any) -> Any:
        return self.ex.run(intent)

    def queue(self, name: str) -> QueueRow:
        row = self.run(GetQueue(name))
        assert row is not None
        return row  # type: ignore[no-any-return]

    def control_payloads(self, listener: Any) -> list[dict[str, Any]]:
        """Control notifications sent so far (drains the Postgres listener)."""
        if self.name == "postgres":
            # A marker sent now arrives after everything committed before it: read up to it
            # instead of waiting for a quiet period.
            self.conn.execute("SELECT pg_notify('public.river_control', 'marker')")
            payloads = []
            for note in listener.notifies(timeout=10):
                if note.payload == "marker":
                    return payloads
                payloads.append(json.loads(note.payload))
            raise AssertionError("the marker notification never arrived")
        return [json.loads(r.payload) for r in self.run(FetchNotifications(after_id=0))
                if r.topic == "river_control"]


@pytest.fixture(scope="module")
def migrated_pg_url(module_pg_url: str) -> str:
    with Migrator(module_pg_url) as m:
        m.migrate_up()
    return module_pg_url


@pytest.fixture(scope="module")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "river.sqlite3"
    with Migrator(str(path)) as m:
        m.migrate_up()
    return path


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> Iterator[DB]:
    if request.param == "postgres":
        handle = DB("postgres", request.getfixturevalue("migrated_pg_url"))
        handle.conn.execute("TRUNCATE " + ", ".join(ALL_TABLES) + " RESTART IDENTITY")
    else:
        path = tmp_path / "river.sqlite3"
        path.write_bytes(sqlite_template.read_bytes())
        handle = DB("sqlite", f"sqlite://{path}")
    yield handle
    handle.conn.close()


@pytest.fixture
def listener(db: DB) -> Iterator[Any]:
    if db.name != "postgres":
        yield None
        return
    import psycopg

    conn = psycopg.connect(db.url, autocommit=True)
    conn.execute('LISTEN "public.river_control"')
    yield conn
    conn.close()


def run(capsys: pytest.CaptureFixture[str], db: DB, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--database-url", db.url])
    out, err = capsys.readouterr()
    return code, out, err


def seed(db: DB) -> None:
    for name in ("default", "mail", "reports"):
        db.run(UpsertQueue(name=name, now=T0))
    db.run(InsertFullJobs(rows=(
        FullJobRow(kind="email", queue="mail"),
        FullJobRow(kind="email", queue="mail"),
        FullJobRow(kind="email", queue="mail", state=JobState.RUNNING, attempt=1,
                   attempted_at=T0, attempted_by=("w",)),
        FullJobRow(kind="email", queue="mail", state=JobState.COMPLETED, finalized_at=T0),
    )))


def test_list(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    code, out, _ = run(capsys, db, "queues", "list")
    assert code == 0 and out.startswith("no queues yet")
    assert json.loads(run(capsys, db, "queues", "list", "--json")[1]) == []

    seed(db)
    code, out, err = run(capsys, db, "queues", "list")
    assert code == 0 and err == ""
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "STATUS", "PAUSED", "SINCE", "AVAILABLE", "RUNNING", "UPDATED"]
    assert [r.split()[:5] for r in rows] == [
        ["default", "active", "-", "0", "0"],
        ["mail", "active", "-", "2", "1"],
        ["reports", "active", "-", "0", "0"],
    ]
    data = json.loads(run(capsys, db, "queues", "list", "--json")[1])
    assert [q["name"] for q in data] == ["default", "mail", "reports"]
    assert data[1] | {"updated_at": None} == {
        "name": "mail", "paused": False, "paused_at": None, "created_at": "2030-01-02T03:04:05Z",
        "updated_at": None, "metadata": {}, "available": 2, "running": 1,
    }


def test_pause_and_resume_one_queue_notify_in_the_same_transaction(
    capsys: pytest.CaptureFixture[str], db: DB, listener: Any
) -> None:
    seed(db)
    code, out, err = run(capsys, db, "queues", "pause", "mail")
    assert (code, out, err) == (0, "paused queue mail\n", "")
    assert db.queue("mail").paused_at is not None
    assert db.queue("default").paused_at is None
    assert db.control_payloads(listener) == [{"action": "pause", "queue": "mail"}]

    code, out, _ = run(capsys, db, "queues", "list")
    assert next(line for line in out.splitlines() if line.startswith("mail")).split()[1] == "paused"

    data = json.loads(run(capsys, db, "queues", "resume", "mail", "--json")[1])
    assert data == {"action": "resume", "queue": "mail", "queues_affected": 1}
    assert db.queue("mail").paused_at is None
    expected_after_resume = [{"action": "resume", "queue": "mail"}]
    if db.name == "sqlite":  # the outbox keeps earlier rows
        expected_after_resume.insert(0, {"action": "pause", "queue": "mail"})
    assert db.control_payloads(listener) == expected_after_resume


def test_pause_and_resume_all_queues(capsys: pytest.CaptureFixture[str], db: DB, listener: Any) -> None:
    seed(db)
    code, out, _ = run(capsys, db, "queues", "pause", "*")
    assert (code, out) == (0, "paused all queues (3 queues)\n")
    assert all(db.queue(n).paused_at is not None for n in ("default", "mail", "reports"))
    assert db.control_payloads(listener) == [{"action": "pause", "queue": "*"}]
    code, out, _ = run(capsys, db, "queues", "resume", "*")
    assert (code, out) == (0, "resumed all queues (3 queues)\n")
    assert all(db.queue(n).paused_at is None for n in ("default", "mail", "reports"))


def test_unknown_queue_fails_and_sends_nothing(
    capsys: pytest.CaptureFixture[str], db: DB, listener: Any
) -> None:
    seed(db)
    for action in ("pause", "resume"):
        code, out, err = run(capsys, db, "queues", action, "nope")
        assert code == 1 and out == ""
        assert "queue 'nope' not found" in err and "river queues list" in err
    # The failed statement rolled back its transaction, notification included.
    assert db.control_payloads(listener) == []
    assert run(capsys, db, "queues", "pause")[0] == 2  # NAME is required


def test_pause_keeps_the_first_pause_time(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    seed(db)
    assert run(capsys, db, "queues", "pause", "mail")[0] == 0
    first = db.queue("mail").paused_at
    assert first is not None and db.queue("mail").updated_at == first
    assert run(capsys, db, "queues", "pause", "mail")[0] == 0
    assert db.queue("mail").paused_at == first
