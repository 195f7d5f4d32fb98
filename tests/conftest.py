"""Shared database fixtures: real Postgres and real SQLite, never mocks.

Postgres comes from RIVER_TEST_DATABASE_URL (default: the local server's
``test`` database). Each user of ``scratch_pg_url`` gets its own database,
created from template0 and dropped afterwards, so tests can migrate freely.
When the server is unreachable the Postgres tests skip, except under CI
(``CI`` set), where they fail: CI must never pass without running them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings

# CI runs property tests derandomized, so a run is reproducible; locally they explore.
settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

_T = TypeVar("_T")


def costly_examples(test: _T) -> _T:
    """For a property test whose examples are costly to draw (a consistent one-state job row
    takes ~35 ms): CI draws 25, so the suite keeps to its budget; locally the profile's 100
    keep exploring. Put it above ``@given``."""
    return settings(max_examples=25)(test) if os.environ.get("CI") else test


DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def pg_base_url() -> str:
    return os.environ.get("RIVER_TEST_DATABASE_URL", DEFAULT_PG_URL)


def _with_dbname(url: str, dbname: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))


def _admin_connect():  # type: ignore[no-untyped-def]
    import psycopg

    try:
        return psycopg.connect(pg_base_url(), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Postgres unreachable in CI at {pg_base_url()}: {exc}")
        pytest.skip(f"Postgres unreachable at {pg_base_url()}: {exc}")


def create_scratch_pg_database() -> str:
    """Create an empty database and return its URL (caller drops it with ``drop_scratch_pg_database``)."""
    name = "river_t_" + uuid.uuid4().hex[:12]
    with _admin_connect() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return _with_dbname(pg_base_url(), name)


def drop_scratch_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1].split("?")[0]
    with _admin_connect() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def scratch_pg_url() -> Iterator[str]:
    """A fresh, empty Postgres database for one test."""
    url = create_scratch_pg_database()
    try:
        yield url
    finally:
        drop_scratch_pg_database(url)


@pytest.fixture(scope="module")
def module_pg_url() -> Iterator[str]:
    """A fresh, empty Postgres database shared by one test module."""
    url = create_scratch_pg_database()
    try:
        yield url
    finally:
        drop_scratch_pg_database(url)


def _start_pgbouncer(pool_mode: str) -> Iterator[object]:
    from tests.pgbouncer import PgBouncer, PgBouncerUnavailable

    try:
        bouncer = PgBouncer(pg_base_url(), pool_mode=pool_mode)
    except PgBouncerUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PgBouncer unavailable in CI: {exc}")
        pytest.skip(f"PgBouncer unavailable: {exc}")
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[object]:
    """A private PgBouncer in transaction pooling mode in front of the suite's Postgres
    (``tests.pgbouncer.PgBouncer``; ``pgbouncer.url(direct_url)`` goes through it)."""
    yield from _start_pgbouncer("transaction")


@pytest.fixture(scope="session")
def pgbouncer_session() -> Iterator[object]:
    """The same in session pooling mode."""
    yield from _start_pgbouncer("session")


@pytest.fixture
def sqlite_path(tmp_path: Path) -> str:
    """Path of a new (not yet created) SQLite file."""
    return str(tmp_path / "river.sqlite3")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in
               ("scratch_pg_url", "module_pg_url", "migrated_pg_url", "pg_url", "pgbouncer",
                "pgbouncer_session")):
            item.add_marker(pytest.mark.postgres)


_skipped_postgres: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and "postgres" in report.keywords:
        _skipped_postgres.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # CI must never go green with the Postgres half of the suite skipped.
    if os.environ.get("CI") and _skipped_postgres:
        print(f"\n{len(_skipped_postgres)} Postgres tests were skipped under CI:")
        for nodeid in _skipped_postgres[:20]:
            print("  ", nodeid)
        session.exitstatus = 1
