"""A client on a database River's migrations never ran on (or an older schema, or a SQLite file
that does not exist) refuses to start with a typed error naming what is missing and the fix, and
leaves nothing running (issue 29 §2), on every client."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from river_db.migrator import Migrator
from river_protocol.errors import DatabaseNotFoundError, DatabaseNotMigratedError, RiverError
from river_protocol.lifecycle import ClientState
from tests.conftest import create_scratch_pg_database, drop_scratch_pg_database
from tests.drivers.behaviour.support import fast_client
from tests.drivers.harness import Harness
from tests.drivers.test_client_support import Task


@pytest.fixture(params=["postgres", "sqlite"], name="unmigrated_url")
def unmigrated_url_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An existing database without River's tables: a new Postgres database or an empty SQLite file."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        url = create_scratch_pg_database()
        try:
            yield url
        finally:
            drop_scratch_pg_database(url)
    else:
        path = tmp_path / "empty.sqlite3"
        path.touch()
        yield f"sqlite://{path}"


def _river_threads() -> set[threading.Thread]:
    """The client's own threads (the async backend's idle statement threads are a cache, not the
    client's: they outlive any one client)."""
    return {t for t in threading.enumerate()
            if t.name.startswith(("producer-", "completer", "river")) and t.name != "river-async-db"}


def _refused(h: Harness, url: str, error: type[RiverError] = DatabaseNotMigratedError) -> RiverError:
    before = _river_threads()
    client = None
    with pytest.raises(error) as caught:
        # river_sync opens its database when made (a missing file is refused there); the async
        # clients when they start.
        client = fast_client(h, url, h.workers(lambda args: None, Task))
        client.start()
    if client is not None:
        assert client.state is ClientState.STOPPED
    assert _river_threads() <= before  # nothing left running
    return caught.value


def test_an_unmigrated_database_is_refused_with_the_missing_tables_and_the_fix(
        h: Harness, unmigrated_url: str) -> None:
    error = _refused(h, unmigrated_url)
    assert type(error) is DatabaseNotMigratedError
    text = str(error)
    assert "River's tables are missing" in text
    assert "river_job" in text and "river_queue" in text and "river_migration" in text
    assert f"river migrate-up --database-url {unmigrated_url}" in text
    assert set(error.missing_tables) >= {"river_job", "river_queue", "river_leader", "river_migration"}
    assert error.applied_versions == () and error.missing_versions[0] == 1
    # Once migrated, the same database starts.
    with Migrator(unmigrated_url) as migrator:
        migrator.migrate_up()
    with fast_client(h, unmigrated_url, h.workers(lambda args: None, Task)) as client:
        assert client.state is ClientState.STARTED


def test_an_older_schema_is_refused_with_the_versions(h: Harness, unmigrated_url: str) -> None:
    with Migrator(unmigrated_url) as migrator:
        migrator.migrate_up(target_version=6)
    error = _refused(h, unmigrated_url)
    assert "version 6 is applied, version 7 is needed" in str(error)
    assert "river_notification" in str(error) and "river migrate-up" in str(error)
    assert (error.applied_versions, error.missing_versions, error.required_version) == (  # type: ignore[attr-defined]
        (1, 2, 3, 4, 5, 6), (7,), 7)


def test_a_database_at_7_starts_as_one_at_8_does(h: Harness, unmigrated_url: str) -> None:
    # 7 is River v0.43's schema, where fleets with River Go v0.43 to v0.47 keep the database;
    # River's 8 only changes how SQLite numbers new jobs, so a client needs 7 and takes 8.
    for version in (7, 8):
        with Migrator(unmigrated_url) as migrator:
            migrator.migrate_up(target_version=version)
        with fast_client(h, unmigrated_url, h.workers(lambda args: None, Task)) as client:
            assert client.state is ClientState.STARTED


def test_an_insert_only_client_is_refused_too(h: Harness, unmigrated_url: str) -> None:
    with pytest.raises(DatabaseNotMigratedError):
        h.client(unmigrated_url).start()


def test_a_missing_sqlite_file_is_refused_and_not_created(h: Harness, tmp_path: Path) -> None:
    path = tmp_path / "nowhere.sqlite3"
    error = _refused(h, f"sqlite://{path}", DatabaseNotFoundError)
    assert not path.exists()
    assert str(path) in str(error) and f"river migrate-up --database-url sqlite://{path}" in str(error)
    assert isinstance(error, FileNotFoundError) and isinstance(error, DatabaseNotMigratedError)
    # As a Path too.
    with pytest.raises(DatabaseNotFoundError):
        client = h.client(path, queues={}, workers=None)
        client.start()
    assert not os.path.exists(path)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_async_with_raises_the_error_itself(backend: str, tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite3"
    path.touch()

    async def main() -> None:
        if backend == "trio":
            from river_trio import Client
        else:
            from river_asyncio import Client  # type: ignore[assignment]
        client = Client(f"sqlite://{path}")
        with pytest.raises(DatabaseNotMigratedError, match="River's tables are missing"):
            async with client:
                raise AssertionError("started")
        assert client.state is ClientState.STOPPED

    anyio.run(main, backend=backend)
