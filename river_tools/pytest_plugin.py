"""pytest fixtures for code that uses River for Python (loaded automatically once installed).

Fixtures (all names start with ``river_``):

``river_sqlite_url``
    ``sqlite:///<path>``: a SQLite database migrated once per test session and
    emptied (every River table but ``river_migration``) before each test.

``river_postgres_url``
    A Postgres URL: a scratch database created and migrated once per session,
    dropped at its end, emptied before each test. The server comes from
    ``--river-postgres-url`` or ``$RIVER_TEST_DATABASE_URL`` (any database the
    user may ``CREATE DATABASE`` from); the test is skipped when neither is
    set or the server is unreachable.

``river_workers``
    The ``Workers`` bundle the client fixtures use; empty by default.
    Override it in your ``conftest.py``::

        @pytest.fixture
        def river_workers():
            return my_app.jobs.workers

``river_client``
    An insert-only ``river_sync.Client`` on ``river_sqlite_url`` with
    ``river_workers``: insert through it, then check with
    ``river_sync.testing.require_inserted(river_client, MyArgs)``.

``river_inline_client``
    A ``river_sync.testing.InlineClient`` on ``river_sqlite_url``: each insert
    runs its worker at once and the final row is stored.

``river_async_client``
    For ``@pytest.mark.anyio`` tests (AnyIO's pytest plugin): an insert-only
    async client on ``river_sqlite_url`` with ``river_workers``, of the
    running backend: a ``river_trio.Client`` under trio, a
    ``river_asyncio.Client`` under asyncio (imported only then). Check with
    ``await river_trio.testing.require_inserted(river_async_client, MyArgs)``
    (or ``river_asyncio.testing``'s).

``river_async_inline_client``
    The same backend's ``testing.InlineClient`` on ``river_sqlite_url``:
    ``await river_async_inline_client.insert(args)`` runs the worker at once.

Which backends run is AnyIO's ``anyio_backend`` fixture (asyncio by default);
override it to run on trio, or on both::

    @pytest.fixture(params=["trio", "asyncio"])
    def anyio_backend(request):
        return request.param

To run a test against both databases, parametrize your own fixture over
``request.getfixturevalue("river_sqlite_url")`` / ``"river_postgres_url"``.
Disable the plugin with ``-p no:river``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

# The plugin loads with every pytest session; what only fixtures need (migrations,
# drivers, clients) is imported by the fixtures that use it.

ENV_POSTGRES_URL = "RIVER_TEST_DATABASE_URL"
_OPTION = "--river-postgres-url"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("river", "River for Python")
    group.addoption(
        _OPTION, dest="river_postgres_url", default=None,
        help=f"Postgres server for the river_postgres_url fixture (default: ${ENV_POSTGRES_URL})",
    )


# ---------------------------------------------------------------- emptying a database


def _truncate_sqlite(url: str) -> None:
    from river_db.sqlite import connect_sqlite
    from river_db.urls import sqlite_path

    conn = connect_sqlite(sqlite_path(url))
    try:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'river\\_%' ESCAPE '\\' "
            "AND name <> 'river_migration'"
        )]
        conn.execute("BEGIN IMMEDIATE")
        for table in tables:
            conn.execute(f'DELETE FROM "{table}"')
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone():
            conn.execute("DELETE FROM sqlite_sequence")
        conn.execute("COMMIT")
    finally:
        conn.close()


def _truncate_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename LIKE 'river\\_%' AND tablename <> 'river_migration'"
        )]
        if tables:
            conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY")


# ---------------------------------------------------------------- sqlite


@pytest.fixture(scope="session")
def river_sqlite_session_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The session's migrated SQLite database (not emptied between tests; prefer river_sqlite_url)."""
    from river_db.migrator import Migrator

    path = tmp_path_factory.mktemp("river") / "river.sqlite3"
    url = f"sqlite:///{path}"
    with Migrator(url) as migrator:
        migrator.migrate_up()
    return url


@pytest.fixture
def river_sqlite_url(river_sqlite_session_url: str) -> str:
    """A migrated SQLite database with no jobs, queues or leaders left by earlier tests."""
    _truncate_sqlite(river_sqlite_session_url)
    return river_sqlite_session_url


# ---------------------------------------------------------------- postgres


def _with_dbname(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + dbname, parts.query, parts.fragment))


@pytest.fixture(scope="session")
def river_postgres_session_url(pytestconfig: pytest.Config) -> Iterator[str]:
    """The session's migrated scratch Postgres database (not emptied between tests)."""
    import psycopg

    from river_db.migrator import Migrator

    base = pytestconfig.getoption("river_postgres_url") or os.environ.get(ENV_POSTGRES_URL)
    if not base:
        pytest.skip(f"no Postgres for River tests: set ${ENV_POSTGRES_URL} or pass {_OPTION}")
    name = "river_pytest_" + uuid.uuid4().hex[:12]
    try:
        with psycopg.connect(base, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres unreachable at {base}: {exc}")
    url = _with_dbname(base, name)
    try:
        with Migrator(url) as migrator:
            migrator.migrate_up()
        yield url
    finally:
        with psycopg.connect(base, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def river_postgres_url(river_postgres_session_url: str) -> str:
    """A migrated Postgres database with no jobs, queues or leaders left by earlier tests."""
    _truncate_postgres(river_postgres_session_url)
    return river_postgres_session_url


# ---------------------------------------------------------------- clients


@pytest.fixture
def river_workers() -> Any:
    """The Workers bundle of ``river_client`` / ``river_inline_client``: override it to supply yours."""
    from river_sync import Workers

    return Workers()


@pytest.fixture
def river_client(river_sqlite_url: str, river_workers: Any) -> Iterator[Any]:
    """An insert-only client on ``river_sqlite_url`` (not started; closed after the test)."""
    from river_sync import Client

    client = Client(river_sqlite_url, workers=river_workers)
    try:
        yield client
    finally:
        client.stop()


@pytest.fixture
def river_inline_client(river_sqlite_url: str, river_workers: Any) -> Iterator[Any]:
    """An ``InlineClient`` on ``river_sqlite_url``: inserts run their worker at once."""
    from river_sync.testing import InlineClient

    with InlineClient(river_workers, river_sqlite_url) as inline:
        yield inline



# ---------------------------------------------------------------- async clients (AnyIO's pytest plugin)


def _running_package(submodule: str = "") -> Any:
    """The River package (or its ``submodule``) for the event loop running now."""
    import importlib

    import sniffio

    from river_tools.async_runner import DriverUnavailableError, client_package

    backend = sniffio.current_async_library()
    try:
        package = client_package(backend, needed_by=f"a River async fixture under {backend}")
    except ValueError:
        raise pytest.UsageError(f"River's async fixtures run under trio or asyncio, not {backend}") from None
    except DriverUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)
    return importlib.import_module(f"{package.__name__}.{submodule}") if submodule else package


@pytest.fixture
async def river_async_client(river_sqlite_url: str, river_workers: Any) -> AsyncIterator[Any]:
    """An insert-only async client of the running backend on ``river_sqlite_url`` (closed after)."""
    client = _running_package().Client(river_sqlite_url, workers=river_workers)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def river_async_inline_client(river_sqlite_url: str, river_workers: Any) -> AsyncIterator[Any]:
    """The running backend's ``InlineClient`` on ``river_sqlite_url``: inserts run their worker at once."""
    async with _running_package("testing").InlineClient(river_workers, river_sqlite_url) as inline:
        yield inline
