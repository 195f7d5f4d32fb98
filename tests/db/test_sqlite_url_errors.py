"""Errors about a SQLite file say which file each URL spelling means (issue 18.5).

Go River's CLI rule stays: ``sqlite:///name.sqlite3`` is ``/name.sqlite3``. SQLAlchemy
users read three slashes as relative, so an error about a missing file shows the
absolute path it tried and both spellings.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import trio

import river_sync
import river_trio
from river_db.migrator import Migrator
from river_db.sqlite import SQLiteOpenError, connect_sqlite
from river_db.urls import explain_sqlite_path, sqlite_path
from river_protocol.errors import DatabaseNotFoundError, RiverError
from river_tools.cli.main import main


def test_three_slashes_keep_go_rivers_meaning() -> None:
    assert sqlite_path("sqlite:///name.sqlite3") == "/name.sqlite3"
    assert sqlite_path("sqlite://name.sqlite3") == "name.sqlite3"


def test_explain_an_absolute_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert explain_sqlite_path("/name.sqlite3") == (
        f"/name.sqlite3 (sqlite:///name.sqlite3 is the absolute path /name.sqlite3; "
        f"sqlite://name.sqlite3 is name.sqlite3 in the working directory {tmp_path})"
    )


def test_explain_a_relative_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    text = explain_sqlite_path("data/jobs.sqlite3")
    assert text.startswith(f"{tmp_path / 'data' / 'jobs.sqlite3'} (")
    assert "sqlite:///data/jobs.sqlite3 is the absolute path /data/jobs.sqlite3" in text
    assert f"sqlite://data/jobs.sqlite3 is data/jobs.sqlite3 in the working directory {tmp_path}" in text


def test_connect_to_a_missing_directory_names_both_spellings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SQLiteOpenError) as info:
        connect_sqlite("missing/jobs.sqlite3")
    assert isinstance(info.value, RiverError) and isinstance(info.value, OSError)
    message = str(info.value)
    assert str(tmp_path / "missing" / "jobs.sqlite3") in message
    assert "sqlite:///missing/jobs.sqlite3" in message and "sqlite://missing/jobs.sqlite3" in message
    assert "unable to open database file" in message
    assert info.value.__cause__ is not None  # the driver's error, chained
    assert not (tmp_path / "missing").exists()


def test_in_memory_and_working_files_are_unaffected(tmp_path: Path) -> None:
    connect_sqlite(":memory:").close()
    connect_sqlite(str(tmp_path / "ok.sqlite3")).close()
    assert (tmp_path / "ok.sqlite3").exists()


EXPLAINED = r"no-such-dir/jobs\.sqlite3 is the absolute path"


def test_sync_client_and_the_migrator_raise_the_typed_error(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/no-such-dir/jobs.sqlite3"  # absolute: tmp_path starts with /
    # A client opens no SQLite file that is not there (it would have none of River's tables).
    with pytest.raises(DatabaseNotFoundError, match=EXPLAINED):
        river_sync.Client(url)
    with pytest.raises(SQLiteOpenError, match=EXPLAINED):
        Migrator(url)


def test_trio_client_raises_the_typed_error_when_it_opens_the_database(tmp_path: Path) -> None:
    async def enter() -> None:
        async with river_trio.Client(f"sqlite://{tmp_path}/no-such-dir/jobs.sqlite3"):
            pass

    # Refused before it started: the error itself, not a group around it.
    with pytest.raises(DatabaseNotFoundError) as info:
        trio.run(enter)
    assert re.search(EXPLAINED, str(info.value))
    assert not (tmp_path / "no-such-dir").exists()


def test_cli_missing_file_shows_the_path_tried_and_both_spellings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.sqlite3").write_bytes(b"")  # ./jobs.sqlite3 exists; /jobs.sqlite3 is meant
    assert not os.path.exists("/jobs.sqlite3")
    assert main(["jobs", "list", "--database-url", "sqlite:///jobs.sqlite3"]) == 1
    err = capsys.readouterr().err
    assert "no SQLite database at /jobs.sqlite3 (" in err
    assert f"sqlite://jobs.sqlite3 is jobs.sqlite3 in the working directory {tmp_path}" in err
    assert "river migrate-up" in err


def test_cli_migrate_into_a_missing_directory_exits_1_with_the_spellings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["migrate-up", "--database-url", "sqlite://nodir/jobs.sqlite3"]) == 1
    err = capsys.readouterr().err
    assert f"cannot open the SQLite database {tmp_path}/nodir/jobs.sqlite3 (" in err
    assert "sqlite:///nodir/jobs.sqlite3 is the absolute path /nodir/jobs.sqlite3" in err
    assert "check --database-url" in err
