"""``river health``: exit 0 on a migrated database that answers, 1 with the reason otherwise,
on SQLite and Postgres."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from river_db.migrator import Migrator
from river_protocol.migrations import migrations_for
from river_protocol.schema_check import CLIENT_NEEDS_VERSION
from river_tools.cli.health import check_health
from river_tools.cli.main import main


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: a SQLite file with no table, or a fresh Postgres database."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        url: str = request.getfixturevalue("scratch_pg_url")
        return url
    path = tmp_path / "empty.sqlite3"
    sqlite3.connect(path).close()
    return f"sqlite://{path}"


def health(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["health", *argv])
    out = capsys.readouterr()
    assert out.err == ""
    return code, out.out


def test_a_migrated_database_is_healthy(empty_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with Migrator(empty_url) as migrator:
        migrator.migrate_up()
    code, out = health(capsys, "--database-url", empty_url)
    assert code == 0, out
    assert out.startswith("ok: the database answers and River's schema is current (line 'main', version ")
    code, out = health(capsys, "--database-url", empty_url, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True and report["status"] == "ok"
    assert report["applied"] == max(m.version for m in migrations_for(
        "sqlite" if empty_url.startswith("sqlite") else "postgres", "main"))
    assert report["needed"] == CLIENT_NEEDS_VERSION


def test_a_database_at_7_is_healthy_and_told_of_8(empty_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Fleets with River Go v0.43 to v0.47 keep the database at 7, where this River's clients run.
    with Migrator(empty_url) as migrator:
        migrator.migrate_up(target_version=7)
    code, out = health(capsys, "--database-url", empty_url, "--json")
    report = json.loads(out)
    assert code == 0 and report["status"] == "ok" and (report["applied"], report["needed"]) == (7, 7)
    assert report["reason"].endswith("(line 'main', version 7; version 8 can be applied, not needed)")


def test_an_unmigrated_database_is_refused_with_the_fix(
    empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = health(capsys, "--database-url", empty_url)
    assert code == 1
    assert out.startswith("unmigrated: River's tables are missing (no migration of line 'main' applied); "
                          "run `river migrate-up --database-url ")


@pytest.mark.postgres
def test_the_fix_names_the_schema_checked(scratch_pg_url: str) -> None:
    result = check_health(scratch_pg_url, schema="jobs")
    assert result.status == "unmigrated"
    assert result.reason.endswith(f"run `river migrate-up --database-url {scratch_pg_url} --schema jobs`")


def test_an_old_schema_is_refused_with_both_versions(
    empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    needed = CLIENT_NEEDS_VERSION
    with Migrator(empty_url) as migrator:
        migrator.migrate_up(target_version=needed - 1)
    code, out = health(capsys, "--database-url", empty_url, "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False and report["status"] == "outdated"
    assert (report["applied"], report["needed"]) == (needed - 1, needed)
    assert f"at version {needed - 1} of line 'main'; this River needs version {needed}" in report["reason"]


def test_a_missing_sqlite_file_is_unreachable_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.sqlite3"
    code, out = health(capsys, "--database-url", f"sqlite://{missing}")
    assert code == 1
    assert out.startswith(f"unreachable: no SQLite database at {missing}")
    assert not missing.exists()


def test_an_unreachable_postgres_is_reported_within_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1 on the loopback refuses at once: nothing listens there.
    url = "postgresql://postgres:secret@127.0.0.1:1/test"
    code, out = health(capsys, "--database-url", url, "--timeout", "2")
    assert code == 1
    assert out.startswith("unreachable: could not connect to the database: ")
    assert "secret" not in out  # the password never reaches a probe's log


def test_check_health_reports_what_it_checked(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path}/jobs.sqlite3"
    with Migrator(url) as migrator:
        migrator.migrate_up()
    result = check_health(url)
    assert result.ok and result.line == "main" and result.database == url
    assert (result.applied, result.needed) == (8, 7)


def test_bad_flags_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "--timeout", "0"]) == 2
    assert main(["health", "--database-url", "mysql://x"]) == 2
    assert main(["health", "--line", "nope", "--database-url", "sqlite://x.sqlite3"]) == 2


def test_a_postgres_that_never_answers_is_unreachable_after_the_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A listening socket nobody accepts from: the TCP handshake completes, Postgres never speaks.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        started = time.monotonic()
        code, out = health(capsys, "--database-url", f"postgresql://postgres@127.0.0.1:{port}/test",
                           "--timeout", "1")
        took = time.monotonic() - started
    assert code == 1 and out.startswith("unreachable: could not connect to the database: ")
    assert took < 10  # libpq's connect_timeout (2 s at least), not TCP's minutes
