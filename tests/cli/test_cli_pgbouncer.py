"""`river migrate-up` / `migrate-down` through a real PgBouncer in transaction pooling mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from river_db.migrator import Migrator

pytestmark = pytest.mark.postgres

RIVER = Path(sys.executable).with_name("river")


def _river(*argv: str) -> subprocess.CompletedProcess[str]:
    # The console script of this checkout (PYTHONPATH carries it into the subprocess).
    command = [str(RIVER)] if RIVER.exists() else [sys.executable, "-m", "river_tools.cli.main"]
    return subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ})


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
