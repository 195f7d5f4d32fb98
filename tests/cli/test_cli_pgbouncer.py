"""`river migrate-up` / `migrate-down` and `river bench` through a real PgBouncer in transaction mode."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from river_db.migrator import Migrator
from tests.pgbouncer import TRANSACTION_POOL_PROBE_TIMEOUT

pytestmark = pytest.mark.postgres

RIVER = Path(sys.executable).with_name("river")


def _river(*argv: str, command: Sequence[str] | None = None) -> subprocess.CompletedProcess[str]:
    # The console script of this checkout (PYTHONPATH carries it into the subprocess).
    if command is None:
        command = [str(RIVER)] if RIVER.exists() else [sys.executable, "-m", "river_tools.cli.main"]
    return subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ})


@pytest.fixture(name="short_probe_river")
def short_probe_river_fixture() -> list[str]:
    """A ``river`` command whose clients' listener probe waits ``TRANSACTION_POOL_PROBE_TIMEOUT``.

    Behind the transaction pool the probe never succeeds, so every client start waits it out
    (River's 2 s). The client tests shorten it with ``testing_listen_probe_timeout``; the CLI
    builds its client itself and has no flag for a testing knob (nor should it), so the child
    first lowers the default ``ClientBase`` reads into that attribute, ``river_db.client_base.
    PROBE_TIMEOUT`` (the monkeypatch, done where the client lives), then runs ``river``'s main.
    """
    patch = (
        "import sys, river_db.client_base as base; "
        f"base.PROBE_TIMEOUT = {TRANSACTION_POOL_PROBE_TIMEOUT!r}; "
        "from river_tools.cli.main import main; sys.exit(main())"
    )
    return [sys.executable, "-c", patch]


def test_migrate_up_and_down_through_transaction_pooling(scratch_pg_url: str, pgbouncer: Any) -> None:
    url = pgbouncer.url(scratch_pg_url)
    up = _river("migrate-up", "--database-url", url)
    assert up.returncode == 0, up.stderr
    with Migrator(scratch_pg_url) as m:
        versions = m.get_versions()
    assert len(versions) >= 6 and versions == sorted(versions)
    assert len(up.stdout.splitlines()) == len(versions)
    down = _river("migrate-down", "--database-url", url, "--max-steps", str(len(versions)))
    assert down.returncode == 0, down.stderr
    assert len(down.stdout.splitlines()) == len(versions)
    with Migrator(scratch_pg_url) as m:
        assert m.get_versions() == []
    again = _river("migrate-up", "--database-url", url)
    assert again.returncode == 0, again.stderr
    listed = _river("migrate-list", "--database-url", url)
    assert listed.returncode == 0 and f"{versions[-1]:03d}" in listed.stdout


@pytest.mark.parametrize("driver", ["sync", "trio"])
def test_river_bench_burns_down_through_transaction_pooling(
        scratch_pg_url: str, pgbouncer: Any, driver: str, short_probe_river: list[str]) -> None:
    import json

    bench = _river("bench", "--database-url", pgbouncer.url(scratch_pg_url), "--num-total-jobs", "300",
                   "--driver", driver, "--json", "--wipe", command=short_probe_river)
    assert bench.returncode == 0, bench.stderr
    result = json.loads(bench.stdout.strip().splitlines()[-1])
    assert result["jobs"] == 300 and result["jobs_per_sec"] > 0
    assert result["client_cpu_us_per_job"] > 0
    # Behind transaction pooling the bench's client polls, and says so once.
    assert bench.stderr.count("LISTEN/NOTIFY does not work") == 1
    # ... after the short probe (the warning gives the wait), not River's 2 s.
    assert f"did not arrive within {TRANSACTION_POOL_PROBE_TIMEOUT:.1f} s" in bench.stderr
    with psycopg.connect(scratch_pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM river_job WHERE state <> 'completed'").fetchone() == (0,)
