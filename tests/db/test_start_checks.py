"""What a client checks before it opens a database and when it starts (river_db.start_checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from river_db.start_checks import check_schema, database_url_of, refuse_missing_sqlite_file
from river_db.urls import missing_sqlite_file, redact_url
from river_protocol.errors import DatabaseNotFoundError, DatabaseNotMigratedError


def test_a_missing_sqlite_file_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite3"
    for given in (f"sqlite://{path}", str(path), path):
        with pytest.raises(DatabaseNotFoundError) as caught:
            refuse_missing_sqlite_file(given)
        assert not path.exists()
        assert isinstance(caught.value, FileNotFoundError)
        assert isinstance(caught.value, DatabaseNotMigratedError)
        assert f"no SQLite database at {path}" in str(caught.value)
        assert "river migrate-up --database-url " in str(caught.value)
        assert caught.value.missing_versions == (1, 2, 3, 4, 5, 6, 7)


def test_existing_files_memory_and_postgres_pass(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite3"
    path.touch()
    for given in (f"sqlite://{path}", path, "sqlite://:memory:", "postgresql://localhost/app", object()):
        refuse_missing_sqlite_file(given)
    assert missing_sqlite_file(f"sqlite://{tmp_path}/nope.db") == f"{tmp_path}/nope.db"
    assert missing_sqlite_file("sqlite://:memory:") is None
    assert missing_sqlite_file("postgresql://localhost/app") is None


def test_the_url_in_the_fix_hides_the_password() -> None:
    assert redact_url("postgresql://app:s3cret@db/app") == "postgresql://app:***@db/app"
    assert redact_url("postgresql://app@db/app") == "postgresql://app@db/app"
    assert redact_url("app.sqlite3") == "app.sqlite3"
    assert database_url_of(Path("/var/app.db")) == "sqlite:///var/app.db"
    assert database_url_of(object()) is None
    with pytest.raises(DatabaseNotMigratedError) as caught:
        check_schema("postgres", [1, 2], "postgresql://app:s3cret@db/app", None)
    assert "s3cret" not in str(caught.value) and "postgresql://app:***@db/app" in str(caught.value)
    check_schema("postgres", range(1, 8), "postgresql://app:s3cret@db/app", None)
