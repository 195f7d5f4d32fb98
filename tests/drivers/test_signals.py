"""run_until_signalled in a real worker process: SIGTERM soft-stops, a second one hard-stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from river_db.migrator import Migrator
from river_protocol.intents import GetJob
from river_sync import Database, JobState

WAIT = 30.0

# The worker tells the test it started, then (soft) finishes once the test writes a line to its stdin,
# or (hard) gives up as soon as its token is set.
CHILD = textwrap.dedent('''
    import dataclasses, sys
    from datetime import timedelta
    from typing import ClassVar
    from river_sync import Client, QueueConfig, Workers, run_until_signalled

    @dataclasses.dataclass
    class Slow:
        kind: ClassVar[str] = "slow"

    mode = sys.argv[2]
    workers = Workers()

    @workers.job(Slow)
    def work(ctx, args):
        print("started", flush=True)
        if mode == "soft":
            sys.stdin.readline()
        else:
            ctx.token.wait()
            ctx.raise_if_cancelled()

    ms = timedelta(milliseconds=1)
    queue = QueueConfig(fetch_cooldown=5 * ms, fetch_poll_interval=50 * ms)
    client = Client(sys.argv[1], queues={"default": queue}, workers=workers)
    job = client.insert(Slow()).job
    print(f"job {job.id}", flush=True)
    how = run_until_signalled(client)
    print(f"stopped {how}", flush=True)
''')


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_sigterm_stops_the_worker_process(tmp_path: Path, mode: str) -> None:
    url = f"sqlite:///{tmp_path}/river.sqlite3"
    with Migrator(url) as migrator:
        migrator.migrate_up()
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, str(script), url, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
        job_id = int(proc.stdout.readline().split()[1])
        assert proc.stdout.readline().strip() == "started"
        proc.send_signal(signal.SIGTERM)
        if mode == "soft":
            proc.stdin.write("finish\n")
            proc.stdin.flush()
        else:
            # Two signals in quick succession may reach Python's handler as one: wait for the first.
            assert "received" in proc.stderr.readline()
            proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert out.strip().splitlines()[-1] == f"stopped {mode}"
    with Database.from_url(url) as db:
        row = db.run(GetJob(job_id), readonly=True)
    if mode == "soft":
        assert row.state is JobState.COMPLETED
    else:
        # Interrupted by the hard stop: back to available without using the attempt.
        assert row.state is JobState.AVAILABLE and row.attempt == 0
