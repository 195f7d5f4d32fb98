"""A workflow across languages: its middle task is worked by River Go (issue 34, "Across languages").

The workflow is ``first`` (Python) -> ``middle`` (kind ``go_middle``, worked by the Go peer,
``tests/go_peer``) -> ``last`` (Python, reads ``ctx.workflow.output("middle")``). A Python
client (``river_sync``, in this process) works the ``default`` queue; the Go peer, a River Go
v0.43 client, works the ``go_peer`` queue only, since a v0.43 Go client fails the kinds it has
no worker for. Run by hand, on a Postgres server, with a Go peer built from River's source
(docs/guides/workflows.md says how):

    PYTHONPATH=. python3 -m tests.drivers.go_peer_workflow \\
        postgresql://postgres@127.0.0.1:5432/test --go-peer /path/to/go_peer [--leader go]

A scratch database is made on that server, migrated, and dropped afterwards. ``--leader
python`` (the default) starts the Python client first and lets it win the election;
``--leader go`` starts the Go peer first and waits until it holds ``river_leader``, so the
Python client is not the leader (its workflow sweeper runs either way: the database has the
python line, and the sweeper's lease is not River's leadership). Checks, in SQL, once the workflow
ended (or its wait timed out):

- every task is ``completed``, on its first attempt, and ran exactly once (each side notes
  the job ids it starts);
- ``middle`` started after ``first`` finalized, and ``last`` after ``middle`` finalized;
- ``middle``'s output is the one Go recorded (River's ``RecordOutput``), its ``river_py:``
  metadata survived Go's completion, and ``last`` recorded that output as what it saw.

The suite runs no Go: ``test_go_peer_workflow.py`` tests the checks on rows, and runs the whole
script on Postgres with ``go_peer_standin.py`` (a Python client keeping the Go peer's contract)
in the Go peer's place.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[2]
GO_QUEUE = "go_peer"
LEADERS = ("python", "go")


@dataclass
class First:
    kind: ClassVar[str] = "go_peer_first"
    n: int


@dataclass
class GoMiddle:
    """The Go peer's kind; its struct (tests/go_peer/main.go) encodes the same JSON."""

    kind: ClassVar[str] = "go_middle"
    n: int


@dataclass
class Last:
    kind: ClassVar[str] = "go_peer_last"
    n: int


def go_output(n: int) -> dict[str, Any]:
    """What the Go peer records for ``go_middle`` with ``n`` (tests/go_peer/main.go)."""
    return {"n": n, "square": n * n, "worked_by": "river-go"}


@dataclass(frozen=True)
class TaskRow:
    """What the checks read of one task's ``river_job`` row."""

    task: str
    id: int
    kind: str
    state: str
    attempt: int
    attempted_at: datetime | None
    finalized_at: datetime | None
    metadata: dict[str, Any]
    errors: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class PeerOutput:
    """What a Go peer printed: its client id (``ready ID``) and the jobs it started (``worked ID``)."""

    client_id: str
    worked: tuple[int, ...]


class PeerProtocolError(ValueError):
    """The peer printed something outside its contract."""


def parse_peer_output(lines: Iterable[str]) -> PeerOutput:
    """Read a peer's standard output: ``ready CLIENT_ID`` first, then ``worked JOB_ID`` lines."""
    client_id: str | None = None
    worked: list[int] = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        word, _, rest = line.partition(" ")
        if number == 1 and word == "ready" and rest:
            client_id = rest
        elif word == "worked" and client_id is not None and rest.isdigit():
            worked.append(int(rest))
        else:
            raise PeerProtocolError(f"line {number} of the peer's output is not in its contract: {line!r}")
    if client_id is None:
        raise PeerProtocolError("the peer never printed 'ready CLIENT_ID'")
    return PeerOutput(client_id, tuple(worked))


def expected_states(*, fail: bool) -> dict[str, str]:
    """Each task's final state: all completed, or, when Go cancels ``middle``, ``last`` cancelled
    by a promoter (the dep's end was Go's, so only a promoter's sweep can see it)."""
    if fail:
        return {"first": "completed", "middle": "cancelled", "last": "cancelled"}
    return {"first": "completed", "middle": "completed", "last": "completed"}


def check(rows: Sequence[TaskRow], *, n: int, go_runs: Sequence[int], python_runs: Sequence[int],
          fail: bool = False) -> list[str]:
    """Every way the run broke the workflow's promises (empty: it kept them all)."""
    by_task = {row.task: row for row in rows}
    missing = {"first", "middle", "last"} - set(by_task)
    if missing:
        return [f"tasks missing from river_job: {sorted(missing)}"]
    first, middle, last = by_task["first"], by_task["middle"], by_task["last"]
    expected = expected_states(fail=fail)
    problems = [f"{row.task} is {row.state}, not {expected[row.task]}" for row in (first, middle, last)
                if row.state != expected[row.task]]
    runs = {"first": 1, "middle": 1, "last": 0 if fail else 1}  # the attempts each task should have had
    problems += [f"{row.task} ended on attempt {row.attempt}, not {runs[row.task]}"
                 for row in (first, middle, last)
                 if row.state == expected[row.task] and row.attempt != runs[row.task]]
    if list(go_runs) != [middle.id]:
        problems.append(f"the Go peer ran {list(go_runs)}, not exactly middle ({middle.id})")
    python_counts = Counter(python_runs)
    for row in (first, last):
        if row.state != "pending" and python_counts[row.id] != runs[row.task]:  # pending: said above
            problems.append(f"Python ran {row.task} ({row.id}) {python_counts[row.id]} times, "
                            f"not {runs[row.task]}")
    strangers = set(python_counts) - {first.id, last.id}
    if strangers:
        problems.append(f"Python ran jobs that are not its tasks: {sorted(strangers)}")
    for dep, task in ((first, middle), (middle, last)):
        # a task moves on (starts, or is cancelled without starting) only after its dep's end
        moved = task.attempted_at if task.attempted_at is not None else task.finalized_at
        if moved is not None and (dep.finalized_at is None or moved < dep.finalized_at):
            problems.append(f"{task.task} moved on at {moved}, "
                            f"before {dep.task} finalized ({dep.finalized_at})")
    kept = {key: middle.metadata.get(key) for key in ("river_py:task", "river_py:deps")}
    if kept != {"river_py:task": "middle", "river_py:deps": ["first"]}:
        problems.append(f"middle's river_py: metadata did not survive Go's update: {kept}")
    if not fail and middle.state == "completed" and middle.metadata.get("output") != go_output(n):
        problems.append(f"middle's output is {middle.metadata.get('output')!r}, not Go's {go_output(n)!r}")
    if not fail and last.state == "completed" and last.metadata.get("output") != {"saw": go_output(n)}:
        problems.append(f"last recorded {last.metadata.get('output')!r}, "
                        "not the Go output it should have read")
    if fail and last.state == "cancelled" and not last.errors:
        problems.append("last was cancelled with no reason in its errors")
    return problems


@dataclass
class Outcome:
    """One run: the rows, the problems the checks found, and who led."""

    leader: str
    fail: bool
    rows: list[TaskRow]
    problems: list[str]
    leader_id: str | None
    go_client_id: str
    python_client_id: str
    timed_out: bool
    notes: list[str] = field(default_factory=list)

    def promotion_delay(self) -> timedelta | None:
        """From ``middle``'s end (Go) to ``last`` moving on (its start, or its cancellation)."""
        by_task = {row.task: row for row in self.rows}
        middle, last = by_task.get("middle"), by_task.get("last")
        if middle is None or last is None or middle.finalized_at is None:
            return None
        moved = last.attempted_at if last.attempted_at is not None else last.finalized_at
        return None if moved is None else moved - middle.finalized_at


class Peer:
    """The Go peer process (or anything keeping its contract: see ``parse_peer_output``)."""

    def __init__(self, command: Sequence[str], url: str, client_id: str, workdir: Path) -> None:
        self.stdout_path = workdir / "go-peer.stdout"
        self.stderr_path = workdir / "go-peer.stderr"
        self._out = open(self.stdout_path, "w")  # noqa: SIM115 - closed in close()
        self._err = open(self.stderr_path, "w")  # noqa: SIM115 - closed in close()
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # for the stand-in
        self.proc = subprocess.Popen([*command, "-queue", GO_QUEUE, "-id", client_id, url],
                                     stdin=subprocess.PIPE, stdout=self._out, stderr=self._err, text=True,
                                     env={**os.environ, "PYTHONPATH": path})

    def output(self) -> PeerOutput | None:
        """What it printed so far (None before its ``ready`` line)."""
        text = self.stdout_path.read_text()
        if not text.startswith("ready"):
            return None
        complete = text[:text.rfind("\n") + 1]  # a line being written is read next time
        return parse_peer_output(complete.splitlines())

    def wait_ready(self, deadline: float) -> PeerOutput:
        while (out := self.output()) is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Go peer exited ({self.proc.returncode}): {self.stderr()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Go peer did not print 'ready': {self.stderr()}")
            time.sleep(0.02)
        return out

    def stop(self, timeout: float = 30.0) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=timeout)

    def stderr(self) -> str:
        return self.stderr_path.read_text()[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._err.close()


def _rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def _leader_id(url: str) -> str | None:
    rows = _rows(url, "SELECT leader_id FROM river_leader WHERE expires_at > now()")
    return str(rows[0][0]) if rows else None


def _task_rows(url: str, workflow_id: str) -> list[TaskRow]:
    rows = _rows(url, """
        SELECT metadata ->> 'river_py:task', id, kind, state::text, attempt, attempted_at, finalized_at,
               metadata, coalesce(to_jsonb(errors), '[]'::jsonb)
        FROM river_job WHERE metadata ->> 'river_py:workflow_id' = %s ORDER BY id""", workflow_id)
    return [TaskRow(*row) for row in rows]


def _python_client(url: str, client_id: str, runs: list[int]) -> Any:
    from river_sync import Client, QueueConfig, WorkContext, Workers

    lock = threading.Lock()
    workers = Workers()

    def note(ctx: WorkContext) -> None:
        with lock:
            runs.append(ctx.job.id)

    @workers.job(First)
    def first(ctx: WorkContext, args: First) -> None:
        note(ctx)
        ctx.record_output({"n": args.n})

    @workers.job(Last)
    def last(ctx: WorkContext, args: Last) -> None:
        note(ctx)
        ctx.record_output({"saw": ctx.workflow.output("middle")})

    # It inserts go_middle, which only Go works (skip_unknown_job_check); River's defaults
    # otherwise: the workflow sweeper (whoever leads River) sweeps once a second.
    return Client(url, workers=workers, client_id=client_id, queues={"default": QueueConfig(max_workers=4)},
                  skip_unknown_job_check=True)


def run(url: str, peer_command: Sequence[str], workdir: Path, *, leader: str = "python", fail: bool = False,
        timeout: float = 30.0) -> Outcome:
    """Run the workflow on the migrated, empty Postgres database at ``url``; with ``fail`` the Go
    peer cancels ``middle`` (it is given a negative ``n``), and ``last`` must be cancelled."""
    from river_sync import InsertOpts, WaitTimeoutError, Workflow, WorkflowTaskFailedError

    if leader not in LEADERS:
        raise ValueError(f"leader must be one of {LEADERS}, got {leader!r}")
    n = -1 if fail else 7
    go_id = f"go-peer-{os.getpid()}"
    python_id = f"python-{os.getpid()}"
    python_runs: list[int] = []
    client = _python_client(url, python_id, python_runs)
    peer: Peer | None = None
    deadline = time.monotonic() + timeout
    notes: list[str] = []
    try:
        if leader == "python":
            client.start()
            if not client.wait_leader(True, timeout=timeout):
                raise RuntimeError("the Python client did not win the election on an empty database")
            peer = Peer(peer_command, url, go_id, workdir)
            peer.wait_ready(deadline)
        else:
            peer = Peer(peer_command, url, go_id, workdir)
            peer.wait_ready(deadline)
            while _leader_id(url) != go_id:  # River Go elects at start, then every few seconds
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Go peer did not become leader (leader: {_leader_id(url)})")
                time.sleep(0.05)
            client.start()
        wf = Workflow(name="across languages")
        first = wf.add("first", First(n=n))
        middle = wf.add("middle", GoMiddle(n=n), deps=[first], opts=InsertOpts(queue=GO_QUEUE))
        wf.add("last", Last(n=n), deps=[middle])
        inserted = client.insert_workflow(wf)
        timed_out = False
        try:
            client.wait_workflow(inserted, timeout=max(1.0, deadline - time.monotonic()))
        except WaitTimeoutError:
            timed_out = True
        except WorkflowTaskFailedError as failed:
            if not fail:
                notes.append("the workflow failed: "
                             f"{[(j.metadata.get('river_py:task'), j.state.value) for j in failed.jobs]}")
        leader_id = _leader_id(url)
        python_is_leader = client.is_leader
    finally:
        client.stop()
        if peer is not None:
            try:
                if peer.proc.poll() is None and peer.stop() != 0:
                    notes.append(f"the Go peer exited {peer.proc.returncode}: {peer.stderr()}")
            finally:
                peer.close()
    out = peer.output() if peer is not None else None
    rows = _task_rows(url, inserted.id)
    problems = check(rows, n=n, go_runs=out.worked if out else (), python_runs=python_runs, fail=fail)
    if timed_out:
        problems.insert(0, f"the workflow was not done {timeout:g} s after the run began")
    if leader == "go" and python_is_leader:
        notes.append("the Python client became leader during the run: the Go-leader case went untested")
    return Outcome(leader, fail, rows, problems, leader_id, go_id, python_id, timed_out, notes)


def report(outcome: Outcome) -> str:
    """A few lines for a person: each task's row, who led, and what the checks found."""
    lines = [f"leader: {outcome.leader_id} ({outcome.leader} asked; Go peer {outcome.go_client_id}, "
             f"Python client {outcome.python_client_id})"]
    for row in outcome.rows:
        lines.append(f"  {row.task:<6} {row.kind:<14} {row.state:<9} attempt {row.attempt} "
                     f"attempted_at {row.attempted_at} finalized_at {row.finalized_at}")
    delay = outcome.promotion_delay()
    if delay is not None:
        verb = "was cancelled" if outcome.fail else "started"
        lines.append(f"  last {verb} {delay.total_seconds() * 1000:.0f} ms after Go finalized middle")
    lines += [f"note: {note}" for note in outcome.notes]
    if outcome.problems:
        lines += [f"FAILED: {problem}" for problem in outcome.problems]
    else:
        lines.append("all checks passed")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="a Postgres server (a scratch database is made on it)")
    parser.add_argument("--go-peer", required=True, metavar="BINARY",
                        help="the Go peer built from tests/go_peer (or a command keeping its contract)")
    parser.add_argument("--leader", choices=LEADERS, default="python",
                        help="which side holds River's leadership during the run (default: python)")
    parser.add_argument("--fail", action="store_true",
                        help="the Go peer cancels the middle task; the last task must be cancelled")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds the whole run may take")
    args = parser.parse_args(argv)
    import shlex
    import tempfile

    from river_db.migrator import Migrator
    from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database

    os.environ["RIVER_TEST_DATABASE_URL"] = args.url
    url = create_scratch_pg_database()
    try:
        for line in (None, "python"):
            with Migrator(url, **({"line": line} if line else {})) as migrator:
                migrator.migrate_up()
        with tempfile.TemporaryDirectory(prefix="river-go-peer-") as workdir:
            outcome = run(url, shlex.split(args.go_peer), Path(workdir), leader=args.leader,
                          fail=args.fail, timeout=args.timeout)
    finally:
        drop_scratch_pg_database(url)
    print(report(outcome))
    return 1 if outcome.problems else 0


if __name__ == "__main__":
    sys.exit(main())
