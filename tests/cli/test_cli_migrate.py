"""The `river` migration commands, called in-process through ``main`` (plus one real subprocess)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import psycopg
import pytest

from river_db.migrator import Migrator
from river_tools.cli import main as cli
from river_tools.cli.main import main

RIVER = Path(sys.executable).with_name("river")


@pytest.fixture
def url(sqlite_path: str) -> str:
    return f"sqlite://{sqlite_path}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def versions(url: str) -> list[int]:
    with Migrator(url) as m:
        return m.get_versions()


# ---------------------------------------------------------------- migrate-up / down


def test_migrate_up_applies_everything_and_reports(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, err = run(capsys, "migrate-up", "--database-url", url)
    assert code == 0 and err == f"SQLite database {url.removeprefix('sqlite://')} (created)\n"
    lines = out.splitlines()
    assert len(lines) == 8
    assert lines[0].startswith("applied migration 001 [up] create river migration ")
    assert lines[6].startswith(
        "applied migration 007 [up] notification outbox sqlite jsonb and sql cleanup ["
    )
    assert lines[7].startswith("applied migration 008 [up] job id autoincrement ")
    assert versions(url) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert run(capsys, "migrate-up", "--database-url", url)[1] == "no migrations to apply\n"


@pytest.mark.parametrize("dialect", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_down_to_7_and_up_to_8_again(
    capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest, dialect: str
) -> None:
    # River Go v0.43 to v0.47 stay at 7: `--target-version 7` takes a database back there.
    url = request.getfixturevalue("url" if dialect == "sqlite" else "scratch_pg_url")
    run(capsys, "migrate-up", "--database-url", url)
    code, out, _ = run(capsys, "migrate-down", "--database-url", url, "--target-version", "7")
    assert code == 0 and out.startswith("applied migration 008 [down] job id autoincrement [")
    assert versions(url) == [1, 2, 3, 4, 5, 6, 7]
    code, out, err = run(capsys, "validate", "--database-url", url)
    assert code == 1 and "unapplied migrations: [8]" in err  # as River's newest CLI says
    code, out, _ = run(capsys, "migrate-up", "--database-url", url, "--target-version", "8")
    assert code == 0 and out.startswith("applied migration 008 [up]") and versions(url)[-1] == 8


def test_river_pro_refusal_exits_1_with_its_message(capsys: pytest.CaptureFixture[str], url: str) -> None:
    run(capsys, "migrate-up", "--database-url", url, "--target-version", "7")
    with Migrator(url) as m:
        m.conn.execute("CREATE TABLE river_workflow (id integer PRIMARY KEY)")  # River Pro's, as a stand-in
    code, out, err = run(capsys, "migrate-up", "--database-url", url)
    assert code == 1 and out == "" and "Traceback" not in err
    assert "migration 008 [up] refused: River Pro's schema is installed (river_workflow)" in err
    assert versions(url) == [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("direction", ["up", "down"])
def test_dry_run_reports_the_river_pro_refusal_as_the_run_does(
    capsys: pytest.CaptureFixture[str], url: str, direction: str
) -> None:
    run(capsys, "migrate-up", "--database-url", url, "--target-version", "7" if direction == "up" else "8")
    with Migrator(url) as m:
        m.conn.execute("CREATE TABLE river_job_sequence (id integer PRIMARY KEY)")  # a River Pro stand-in
    target = "8" if direction == "up" else "7"
    dry = run(capsys, f"migrate-{direction}", "--database-url", url, "--target-version", target, "--dry-run")
    real = run(capsys, f"migrate-{direction}", "--database-url", url, "--target-version", target)
    assert dry == real
    code, out, err = dry
    assert code == 1 and out == "" and "Traceback" not in err
    assert f"migration 008 [{direction}] refused: River Pro's schema is installed (river_job_sequence)" in err
    assert versions(url)[-1] == (7 if direction == "up" else 8)


def test_max_steps_and_target_version(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, _ = run(capsys, "migrate-up", "--database-url", url, "--max-steps", "2")
    assert code == 0 and [line.split()[2] for line in out.splitlines()] == ["001", "002"]
    code, out, _ = run(capsys, "migrate-up", "--database-url", url, "--target-version", "4")
    assert code == 0 and versions(url) == [1, 2, 3, 4]
    code, out, _ = run(capsys, "migrate-up", "--database-url", url, "--max-steps", "5")
    assert out.splitlines()[-1] == "no more migrations to apply"
    code, out, _ = run(capsys, "migrate-down", "--database-url", url)
    assert code == 0 and versions(url) == [1, 2, 3, 4, 5, 6, 7]
    code, out, _ = run(capsys, "migrate-down", "--database-url", url, "--target-version", "2")
    assert code == 0 and versions(url) == [1, 2]
    code, out, _ = run(capsys, "migrate-down", "--database-url", url, "--target-version", "0")
    assert code == 0 and versions(url) == []


def test_dry_run_with_show_sql_prints_sql_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    code, out, _ = run(capsys, "migrate-up", "--database-url", url, "--dry-run", "--show-sql")
    assert code == 0
    assert "migration 001 [up] [DRY RUN]" in out
    assert "-" * 80 + "\n-- River main migration 001 [up]\n" in out
    assert "CREATE TABLE river_migration (" in out
    assert versions(url) == []


def test_down_target_not_applied_is_an_operational_error(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    run(capsys, "migrate-up", "--database-url", url, "--target-version", "3")
    code, out, err = run(capsys, "migrate-down", "--database-url", url, "--target-version", "5")
    assert code == 1 and out == ""
    assert "can't migrate down to version 5" in err and "Traceback" not in err


def test_failed_migration_exits_1_with_message(capsys: pytest.CaptureFixture[str], url: str) -> None:
    run(capsys, "migrate-up", "--database-url", url, "--target-version", "1")
    with Migrator(url) as m:
        m.conn.execute("CREATE TABLE river_leader (x int)")
    code, _, err = run(capsys, "migrate-up", "--database-url", url)
    assert code == 1
    assert "error applying version 002 [UP]" in err and "Traceback" not in err


# ---------------------------------------------------------------- list / validate


def test_migrate_list_marks_the_current_version(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, _ = run(capsys, "migrate-list", "--database-url", url)
    assert code == 0 and out.splitlines()[0] == "001 create river migration"
    run(capsys, "migrate-up", "--database-url", url, "--target-version", "2")
    out = run(capsys, "migrate-list", "--database-url", url)[1].splitlines()
    assert out[:3] == [
        "  001 create river migration", "* 002 initial schema", "  003 river job tags non null",
    ]
    assert len(out) == 8


def test_validate_exit_status(capsys: pytest.CaptureFixture[str], url: str) -> None:
    run(capsys, "migrate-up", "--database-url", url, "--max-steps", "4")
    code, _, err = run(capsys, "validate", "--database-url", url)
    assert code == 1 and "unapplied migrations: [5, 6, 7, 8]" in err and "river migrate-up" in err
    run(capsys, "migrate-up", "--database-url", url)
    code, out, _ = run(capsys, "validate", "--database-url", url)
    assert code == 0 and "up to date" in out


# ---------------------------------------------------------------- migrate-get


def test_migrate_get_versions_and_directions(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "migrate-get", "--version", "1,2", "--version", "3", "--up", "--dialect", "sqlite"
    )
    assert code == 0
    headers = [line for line in out.splitlines() if line.startswith("-- River ")]
    assert headers == [f"-- River main migration 00{v} [up]" for v in (1, 2, 3)]
    assert "CREATE TABLE river_migration (" in out and "TEMPLATE" not in out

    out = run(capsys, "migrate-get", "--all", "--down", "--exclude-version", "1",
              "--database-url", "postgres://localhost/x")[1]
    headers = [line for line in out.splitlines() if line.startswith("-- River ")]
    assert headers == [f"-- River main migration 00{v} [down]" for v in (8, 7, 6, 5, 4, 3, 2)]
    assert "DROP TABLE river_notification;" in out  # Postgres flavour

    out = run(capsys, "migrate-get", "--version", "8", "--up", "--dialect", "sqlite", "--schema", "alt")[1]
    assert 'CREATE TABLE "alt".river_job (\n    id integer PRIMARY KEY AUTOINCREMENT,' in out
    assert 'FROM "alt".sqlite_master' in out and "RAISE(ABORT" in out

    out = run(capsys, "migrate-get", "--version", "5", "--up", "--dialect", "postgres", "--schema", "alt")[1]
    assert "to_regclass('\"alt\".river_migration')" in out


def test_migrate_get_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "migrate-get", "--version", "3")
    assert code == 2 and "--up --down" in err
    code, _, err = run(capsys, "migrate-get", "--version", "3", "--up", "--down")
    assert code == 2
    code, _, err = run(capsys, "migrate-get", "--version", "9", "--up", "--dialect", "sqlite")
    assert code == 2 and "unknown migration version(s) [9]" in err
    code, _, err = run(capsys, "migrate-get", "--version", "x", "--up")
    assert code == 2 and "invalid version list" in err


# ---------------------------------------------------------------- flags, defaults and errors


def test_unknown_line_is_a_usage_error(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, _, err = run(capsys, "migrate-up", "--database-url", url, "--line", "mian")
    assert code == 2 and "migration line does not exist: 'mian' (did you mean 'main'?)" in err
    assert versions(url) == []


def test_bad_values_are_usage_errors(capsys: pytest.CaptureFixture[str], url: str) -> None:
    assert run(capsys, "migrate-up", "--database-url", "mysql://x")[0] == 2
    code, _, err = run(capsys, "migrate-up", "--database-url", url, "--target-version", "12")
    assert code == 2 and "not a River migration version" in err
    code, _, err = run(capsys, "migrate-up", "--database-url", url, "--schema", "no good")
    assert code == 2 and "invalid schema name" in err
    assert run(capsys, "migrate-up", "--max-steps", "lots")[0] == 2
    assert run(capsys)[0] == 2
    assert run(capsys, "frobnicate")[0] == 2


def test_unreachable_postgres_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "migrate-list", "--database-url", "postgresql://u:secret@127.0.0.1:1/x")
    assert code == 1 and "could not open the database" in err
    assert "secret" not in err and "RIVER_DATABASE_URL" in err


def test_default_database_and_env(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RIVER_DATABASE_URL", raising=False)
    assert run(capsys, "migrate-up", "--max-steps", "1")[0] == 0
    assert versions(str(tmp_path / "river.sqlite3")) == [1]
    monkeypatch.setenv("RIVER_DATABASE_URL", f"sqlite://{tmp_path / 'env.db'}")
    assert run(capsys, "migrate-up", "--max-steps", "2")[0] == 0
    assert versions(str(tmp_path / "env.db")) == [1, 2]


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "migrate-up" in out and "migrate-get" in out and "validate" in out
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("river ")


def test_command_modules_plug_in(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("river_test_cli_hello")

    def register(sub):  # type: ignore[no-untyped-def]
        p = sub.add_parser("hello", help="say hello")
        cli.add_database_flags(p)
        p.set_defaults(func=lambda args: print("hello", args.schema) or 0)

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "river_test_cli_hello", module)
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("river_test_cli_hello", "river_tools.cli.does_not_exist"))
    assert run(capsys, "hello", "--schema", "s") == (0, "hello s\n", "")


# ---------------------------------------------------------------- Postgres and the installed script


@pytest.mark.postgres
def test_postgres_with_schema(capsys: pytest.CaptureFixture[str], scratch_pg_url: str) -> None:
    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA alt")
    args = ("--database-url", scratch_pg_url, "--schema", "alt")
    assert run(capsys, "validate", *args)[0] == 1
    code, out, _ = run(capsys, "migrate-up", *args)
    assert code == 0 and out.count("applied migration") == 8
    assert run(capsys, "validate", *args)[0] == 0
    with psycopg.connect(scratch_pg_url) as conn:
        query = "SELECT tablename FROM pg_tables WHERE schemaname = 'alt' ORDER BY 1"
        tables = conn.execute(query).fetchall()
    assert [t[0] for t in tables] == [
        "river_job", "river_leader", "river_migration", "river_notification", "river_queue",
    ]
    assert run(capsys, "migrate-down", *args, "--target-version", "-1")[0] == 0
    assert run(capsys, "validate", *args)[0] == 1


def test_installed_script(tmp_path: Path) -> None:
    db = tmp_path / "script.db"
    done = subprocess.run(
        [str(RIVER), "migrate-up", "--database-url", f"sqlite://{db}"],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("applied migration") == 8
    bad = subprocess.run(
        [str(RIVER), "migrate-up", "--database-url", f"sqlite://{db}", "--line", "nope"],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert bad.returncode == 2 and "migration line does not exist" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("migrate-up",),
        ("migrate-get", "--version", "1", "--up"),
        ("validate",),
        ("jobs", "list"),
        ("queues", "list"),
        ("bench", "--num-total-jobs", "10"),
    ],
)
def test_a_bare_word_database_url_is_a_usage_error_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv, "--database-url", "garbage")
    assert code == 2, (out, err)
    assert "not a database URL: 'garbage'" in err and "sqlite://" in err and ".sqlite3" in err
    assert list(tmp_path.iterdir()) == []


def test_a_plain_file_path_is_still_a_sqlite_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "migrate-up", "--database-url", "jobs.sqlite3")
    assert code == 0, err
    assert versions("sqlite://jobs.sqlite3") == [1, 2, 3, 4, 5, 6, 7, 8]


def test_migrate_up_names_the_absolute_sqlite_file_it_opened(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sqlite://name is relative to the working directory; the message gives the absolute path,
    # and says when the file was created, so `sqlite:///x.sqlite3` (that is /x.sqlite3) is no surprise.
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "migrate-up", "--database-url", "sqlite://jobs.sqlite3", "--max-steps", "1")
    assert code == 0 and err == f"SQLite database {tmp_path / 'jobs.sqlite3'} (created)\n"
    code, _, err = run(capsys, "migrate-up", "--database-url", "sqlite://jobs.sqlite3")
    assert code == 0 and err == f"SQLite database {tmp_path / 'jobs.sqlite3'}\n"
    code, _, err = run(capsys, "migrate-down", "--database-url", str(tmp_path / "jobs.sqlite3"))
    assert code == 0 and err == f"SQLite database {tmp_path / 'jobs.sqlite3'}\n"
    assert versions(f"sqlite://{tmp_path / 'jobs.sqlite3'}") == [1, 2, 3, 4, 5, 6, 7]
