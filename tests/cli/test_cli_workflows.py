"""`river workflows list/get/cancel/retry` through ``river_tools.cli.main.main`` on Postgres and SQLite."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from river_db.migrator import Migrator
from river_protocol.workflow import Workflow
from river_sync import Client
from river_tools.cli.main import main

TABLES = "river_job, river_queue, river_leader"


@dataclasses.dataclass
class Step:
    kind: ClassVar[str] = "cli_wf_step"
    n: int = 0


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        import psycopg

        value = request.getfixturevalue("module_pg_url")
        with Migrator(value) as m:
            m.migrate_up()
        with psycopg.connect(value, autocommit=True) as conn:
            conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY")
        yield value
    else:
        value = f"sqlite://{tmp_path}/river.sqlite3"
        with Migrator(value) as m:
            m.migrate_up()
        yield value


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--database-url", url])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_get_cancel_retry(capsys: pytest.CaptureFixture[str], url: str) -> None:
    assert run(capsys, url, "workflows", "list")[1].startswith("no workflows")
    wf = Workflow(name="cli")
    first = wf.add("first", Step(1))
    wf.add("second", Step(2), deps=[first])
    with Client(url) as client:
        inserted = client.insert_workflow(wf)

    code, out, err = run(capsys, url, "workflows", "list", "--json")
    (listed,) = json.loads(out)
    assert code == 0 and err == ""
    assert listed["id"] == inserted.id and listed["state"] == "running"
    assert listed["counts"] == {"available": 1, "pending": 1} and listed["tasks"] == 2
    code, out, _ = run(capsys, url, "workflows", "list")
    assert code == 0 and inserted.id in out and "1 available, 1 pending" in out

    code, out, _ = run(capsys, url, "workflows", "get", inserted.id)
    assert code == 0 and out.startswith(f"workflow {inserted.id} (cli): running")
    assert "second" in out and "first" in out
    assert re.search(r"^second\s+\d+\s+\S+\s+pending\s+0\s+first\s", out, re.M), out  # its deps

    code, out, _ = run(capsys, url, "workflows", "cancel", inserted.id, "--json")
    assert code == 0 and {j["state"] for j in json.loads(out)["jobs"]} == {"cancelled"}
    shown = json.loads(run(capsys, url, "workflows", "get", inserted.id, "--json")[1])
    assert shown["state"] == "failed" and shown["counts"] == {"cancelled": 2}
    assert shown["task_rows"]["second"]["errors"][-1]["error"] == "workflow cancelled"

    code, out, _ = run(capsys, url, "workflows", "retry", inserted.id)
    assert code == 0 and "2 tasks retried" in out
    shown = json.loads(run(capsys, url, "workflows", "get", inserted.id, "--json")[1])
    assert shown["counts"] == {"available": 1, "pending": 1}
    assert run(capsys, url, "workflows", "retry", inserted.id)[1].endswith("nothing to retry\n")


def test_unknown_and_bad_ids(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, _, err = run(capsys, url, "workflows", "get", "nope")
    assert code == 1 and "workflow nope not found" in err
    code, _, err = run(capsys, url, "workflows", "cancel", "bad id")
    assert code != 0 and "workflow id" in err


def test_sweeper_names_the_lease_holder_and_a_missing_line(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    from datetime import datetime, timedelta

    from river_protocol.intents import HoldLease
    from river_sync import Database

    with Migrator(url, line="python") as m:
        m.migrate_down(target_version=-1)
    code, out, err = run(capsys, url, "workflows", "sweeper")
    assert code == 1 and "Traceback" not in err
    assert out.startswith("no workflow sweeper lease: the python migration line is not applied")
    code, out, _ = run(capsys, url, "workflows", "sweeper", "--json")
    assert code == 1 and json.loads(out)["line_applied"] is False
    try:
        with Migrator(url, line="python") as m:
            m.migrate_up()
        code, out, _ = run(capsys, url, "workflows", "sweeper")
        assert code == 0 and out.startswith("nobody holds the workflow sweeper lease")
        with Database.from_url(url) as db:
            assert db.run(HoldLease("workflow_sweeper", "cli-holder", timedelta(hours=1))) is True
        code, out, _ = run(capsys, url, "workflows", "sweeper")
        assert code == 0
        shape = r"cli-holder sweeps workflows: lease taken \S+Z, renewed until \S+Z \(in \d+\.\d s\)$"
        assert re.match(shape, out.strip()), out
        code, out, _ = run(capsys, url, "workflows", "sweeper", "--json")
        shown = json.loads(out)
        assert code == 0 and shown["holder"] == "cli-holder" and shown["held"] is True
        assert shown["line_applied"] is True and shown["river_leader"] is None
        times = [datetime.fromisoformat(shown[key]) for key in ("held_since", "read_at", "expires_at")]
        assert times[0] <= times[1] < times[2]
    finally:
        with Migrator(url, line="python") as m:
            m.migrate_down(target_version=-1)
