"""The cross-language workflow script (``go_peer_workflow.py``) without Go: its checks on rows,
its reading of the peer's output, and the whole script on Postgres with the Python stand-in
(``go_peer_standin.py``) in the Go peer's place. The run with River Go is by hand (the suite has
no Go toolchain): docs/guides/workflows.md."""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from river_db.migrator import Migrator
from tests.drivers.go_peer_workflow import (
    Outcome,
    PeerOutput,
    PeerProtocolError,
    TaskRow,
    check,
    expected_states,
    go_output,
    main,
    parse_peer_output,
    report,
    run,
)

STANDIN = Path(__file__).with_name("go_peer_standin.py")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
N = 7


def good_rows() -> list[TaskRow]:
    """A run that kept every promise: ids 1, 2, 3, each started after its dep's end."""
    return [
        TaskRow("first", 1, "go_peer_first", "completed", 1, T0, T0 + 5 * MS, {"output": {"n": N}}),
        TaskRow("middle", 2, "go_middle", "completed", 1, T0 + 10 * MS, T0 + 15 * MS,
                {"river_py:task": "middle", "river_py:deps": ["first"], "output": go_output(N)}),
        TaskRow("last", 3, "go_peer_last", "completed", 1, T0 + 400 * MS, T0 + 410 * MS,
                {"output": {"saw": go_output(N)}}),
    ]


def failed_rows() -> list[TaskRow]:
    """A run where Go cancelled middle and a promoter cancelled last, which never ran."""
    first, middle, _ = good_rows()
    middle = dataclasses.replace(middle, state="cancelled", metadata={"river_py:task": "middle",
                                                                      "river_py:deps": ["first"]})
    last = TaskRow("last", 3, "go_peer_last", "cancelled", 0, None, T0 + 500 * MS, {},
                   [{"error": "a dep was cancelled"}])
    return [first, middle, last]


def replaced(rows: list[TaskRow], task: str, **changes: object) -> list[TaskRow]:
    return [dataclasses.replace(row, **changes) if row.task == task else row for row in rows]  # type: ignore[arg-type]


def test_parse_peer_output_reads_its_client_id_and_the_jobs_it_started() -> None:
    assert parse_peer_output(["ready go-peer-1\n", "worked 12\n", "\n", "worked 40"]) == PeerOutput(
        "go-peer-1", (12, 40))
    assert parse_peer_output(["ready go-peer-1"]) == PeerOutput("go-peer-1", ())


@pytest.mark.parametrize("lines", [
    [],  # never ready
    ["worked 3"],  # worked before ready
    ["ready"],  # no client id
    ["ready a", "worked x"],  # not a job id
    ["ready a", "panic: boom"],  # anything else
])
def test_parse_peer_output_refuses_lines_outside_the_contract(lines: list[str]) -> None:
    with pytest.raises(PeerProtocolError):
        parse_peer_output(lines)


def test_check_passes_a_run_that_kept_every_promise() -> None:
    assert check(good_rows(), n=N, go_runs=[2], python_runs=[1, 3]) == []
    assert check(failed_rows(), n=-1, go_runs=[2], python_runs=[1], fail=True) == []


def test_expected_states() -> None:
    assert expected_states(fail=False) == {"first": "completed", "middle": "completed", "last": "completed"}
    assert expected_states(fail=True) == {"first": "completed", "middle": "cancelled", "last": "cancelled"}


@pytest.mark.parametrize(("rows", "go_runs", "python_runs", "problem"), [
    (replaced(good_rows(), "last", state="pending", attempt=0, attempted_at=None, finalized_at=None),
     [2], [1], "last is pending, not completed"),
    (replaced(good_rows(), "middle", attempt=2), [2], [1, 3], "middle ended on attempt 2, not 1"),
    (good_rows(), [2, 2], [1, 3], "the Go peer ran [2, 2]"),
    (good_rows(), [], [1, 3], "the Go peer ran []"),
    (good_rows(), [2], [1, 3, 3], "Python ran last (3) 2 times, not 1"),
    (good_rows(), [2], [1, 3, 9], "Python ran jobs that are not its tasks: [9]"),
    (replaced(good_rows(), "last", attempted_at=T0 + 14 * MS), [2], [1, 3], "last moved on at"),
    (replaced(good_rows(), "middle", attempted_at=T0 + 1 * MS), [2], [1, 3], "middle moved on at"),
    (replaced(good_rows(), "middle", metadata={"output": go_output(N)}), [2], [1, 3],
     "middle's river_py: metadata did not survive"),
    (replaced(good_rows(), "middle", metadata={"river_py:task": "middle", "river_py:deps": ["first"]}),
     [2], [1, 3], "middle's output is None"),
    (replaced(good_rows(), "last", metadata={"output": {"saw": None}}), [2], [1, 3], "last recorded"),
])
def test_check_names_each_broken_promise(rows: list[TaskRow], go_runs: list[int], python_runs: list[int],
                                         problem: str) -> None:
    problems = check(rows, n=N, go_runs=go_runs, python_runs=python_runs)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_check_of_a_go_failure() -> None:
    silent = replaced(failed_rows(), "last", errors=[])
    assert check(silent, n=-1, go_runs=[2], python_runs=[1], fail=True) == [
        "last was cancelled with no reason in its errors"]
    ran = replaced(failed_rows(), "last", state="completed", attempt=1, attempted_at=T0 + 400 * MS)
    assert check(ran, n=-1, go_runs=[2], python_runs=[1, 3], fail=True) == [
        "last is completed, not cancelled", "Python ran last (3) 1 times, not 0"]
    early = replaced(failed_rows(), "last", finalized_at=T0 + 14 * MS)
    assert check(early, n=-1, go_runs=[2], python_runs=[1], fail=True)[0].startswith("last moved on at")


def test_check_of_missing_tasks() -> None:
    problems = check(good_rows()[:2], n=N, go_runs=[2], python_runs=[1])
    assert problems == ["tasks missing from river_job: ['last']"]


def test_report_shows_the_rows_the_promotion_delay_and_the_verdict() -> None:
    outcome = Outcome("python", False, good_rows(), [], "python-1", "go-peer-1", "python-1", False)
    assert outcome.promotion_delay() == 385 * MS
    text = report(outcome)
    assert "leader: python-1" in text and "last started 385 ms after Go finalized middle" in text
    assert text.endswith("all checks passed")
    stuck = Outcome("go", False, replaced(good_rows(), "last", state="pending", attempt=0, attempted_at=None,
                                           finalized_at=None), ["last is pending, not completed"],
                    "go-peer-1", "go-peer-1", "python-1", True, ["a note"])
    assert stuck.promotion_delay() is None
    assert report(stuck).splitlines()[-2:] == ["note: a note", "FAILED: last is pending, not completed"]
    cancelled = Outcome("python", True, failed_rows(), [], "python-1", "go-peer-1", "python-1", False)
    assert "last was cancelled 485 ms after Go finalized middle" in report(cancelled)


def test_script_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["postgresql://localhost/x"])  # no --go-peer
    assert exited.value.code == 2 and "--go-peer" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["postgresql://localhost/x", "--go-peer", "peer", "--leader", "rust"])
    assert exited.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_run_refuses_an_unknown_leader(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="leader must be one of"):
        run("postgresql://localhost/x", ["peer"], tmp_path, leader="rust")


def _migrate(url: str) -> None:
    with Migrator(url) as migrator:
        migrator.migrate_up()
    with Migrator(url, line="python") as migrator:
        migrator.migrate_up()


@pytest.mark.postgres
@pytest.mark.parametrize("fail", [False, True])
def test_script_with_the_standin_peer(scratch_pg_url: str, tmp_path: Path, fail: bool) -> None:
    _migrate(scratch_pg_url)
    outcome = run(scratch_pg_url, [sys.executable, str(STANDIN)], tmp_path, fail=fail, timeout=60.0)
    assert outcome.problems == [] and outcome.notes == []
    assert [row.state for row in outcome.rows] == list(expected_states(fail=fail).values())
    assert outcome.leader_id == outcome.python_client_id  # the stand-in never leads
    assert [row.kind for row in outcome.rows] == ["go_peer_first", "go_middle", "go_peer_last"]
