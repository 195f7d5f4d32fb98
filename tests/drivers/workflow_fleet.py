"""A workflow of random shape run by three processes (sync, trio, asyncio) on Postgres, one of
them SIGKILLed in the middle, then checked in SQL.

The suite runs a small one (``test_workflow_fleet.py``); the issue's full size runs by hand:

    PYTHONPATH=. python3 tests/drivers/workflow_fleet.py --tasks 1000 \\
        --database-url postgresql://postgres@127.0.0.1:5432/test

(the URL names a server; a scratch database is made on it and dropped afterwards).

Checks after every process has stopped:

- every task is ``completed``;
- every task started after each of its deps finished: its last ``attempted_at`` is not
  before any dep's ``finalized_at``, and no execution was recorded before the last dep's end
  (each process records a job id as it starts running it);
- only tasks that the killed process was running ran more than once (a rescue), and each
  survivor ran a task at most once.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("workflow_child.py")
DRIVERS = ("sync", "trio", "asyncio")


@dataclass
class FleetResult:
    tasks: int
    seconds: float
    killed: str
    rescued: int  # tasks the killed process was running, run again elsewhere


def random_dag(tasks: int, rng: random.Random) -> list[tuple[str, int, list[str]]]:
    """(name, sleep ms, deps) per task: each depends on up to 3 of the 30 tasks before it. A
    task sleeps 5-20 ms: long enough for the kill to land while the victim runs one."""
    out = []
    for i in range(tasks):
        window = list(range(max(0, i - 30), i))
        deps = rng.sample(window, k=min(len(window), rng.randint(0, 3)))
        out.append((f"t{i}", rng.randint(5, 20), [f"t{d}" for d in sorted(deps)]))
    return out


class Child:
    def __init__(self, url: str, driver: str, workdir: Path) -> None:
        self.driver = driver
        self.record = workdir / f"executions-{driver}.txt"
        self.stderr_path = workdir / f"stderr-{driver}.txt"
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in close()
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), url, driver, str(self.record)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            env={**os.environ, "PYTHONPATH": path},
        )

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == "ready", f"{self.driver} process failed to start: {self.stderr()}"

    def finish(self, timeout: float) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=timeout)

    def executions(self) -> list[int]:
        return [int(x) for x in self.record.read_text().split()] if self.record.exists() else []

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text()[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


def _rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def run_fleet(url: str, workdir: Path, *, tasks: int, seed: int = 0, kill: str = "trio",
              deadline: float = 120.0) -> FleetResult:
    """Run the fleet against a migrated, empty Postgres database at ``url``; raises AssertionError
    naming what a check found."""
    from river_protocol.workflow import Workflow
    from river_sync import Client
    from tests.drivers.workflow_child import FleetTask

    rng = random.Random(seed)
    shape = random_dag(tasks, rng)
    children = [Child(url, driver, workdir) for driver in DRIVERS]
    started = time.monotonic()
    try:
        for child in children:
            child.wait_ready()
        wf = Workflow(name="fleet")
        for name, ms, deps in shape:
            wf.add(name, FleetTask(ms=ms), deps=deps)
        with Client(url) as inserter:
            inserted = inserter.insert_workflow(wf)
        ids = {name: inserted.job(name).id for name, _, _ in shape}

        def completed() -> int:
            return int(_rows(url, "SELECT count(*) FROM river_job WHERE state = 'completed'")[0][0])

        victim = next(c for c in children if c.driver == kill)
        end = started + deadline
        while completed() < tasks // 3:
            assert time.monotonic() < end, "the fleet stalled before the kill"
            time.sleep(0.02)
        # Kill right after the victim recorded a new start: it is running that task (5 ms or more).
        seen = len(victim.executions())
        while len(victim.executions()) == seen:
            assert time.monotonic() < end, "the victim never started another task"
            time.sleep(0.0005)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        while (done := completed()) < tasks:
            for child in children:
                assert child is victim or child.proc.poll() is None, f"{child.driver} died: {child.stderr()}"
            states = dict(_rows(url, "SELECT state::text, count(*) FROM river_job GROUP BY 1"))
            assert time.monotonic() < end, f"not all tasks completed ({done}/{tasks}): {states}"
            time.sleep(0.05)
        for child in children:
            if child is not victim:
                assert child.finish(30.0) == 0, child.stderr()
        seconds = time.monotonic() - started

        states = dict(_rows(url, "SELECT state::text, count(*) FROM river_job GROUP BY 1"))
        assert states == {"completed": tasks}, states
        late = _rows(url, """
            SELECT t.metadata ->> 'river_py:task', d.metadata ->> 'river_py:task',
                   t.attempted_at, d.finalized_at
            FROM river_job t
            JOIN river_job d ON d.metadata ->> 'river_py:workflow_id' = t.metadata ->> 'river_py:workflow_id'
                AND t.metadata -> 'river_py:deps' ? (d.metadata ->> 'river_py:task')
            WHERE t.attempted_at < d.finalized_at
        """)
        assert not late, f"tasks started before a dep finished: {late[:10]}"

        by_driver = {c.driver: c.executions() for c in children}
        for driver, runs in by_driver.items():
            if driver != kill:
                twice = [i for i, n in Counter(runs).items() if n > 1]
                assert not twice, f"{driver} ran tasks twice: {twice[:10]}"
        everywhere = Counter(i for runs in by_driver.values() for i in runs)
        assert set(everywhere) == set(ids.values()), "some task never ran, or a stranger did"
        killed_runs = set(by_driver[kill])
        again = {i for i, n in everywhere.items() if n > 1}
        assert again <= killed_runs, f"tasks ran twice without a kill: {sorted(again - killed_runs)[:10]}"
        return FleetResult(tasks, seconds, kill, len(again))
    finally:
        for child in children:
            child.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kill", choices=DRIVERS, default="trio")
    parser.add_argument("--database-url", default=os.environ.get("RIVER_TEST_DATABASE_URL",
                                                                   "postgresql://postgres@127.0.0.1:5432/test"))
    args = parser.parse_args(argv)
    import tempfile

    from river_db.migrator import Migrator
    from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database

    os.environ["RIVER_TEST_DATABASE_URL"] = args.database_url
    url = create_scratch_pg_database()
    try:
        with Migrator(url) as migrator:
            migrator.migrate_up()
        with tempfile.TemporaryDirectory() as workdir:
            result = run_fleet(url, Path(workdir), tasks=args.tasks, seed=args.seed, kill=args.kill,
                               deadline=600.0)
    finally:
        drop_scratch_pg_database(url)
    print(f"{result.tasks} tasks completed in {result.seconds:.1f} s by sync, trio and asyncio processes; "
          f"{result.killed} SIGKILLed mid-run, {result.rescued} of its tasks ran again elsewhere; "
          "all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
