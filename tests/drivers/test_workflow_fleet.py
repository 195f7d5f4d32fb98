"""The workflow fleet (``workflow_fleet.py``) at suite size: 120 tasks of random shape, three
processes (sync, trio, asyncio) on Postgres, the trio one SIGKILLed mid-run, SQL checks."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from river_db.migrator import Migrator
from tests.drivers.workflow_fleet import main, random_dag, run_fleet

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_fleet_with_a_sigkill(scratch_pg_url: str, tmp_path: Path) -> None:
    with Migrator(scratch_pg_url) as migrator:
        migrator.migrate_up()
    result = run_fleet(scratch_pg_url, tmp_path, tasks=120, seed=3, kill="trio", deadline=90.0)
    assert result.tasks == 120 and result.killed == "trio"
    assert result.rescued >= 1  # the kill landed while the victim ran a task, which ran again


def test_random_dag_shape() -> None:
    shape = random_dag(100, random.Random(1))
    assert [name for name, _, _ in shape] == [f"t{i}" for i in range(100)]
    for i, (_, ms, deps) in enumerate(shape):
        assert 5 <= ms <= 20 and len(deps) <= 3
        assert all(i - 30 <= int(d[1:]) < i for d in deps)
    assert any(deps for _, _, deps in shape) and not shape[0][2]


def test_script_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--kill", "go"])
    assert exited.value.code == 2 and "invalid choice" in capsys.readouterr().err
