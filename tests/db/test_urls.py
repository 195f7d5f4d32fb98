"""The one URL parser (river_db.urls): every accepted form, and the refusals."""

from __future__ import annotations

import pytest

from river_db.urls import (
    DEFAULT_SQLITE_FILE,
    ENV_DATABASE_URL,
    MEMORY,
    default_database_url,
    dialect_of_url,
    is_plain_file_path,
    parse_database_url,
    postgres_conninfo,
    sqlite_file_path,
    sqlite_path,
)
from river_protocol.errors import ValidationError


@pytest.mark.parametrize(
    ("text", "dialect", "conninfo", "path"),
    [
        ("postgres://h/db", "postgres", "postgres://h/db", ""),
        ("postgresql://u@h:5432/db?sslmode=off", "postgres", "postgresql://u@h:5432/db?sslmode=off", ""),
        ("postgresql+psycopg://u@h/db", "postgres", "postgresql://u@h/db", ""),
        ("POSTGRESQL://h/db", "postgres", "postgresql://h/db", ""),
        ("sqlite://rel/x.db", "sqlite", "", "rel/x.db"),
        ("sqlite:///abs/x.db", "sqlite", "", "/abs/x.db"),
        ("sqlite+pysqlite:///abs/x.db", "sqlite", "", "/abs/x.db"),
        ("sqlite://", "sqlite", "", MEMORY),
        ("sqlite://:memory:", "sqlite", "", MEMORY),
        ("sqlite:memory.db", "sqlite", "", "memory.db"),
        (":memory:", "sqlite", "", MEMORY),
        ("./jobs", "sqlite", "", "./jobs"),
        ("/var/lib/app/river", "sqlite", "", "/var/lib/app/river"),
        ("jobs.sqlite", "sqlite", "", "jobs.sqlite"),
        ("jobs.SQLITE3", "sqlite", "", "jobs.SQLITE3"),
        ("jobs.db", "sqlite", "", "jobs.db"),
    ],
)
def test_accepted_forms(text: str, dialect: str, conninfo: str, path: str) -> None:
    url = parse_database_url(text)
    assert (url.dialect, url.conninfo, url.path, url.text) == (dialect, conninfo, path, text)
    assert dialect_of_url(text) == dialect
    assert url.in_memory == (path == MEMORY)


@pytest.mark.parametrize("text", ["garbage", "river", "jobs.txt", "", "   "])
def test_a_bare_word_is_not_a_database(text: str) -> None:
    with pytest.raises(ValidationError, match=r"postgres://.*sqlite://.*\.sqlite3"):
        parse_database_url(text)


def test_other_schemes_are_refused_with_the_accepted_forms() -> None:
    with pytest.raises(ValidationError, match=r"unsupported database URL 'mysql'://\.\.\.: use postgres://"):
        parse_database_url("mysql://h/db")


def test_sqlite_query_parameters_are_refused() -> None:
    with pytest.raises(ValidationError, match="query parameters are not supported"):
        parse_database_url("sqlite://x.db?mode=ro")


def test_plain_file_path_rule() -> None:
    assert is_plain_file_path("a/b")
    assert is_plain_file_path("x.sqlite3")
    assert not is_plain_file_path("garbage")


def test_sqlite_path_and_file_path() -> None:
    assert sqlite_path("sqlite://x.db") == "x.db"
    assert sqlite_path("sqlite://") == MEMORY
    with pytest.raises(ValidationError, match="has no file path"):
        sqlite_file_path("sqlite://")
    assert sqlite_file_path("sqlite:///a/b.db") == "/a/b.db"
    with pytest.raises(ValidationError, match="is not a SQLite URL"):
        sqlite_path("postgres://h/db")


def test_postgres_conninfo() -> None:
    assert postgres_conninfo("postgresql+psycopg://u@h/db") == "postgresql://u@h/db"
    with pytest.raises(ValidationError, match="is not a Postgres URL"):
        postgres_conninfo("sqlite://x.db")


def test_default_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_DATABASE_URL, raising=False)
    assert default_database_url() == f"sqlite://{DEFAULT_SQLITE_FILE}"
    monkeypatch.setenv(ENV_DATABASE_URL, "postgres://h/db")
    assert default_database_url() == "postgres://h/db"
