"""`river queues set-limit` and the flow-control columns of `river queues list`, on SQLite and
Postgres, and the option parsing behind them (river_tools.cli.queue_limits)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from river_db.migrator import Migrator
from river_protocol.flow_control import PartitionConfig, QueueLimits
from river_protocol.flow_intents import ListQueueLimits, SetQueueLimits
from river_protocol.intents import FullJobRow, InsertFullJobs, UpsertQueue
from river_protocol.states import JobState
from river_tools.cli.main import main
from river_tools.cli.queue_limits import UNSET, describe_limits, merge, parse_limit, parse_rate
from tests.cli.test_cli_queues import DB


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DB]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("scratch_pg_url"))
    else:
        url = f"sqlite://{tmp_path / 'river.sqlite3'}"
    with Migrator(url) as m:
        m.migrate_up()
    handle = DB(request.param, url)
    yield handle
    handle.conn.close()


def run(capsys: pytest.CaptureFixture[str], db: DB, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--database-url", db.url])
    out, err = capsys.readouterr()
    return code, out, err


def test_set_limit_needs_the_python_line(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    code, out, err = run(capsys, db, "queues", "set-limit", "mail", "--global-limit", "2")
    assert code != 0 and out == ""
    assert "river migrate-up --line python" in err


def test_set_limit_refuses_a_bad_queue_name_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], db: DB
) -> None:
    with Migrator(db.url, line="python") as m:
        m.migrate_up()
    code, out, err = run(capsys, db, "queues", "set-limit", "no spaces", "--global-limit", "2")
    assert code != 0 and out == "" and "queue name is invalid" in err
    assert db.run(ListQueueLimits()) == []


def test_set_limit_and_list(capsys: pytest.CaptureFixture[str], db: DB) -> None:
    with Migrator(db.url, line="python") as m:
        m.migrate_up()
    db.run(UpsertQueue(name="mail"))
    db.run(UpsertQueue(name="plain"))
    part = PartitionConfig(by_args=("to",))
    db.run(SetQueueLimits("mail", QueueLimits(global_limit=5), concurrency_partition=part))
    db.run(InsertFullJobs(rows=tuple(
        FullJobRow(kind="email", queue="mail", state=JobState.RUNNING, attempt=1, attempted_by=("c",),
                   encoded_args=f'{{"to": {n}}}'.encode()) for n in (1, 1, 2))))

    code, out, err = run(capsys, db, "queues", "set-limit", "mail", "--local-limit", "1", "--rate", "10/1m")
    assert (code, err) == (0, "") and out == "queue mail: global 5, local 1, rate 10/1m\n"
    code, out, _ = run(capsys, db, "queues", "set-limit", "mail", "--global-limit", "none")
    assert out == "queue mail: local 1, rate 10/1m\n"

    code, out, _ = run(capsys, db, "queues", "list")
    header, *rows = out.splitlines()
    assert header.split()[-3:] == ["LIMITS", "BUSIEST", "PARTITIONS"]
    mail = next(r for r in rows if r.startswith("mail"))
    assert "local 1, rate 10/1m" in mail and "[1]=2 [2]=1" in mail
    assert next(r for r in rows if r.startswith("plain")).rstrip().endswith("-")

    data = {q["name"]: q for q in json.loads(run(capsys, db, "queues", "list", "--json")[1])}
    assert "flow_control" not in data["plain"]
    flow = data["mail"]["flow_control"]
    assert flow | {"busiest_partitions": None} == {
        "global_limit": None, "local_limit": 1, "rate_allowed": 10, "rate_period_ms": 60_000,
        "concurrency_partition": {"by_kind": False, "by_args": ["to"]},
        "rate_partition": {"by_kind": False, "by_args": []}, "running": 3, "busiest_partitions": None,
    }
    assert [p["running"] for p in flow["busiest_partitions"]] == [2, 1]

    code, out, err = run(capsys, db, "queues", "set-limit", "new", "--rate", "5/250ms", "--json")
    assert json.loads(out) == {"queue": "new", "global_limit": None, "local_limit": None,
                               "rate_allowed": 5, "rate_period_ms": 250}


def test_limit_options_parse_and_merge() -> None:
    assert parse_limit("3") == 3 and parse_limit("None") is None
    for bad in ("0", "-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_limit(bad)
    assert parse_rate("100/60s") == (100, timedelta(seconds=60))
    assert parse_rate("5/250ms") == (5, timedelta(milliseconds=250))
    assert parse_rate("none") == (None, None)
    for bad in ("100", "100/", "100/1d", "x/1s", "0/1s", "5/0s"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_rate(bad)
    current = QueueLimits(global_limit=2, rate_allowed=1, rate_period=timedelta(seconds=1))
    assert merge(current) == current
    assert merge(current, global_limit=None, local_limit=4) == QueueLimits(
        local_limit=4, rate_allowed=1, rate_period=timedelta(seconds=1))
    assert merge(current, global_limit=UNSET, rate="none") == QueueLimits(global_limit=2)
    assert describe_limits(QueueLimits()) == "none"
    odd = QueueLimits(rate_allowed=3, rate_period=timedelta(milliseconds=1500))
    assert describe_limits(odd) == "rate 3/1500ms"
