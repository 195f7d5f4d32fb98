"""`river jobs ...` through the real entry point (``river_tools.cli.main.main``), on Postgres and SQLite.

Jobs are inserted with InsertFullJobs / InsertJobs on a separate connection, the command runs
in-process, and the database is read back to check that exactly the intended rows changed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from river_db.connect import open_connection
from river_db.executor import Executor
from river_db.migrator import Migrator
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.intents import (
    FullJobRow,
    InsertFullJobs,
    JobListFilter,
    ListJobs,
)
from river_protocol.job import JobRow, encode_attempt_error
from river_protocol.states import JobState
from river_tools.cli import jobs as cli_jobs
from river_tools.cli.main import main
from river_tools.cli.output import (
    ConfirmationRefused,
    Progress,
    confirm,
    describe_duration,
    parse_duration,
    print_table,
)

S = JobState
RIVER = Path(sys.executable).with_name("river")
NOW = datetime.now(UTC).replace(microsecond=0)
DAY = timedelta(days=1)
KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))
ALL_TABLES = ("river_job", "river_queue", "river_leader", "river_notification")


class DB:
    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.url = url
        self.conn, _ = open_connection(url)
        self.ex = Executor(self.conn, PostgresDialect() if name == "postgres" else SQLiteDialect())

    @property
    def pg(self) -> bool:
        return self.name == "postgres"

    def insert(self, *rows: FullJobRow) -> list[JobRow]:
        return self.ex.run(InsertFullJobs(rows=rows))  # type: ignore[no-any-return]

    def jobs(self, **filter_kw: Any) -> list[JobRow]:
        return self.ex.run(ListJobs(filter=JobListFilter(**filter_kw), limit=10_000))  # type: ignore[no-any-return]

    def ids(self, **filter_kw: Any) -> list[int]:
        return [j.id for j in self.jobs(**filter_kw)]


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
        url = request.getfixturevalue("migrated_pg_url")
        handle = DB("postgres", url)
        handle.conn.execute("TRUNCATE " + ", ".join(ALL_TABLES) + " RESTART IDENTITY")
    else:
        path = tmp_path / "river.sqlite3"
        path.write_bytes(sqlite_template.read_bytes())
        handle = DB("sqlite", f"sqlite://{path}")
    yield handle
    handle.conn.close()


def run(capsys: pytest.CaptureFixture[str], db: DB | None, *argv: str) -> tuple[int, str, str]:
    url_flags = ["--database-url", db.url] if db is not None else []
    code = main([*argv, *url_flags])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], db: DB, *argv: str) -> Any:
    code, out, err = run(capsys, db, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def job(kind: str = "email", state: JobState = S.AVAILABLE, **kw: Any) -> FullJobRow:
    kw.setdefault("encoded_args", b'{"to":"a@example.com"}')
    if state in (S.COMPLETED, S.CANCELLED, S.DISCARDED):
        kw.setdefault("finalized_at", NOW - timedelta(minutes=5))
    if state is S.RUNNING:
        kw.setdefault("attempt", 1)
        kw.setdefault("attempted_at", NOW - timedelta(minutes=1))
        kw.setdefault("attempted_by", ("worker-1",))
    return FullJobRow(kind=kind, state=state, **kw)


@pytest.fixture
def tty_stdin(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Replace stdin by a terminal that answers with the given text."""

    class FakeTTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    def answer(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", FakeTTY(text))

    return answer


@pytest.fixture(autouse=True)
def non_tty_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever runs the tests, commands must see a script's stdin unless a test says otherwise.
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))


# ---------------------------------------------------------------- stats


def test_stats_counts_by_state_queue_and_kind(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    db.insert(job("email"), job("email", S.COMPLETED), job("sms", S.RUNNING, queue="urgent"),
              job("sms", S.DISCARDED, queue="urgent"), job("report", S.SCHEDULED, scheduled_at=NOW + DAY))
    data = run_json(capsys, db, "jobs", "stats")
    assert data["total"] == 5
    assert data["by_state"] == {"available": 1, "running": 1, "scheduled": 1, "retryable": 0, "pending": 0,
                                "completed": 1, "cancelled": 0, "discarded": 1}
    assert data["by_queue"] == {
        "default": {"total": 3, "available": 1, "scheduled": 1, "completed": 1},
        "urgent": {"total": 2, "running": 1, "discarded": 1},
    }
    assert data["by_kind"]["sms"] == {"total": 2, "running": 1, "discarded": 1}

    code, out, err = run(capsys, db, "jobs", "stats")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "5 jobs"
    assert any(line.split() == ["available", "1"] for line in lines)
    assert any(line.split()[:2] == ["urgent", "2"] for line in lines)
    assert run_json(capsys, db, "jobs", "stats", "--queue", "urgent")["total"] == 2


def test_stats_on_empty_database(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    assert run(capsys, db, "jobs", "stats") == (0, "0 jobs\n", "")


def test_missing_tables_and_missing_sqlite_file_explain_what_to_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nope.sqlite3"
    code, _, err = run(capsys, None, "jobs", "stats", "--database-url", f"sqlite://{missing}")
    assert code == 1 and "no SQLite database" in err and "river migrate-up" in err
    assert not missing.exists()
    empty = tmp_path / "empty.sqlite3"
    open_connection(str(empty))[0].close()
    code, _, err = run(capsys, None, "jobs", "list", "--database-url", str(empty))
    assert code == 1 and "River's tables are missing" in err and "river migrate-up" in err


def test_postgres_schema_flag(capsys: pytest.CaptureFixture[str], scratch_pg_url: str) -> None:
    import psycopg

    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA custom")
    with Migrator(scratch_pg_url, schema="custom") as m:
        m.migrate_up()
        Executor(m.conn, PostgresDialect(schema="custom")).run(
            InsertFullJobs(rows=(job(), job(state=S.COMPLETED))))
    flags = ["--database-url", scratch_pg_url]
    assert main(["jobs", "stats", "--json", "--schema", "custom", *flags]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 2
    assert main(["jobs", "tidy", "--yes", "--schema", "custom", *flags]) == 0
    assert capsys.readouterr().out == "deleted 1 job (1 completed)\n"
    assert main(["jobs", "stats", *flags]) == 1  # public has no River tables
    assert "River's tables are missing" in capsys.readouterr().err


# ---------------------------------------------------------------- list


def test_list_filters(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    a, b, c, d, e = db.insert(
        job("email", tags=("vip",), created_at=NOW - 3 * DAY),
        job("email", S.COMPLETED, created_at=NOW - 2 * DAY),
        job("sms", S.RUNNING, queue="urgent", tags=("vip", "eu"), created_at=NOW - timedelta(hours=1)),
        job("sms", S.RETRYABLE, queue="urgent", created_at=NOW - timedelta(minutes=1)),
        job("report", S.CANCELLED, created_at=NOW - 10 * DAY),
    )

    def ids(*flags: str) -> list[int]:
        return [j["id"] for j in run_json(capsys, db, "jobs", "list", *flags)["jobs"]]

    assert ids() == [a.id, b.id, c.id, d.id, e.id]
    assert ids("--state", "running", "--state", "retryable") == [c.id, d.id]
    assert ids("--state", "completed,cancelled") == [b.id, e.id]
    assert ids("--kind", "sms") == [c.id, d.id]
    assert ids("--queue", "default", "--kind", "email") == [a.id, b.id]
    assert ids("--tag", "vip") == [a.id, c.id]
    assert ids("--older-than", "36h") == [a.id, b.id, e.id]
    assert ids("--newer-than", "2h") == [c.id, d.id]
    assert ids("--older-than", "30m", "--newer-than", "4d") == [a.id, b.id, c.id]
    assert ids("--order-by", "created_at") == [e.id, a.id, b.id, c.id, d.id]
    assert ids("--desc") == [e.id, d.id, c.id, b.id, a.id]


def test_list_pages_with_the_printed_cursor(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    rows = db.insert(*(job(created_at=NOW - timedelta(minutes=i % 3)) for i in range(7)))
    for order in (["--order-by", "id"], ["--order-by", "created_at", "--desc"]):
        seen: list[int] = []
        cursor: str | None = None
        pages = 0
        while True:
            flags = [*order, "--limit", "3", *(["--after", cursor] if cursor else [])]
            page = run_json(capsys, db, "jobs", "list", *flags)
            seen += [j["id"] for j in page["jobs"]]
            cursor = page["next_cursor"]
            pages += 1
            if cursor is None:
                break
        assert sorted(seen) == sorted(r.id for r in rows) and len(seen) == 7
        assert pages == 3
    by_created = sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)
    assert seen == [r.id for r in by_created]

    code, out, _ = run(capsys, db, "jobs", "list", "--limit", "3")
    assert code == 0
    header, *table, _, more = out.splitlines()
    assert header.split()[:4] == ["ID", "STATE", "QUEUE", "KIND"] and len(table) == 3
    token = more.split("--after ")[1]
    code, out, _ = run(capsys, db, "jobs", "list", "--limit", "3", "--after", token)
    assert [int(line.split()[0]) for line in out.splitlines()[1:4]] == [r.id for r in rows[3:6]]

    code, _, err = run(capsys, db, "jobs", "list", "--after", token, "--desc")
    assert code == 2 and "--order-by id" in err
    code, _, err = run(capsys, db, "jobs", "list", "--after", "garbage!")
    assert code == 2 and "invalid --after cursor" in err


def test_list_usage_errors(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    assert run(capsys, db, "jobs", "list", "--state", "bogus")[0] == 2
    code, _, err = run(capsys, db, "jobs", "list", "--older-than", "10")
    assert code == 2 and "unit" in err
    assert run(capsys, db, "jobs", "list", "--limit", "0")[0] == 2
    assert run(capsys, db, "jobs", "list")[1] == "no jobs found\n"


# ---------------------------------------------------------------- get / cancel / retry / delete


def test_get_shows_the_full_row(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    err_json = encode_attempt_error(NOW - DAY, 1, "boom", "trace line")
    (row,) = db.insert(job("email", S.RETRYABLE, attempt=1, errors=(err_json,), tags=("a", "b"),
                           metadata=b'{"m":1}', unique_key=KEY_A, unique_states=0b0111_1011,
                           created_at=NOW - 2 * DAY))
    data = run_json(capsys, db, "jobs", "get", str(row.id))
    assert data["id"] == row.id and data["kind"] == "email" and data["state"] == "retryable"
    assert data["args"] == {"to": "a@example.com"} and data["metadata"] == {"m": 1}
    assert data["tags"] == ["a", "b"] and data["unique_key"] == KEY_A.hex() and data["unique_states"] == 123
    assert data["errors"][0]["error"] == "boom" and data["errors"][0]["attempt"] == 1
    assert data["created_at"].endswith("Z") and datetime.fromisoformat(data["created_at"]) == NOW - 2 * DAY

    code, out, _ = run(capsys, db, "jobs", "get", str(row.id))
    assert code == 0
    assert ["state", "retryable"] in [line.split() for line in out.splitlines()]
    assert "errors (1):" in out and ": boom" in out and "    trace line" in out

    code, out, err = run(capsys, db, "jobs", "get", "999999")
    assert code == 1 and out == "" and "job 999999 not found" in err
    assert run(capsys, db, "jobs", "get", "abc")[0] == 2


def test_cancel(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    avail, running, done = db.insert(job(), job(state=S.RUNNING, queue="q1"), job(state=S.COMPLETED))
    listener = _listen(db) if db.pg else None

    data = run_json(capsys, db, "jobs", "cancel", str(avail.id))
    assert data["state"] == "cancelled" and data["finalized_at"] is not None
    assert datetime.fromisoformat(data["metadata"]["cancel_attempted_at"]) >= NOW

    code, out, _ = run(capsys, db, "jobs", "cancel", str(running.id))
    assert code == 0 and "cancellation requested" in out
    after = db.jobs(ids=(running.id,))[0]
    assert after.state is S.RUNNING and "cancel_attempted_at" in after.metadata
    if listener is not None:
        payloads = [json.loads(n.payload) for n in listener.notifies(timeout=5, stop_after=2)]
        assert {"action": "cancel", "job_id": running.id, "queue": "q1"} in payloads
        listener.close()

    code, out, _ = run(capsys, db, "jobs", "cancel", str(done.id))
    assert code == 0 and "already completed" in out
    assert db.jobs(ids=(done.id,))[0].state is S.COMPLETED
    assert run(capsys, db, "jobs", "cancel", "424242")[0] == 1


def _listen(db: DB) -> Any:
    import psycopg

    conn = psycopg.connect(db.url, autocommit=True)
    conn.execute('LISTEN "public.river_control"')
    return conn


def test_retry(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    discarded, running = db.insert(job(state=S.DISCARDED, attempt=25, max_attempts=25), job(state=S.RUNNING))
    data = run_json(capsys, db, "jobs", "retry", str(discarded.id))
    assert data["state"] == "available" and data["finalized_at"] is None and data["max_attempts"] == 26
    code, _, err = run(capsys, db, "jobs", "retry", str(running.id))
    assert code == 1 and "is running" in err
    assert db.jobs(ids=(running.id,))[0].state is S.RUNNING
    assert run(capsys, db, "jobs", "retry", "424242")[0] == 1


def test_delete(capsys: pytest.CaptureFixture[str], db: DB, tty_stdin: Any) -> None:
    keep, doomed, running = db.insert(job(), job(state=S.COMPLETED), job(state=S.RUNNING))

    code, out, err = run(capsys, db, "jobs", "delete", str(doomed.id))
    assert code == 2 and "--yes" in err and "stdin is not a terminal" in err
    assert db.ids() == [keep.id, doomed.id, running.id]

    tty_stdin("n\n")
    code, out, err = run(capsys, db, "jobs", "delete", str(doomed.id))
    assert code == 1 and "[y/N]" in err and "aborted" in err
    assert doomed.id in db.ids()

    tty_stdin("y\n")
    code, out, _ = run(capsys, db, "jobs", "delete", str(doomed.id))
    assert code == 0 and out == f"deleted job {doomed.id} (email, was completed)\n"
    assert db.ids() == [keep.id, running.id]

    code, _, err = run(capsys, db, "jobs", "delete", str(running.id), "--yes")
    assert code == 1 and "is running" in err and "river jobs cancel" in err
    assert run(capsys, db, "jobs", "delete", str(doomed.id), "--yes")[0] == 1
    assert run_json(capsys, db, "jobs", "delete", str(keep.id), "--yes")["id"] == keep.id
    assert db.ids() == [running.id]


# ---------------------------------------------------------------- tidy / purge


def test_tidy_deletes_exactly_the_finalized_jobs(
    capsys: pytest.CaptureFixture[str], db: DB, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_jobs, "BATCH", 2)  # several batches
    rows = db.insert(*(job(state=s, queue=q) for s in S for q in ("a", "b")))
    survivors = [r.id for r in rows if not r.state.finalized]

    code, _, err = run(capsys, db, "jobs", "tidy")
    assert code == 2 and "--yes" in err
    assert len(db.ids()) == 16

    data = run_json(capsys, db, "jobs", "tidy", "--yes", "--queue", "a")
    assert data == {"deleted": 3, "by_state": {"cancelled": 1, "completed": 1, "discarded": 1}}
    assert len(db.ids()) == 13 and db.ids(queues=("b",), states=(S.COMPLETED,)) != []

    code, out, _ = run(capsys, db, "jobs", "tidy", "--yes")
    assert code == 0 and out == "deleted 3 jobs (1 cancelled, 1 completed, 1 discarded)\n"
    assert db.ids() == survivors
    assert run(capsys, db, "jobs", "tidy")[1] == "deleted 0 jobs\n"  # nothing to confirm


def test_purge_respects_age_states_and_filters(
    capsys: pytest.CaptureFixture[str], db: DB, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cli_jobs, "BATCH", 2)
    old, recent = NOW - 10 * DAY, NOW - DAY
    rows = {
        "done_old": job(state=S.COMPLETED, finalized_at=old, created_at=old),
        "done_recent": job(state=S.COMPLETED, finalized_at=recent, created_at=old),
        "cancel_old": job(state=S.CANCELLED, finalized_at=old, created_at=old),
        "discard_old": job(state=S.DISCARDED, finalized_at=old, created_at=old),
        "discard_old_q": job(state=S.DISCARDED, finalized_at=old, created_at=old, queue="keep"),
        "avail_old": job(created_at=old),
        "avail_recent": job(created_at=recent),
        "running_old": job(state=S.RUNNING, created_at=old),
        "sched_old": job(state=S.SCHEDULED, created_at=old, scheduled_at=NOW + DAY),
    }
    inserted = dict(zip(rows, db.insert(*rows.values()), strict=True))

    def remaining() -> set[str]:
        ids = set(db.ids())
        return {name for name, r in inserted.items() if r.id in ids}

    code, _, err = run(capsys, db, "jobs", "purge", "--max-age", "7")
    assert code == 2 and "--yes" in err and len(remaining()) == 9
    code, _, err = run(capsys, db, "jobs", "purge", "--max-age", "7", "--state", "running", "--yes")
    assert code == 2 and "never purged" in err
    assert run(capsys, db, "jobs", "purge", "--yes")[0] == 2  # --max-age is required

    dump = tmp_path / "purged.jsonl"
    data = run_json(capsys, db, "jobs", "purge", "--max-age", "7", "--queue", "default", "--yes",
                    "--dump", str(dump))
    assert data["deleted"] == 3 and data["by_state"] == {"cancelled": 1, "completed": 1, "discarded": 1}
    assert remaining() == {"done_recent", "discard_old_q", "avail_old", "avail_recent", "running_old",
                           "sched_old"}
    dumped = [json.loads(line) for line in dump.read_text().splitlines()]
    purged = ("done_old", "cancel_old", "discard_old")
    assert sorted(d["id"] for d in dumped) == sorted(inserted[n].id for n in purged)

    code, out, _ = run(capsys, db, "jobs", "purge", "--max-age", "3d", "--state", "available,scheduled",
                       "--state", "completed", "--yes")
    assert code == 0 and out.startswith("deleted 2 jobs")
    assert remaining() == {"done_recent", "discard_old_q", "avail_recent", "running_old"}
    assert run(capsys, db, "jobs", "purge", "--max-age", "7", "--yes")[1].startswith("deleted 1 job")
    assert remaining() == {"done_recent", "avail_recent", "running_old"}


# ---------------------------------------------------------------- dump / import


def test_dump_import_round_trip_skips_unique_duplicates(
    capsys: pytest.CaptureFixture[str], db: DB, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cli_jobs, "PAGE", 2)  # dump streams several pages, import inserts several batches
    unique_states = 0b1111_0101  # every state but cancelled and discarded
    originals = db.insert(
        job("email", metadata=b'{"who":"x"}', tags=("tag1",), priority=2, max_attempts=5, queue="mail"),
        job("email", S.COMPLETED, unique_key=KEY_A, unique_states=unique_states),
        job("sms", S.SCHEDULED, scheduled_at=NOW + DAY, encoded_args=b'{"n":[1,2,{"x":null}]}'),
        job("sms", S.DISCARDED, errors=(encode_attempt_error(NOW, 1, "bad"),), attempt=1),
        job("report", S.CANCELLED, unique_key=KEY_B, unique_states=unique_states),
    )
    out_file = tmp_path / "jobs.jsonl"
    code, _, err = run(capsys, db, "jobs", "dump", "--output", str(out_file))
    assert code == 0 and err == "dumped 5 jobs to jobs.jsonl\n".replace("jobs.jsonl", str(out_file))
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [d["id"] for d in lines] == [r.id for r in originals]
    first = lines[0]
    assert set(first) >= {"id", "kind", "args", "state", "queue", "priority", "attempt", "max_attempts",
                          "created_at", "scheduled_at", "attempted_at", "finalized_at", "errors",
                          "metadata", "tags", "unique_key", "unique_states"}
    assert (first["queue"], first["priority"], first["max_attempts"], first["tags"], first["metadata"]) == (
        "mail", 2, 5, ["tag1"], {"who": "x"})
    assert lines[1]["unique_key"] == KEY_A.hex() and lines[1]["unique_states"] == unique_states
    assert lines[2]["args"] == {"n": [1, 2, {"x": None}]}
    assert lines[3]["errors"][0]["error"] == "bad"

    code, _, err = run(capsys, db, "jobs", "dump", "--output", str(out_file))
    assert code == 1 and "already exists" in err
    code, stdout_dump, _ = run(capsys, db, "jobs", "dump", "--state", "scheduled")
    assert [json.loads(x)["id"] for x in stdout_dump.splitlines()] == [originals[2].id]

    # Into the same database: KEY_A is held by a completed job whose unique_states cover completed,
    # so its copy is skipped; KEY_B's holder is cancelled (not in its unique_states) so it inserts.
    data = run_json(capsys, db, "jobs", "import", str(out_file))
    assert data == {"inserted": 4, "skipped_duplicates": 1}
    new = [j for j in db.jobs() if j.id > originals[-1].id]
    assert [j.kind for j in new] == ["email", "sms", "sms", "report"]
    mail, sched, discarded, report = new
    metadata = {k: v for k, v in mail.metadata.items() if k != "river:unique_nonce"}  # SQLite inserts add it
    assert (mail.queue, mail.priority, mail.max_attempts, mail.tags, metadata, mail.state) == (
        "mail", 2, 5, ("tag1",), {"who": "x"}, S.AVAILABLE)
    assert sched.state is S.SCHEDULED and sched.scheduled_at == NOW + DAY
    assert sched.args == {"n": [1, 2, {"x": None}]}
    assert discarded.state is S.AVAILABLE and discarded.attempt == 0 and discarded.errors == ()
    assert report.unique_key == KEY_B and report.unique_states == unique_states

    # A second import: now every unique key is taken by an available job.
    code, out, _ = run(capsys, db, "jobs", "import", str(out_file))
    assert code == 0 and out == "imported 3 jobs, skipped 2 unique duplicates\n"

    # Into an empty database everything goes in.
    db.conn.execute("DELETE FROM river_job")
    assert run_json(capsys, db, "jobs", "import", str(out_file)) == {"inserted": 5, "skipped_duplicates": 0}
    assert [(j.kind, j.unique_key) for j in db.jobs()] == [(r.kind, r.unique_key) for r in originals]


def test_import_checks_the_whole_file_first(
    capsys: pytest.CaptureFixture[str], db: DB, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind":"ok","args":{}}\n\n{"kind":"xx","args":{},"priority":9}\n')
    code, _, err = run(capsys, db, "jobs", "import", str(bad))
    assert code == 1 and f"{bad}:3" in err and "priority" in err and "nothing was imported" in err
    bad.write_text("not json\n")
    assert run(capsys, db, "jobs", "import", str(bad))[0] == 1
    code, _, err = run(capsys, db, "jobs", "import", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "no such file" in err
    assert db.ids() == []


@pytest.mark.parametrize(("args", "named"), [
    ('"{\\"n\\": 1}"', 'a string ("{\\"n\\": 1}")'),  # JSON text inside a string, not an object
    ("[1, 2]", "an array"), ("null", "null"), ("7", "a number"),
])
def test_import_refuses_args_that_are_not_an_object(
    capsys: pytest.CaptureFixture[str], db: DB, tmp_path: Path, args: str, named: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f'{{"kind":"ok","args":{{"n":1}}}}\n{{"kind":"ok","args":{args}}}\n')
    code, out, err = run(capsys, db, "jobs", "import", str(bad))
    assert code == 1 and out == ""
    assert f"{bad}:2: not an importable job: args must be a JSON object, not {named}" in err
    assert "nothing was imported" in err
    assert db.ids() == []


# ---------------------------------------------------------------- requeue


def test_requeue_only_moves_old_running_jobs(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    stale, _, old_avail, _ = db.insert(
        job(state=S.RUNNING, attempted_at=NOW - 3 * timedelta(hours=1), attempt=2),
        job(state=S.RUNNING, attempted_at=NOW - timedelta(minutes=10)),
        job(state=S.AVAILABLE, attempted_at=NOW - DAY, created_at=NOW - DAY),
        job(state=S.RETRYABLE, attempted_at=NOW - DAY, attempt=1),
    )
    code, _, err = run(capsys, db, "jobs", "requeue", "--older-than", "1h")
    assert code == 2 and "--yes" in err
    assert db.jobs(ids=(stale.id,))[0].state is S.RUNNING

    data = run_json(capsys, db, "jobs", "requeue", "--older-than", "1h", "--yes")
    assert data == {"requeued": 1, "ids": [stale.id]}
    moved, still, avail, retry = db.jobs()
    assert moved.state is S.AVAILABLE and moved.attempt == 2
    assert still.state is S.RUNNING
    assert (avail.state, avail.scheduled_at) == (S.AVAILABLE, old_avail.scheduled_at)
    assert retry.state is S.RETRYABLE

    code, out, _ = run(capsys, db, "jobs", "requeue", "--older-than", "1h")  # nothing left: no prompt
    assert code == 0 and out == "no running jobs attempted more than 1h ago\n"
    assert run(capsys, db, "jobs", "requeue", "--yes")[0] == 2


# ---------------------------------------------------------------- the installed script


def test_installed_river_script_runs_jobs_stats(tmp_path: Path, sqlite_template: Path) -> None:
    path = tmp_path / "river.sqlite3"
    path.write_bytes(sqlite_template.read_bytes())
    db = DB("sqlite", str(path))
    db.insert(job(), job(state=S.COMPLETED))
    db.conn.close()
    done = subprocess.run([str(RIVER), "jobs", "stats", "--json", "--database-url", db.url],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"] == 2
    done = subprocess.run([str(RIVER), "jobs", "tidy", "--database-url", db.url],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "--yes" in done.stderr


# ---------------------------------------------------------------- output helpers


def test_parse_duration() -> None:
    assert parse_duration("10m") == timedelta(minutes=10)
    assert parse_duration("2h") == timedelta(hours=2)
    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("1.5s") == timedelta(milliseconds=1500)
    assert parse_duration("1w") == timedelta(days=7)
    for bad in ("", "10", "h", "10x", "0s", "-5m", "5m junk"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)
    assert describe_duration(timedelta(days=7)) == "7d"
    assert describe_duration(timedelta(minutes=90)) == "90m"
    assert describe_duration(timedelta(seconds=1.5)) == "1.5s"


def test_print_table_aligns_columns() -> None:
    out = io.StringIO()
    print_table(["name", "jobs", "paused"], [["default", 7, None], ["a-long-queue", 12345, NOW]], out)
    assert out.getvalue().splitlines() == [
        "NAME           JOBS  PAUSED",
        "default           7  -",
        f"a-long-queue  12345  {NOW:%Y-%m-%d %H:%M:%S}Z",
    ]


def test_confirm() -> None:
    class TTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    prompt = io.StringIO()
    assert confirm("Go?", yes=True, stdin=io.StringIO("")) is True
    assert confirm("Go?", yes=False, stdin=TTY("yes\n"), prompt_out=prompt) is True
    assert prompt.getvalue() == "Go? [y/N] "
    assert confirm("Go?", yes=False, stdin=TTY("\n"), prompt_out=prompt) is False
    with pytest.raises(ConfirmationRefused, match="--yes"):
        confirm("Go?", yes=False, stdin=io.StringIO("y\n"))


def test_progress_bar_draws_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    with Progress("dumping", 10, stream=quiet) as bar:
        bar.advance(5)
    assert quiet.getvalue() == ""

    loud = io.StringIO()
    with Progress("dumping", 4, stream=loud, enabled=True, width=4) as bar:
        bar.advance(1)
        assert bar.render() == "dumping [#---]  25% 1/4"
        bar.advance(3)
    assert loud.getvalue().endswith("dumping [####] 100% 4/4\n")
    assert Progress("x", None, enabled=False).render() == "x 0"
