"""The pytest plugin's fixtures, exercised in throwaway pytest runs (pytester)."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Runner = Callable[..., pytest.RunResult]

pytest_plugins = ["pytester"]


@pytest.fixture
def run(pytester: pytest.Pytester, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """``run(*args)``: an inner pytest run with the plugin loaded (by its entry point when installed)."""
    monkeypatch.delenv("RIVER_TEST_DATABASE_URL", raising=False)
    autoloaded = request.config.pluginmanager.has_plugin("river")

    def run_inner(*args: str) -> pytest.RunResult:
        extra = () if autoloaded else ("-p", "river_tools.pytest_plugin")
        return pytester.runpytest_inprocess(*extra, "-p", "no:cacheprovider", *args)

    return run_inner


def test_registered_as_a_pytest11_entry_point() -> None:
    points = importlib.metadata.entry_points(group="pytest11")
    assert any(p.name == "river" and p.value == "river_tools.pytest_plugin" for p in points)


def test_sqlite_url_is_migrated_and_emptied_per_test(pytester: pytest.Pytester, run: Runner) -> None:
    pytester.makepyfile(
        """
        import dataclasses
        from typing import ClassVar
        from river_sync import Client
        from river_sync.testing import require_inserted, require_not_inserted

        @dataclasses.dataclass
        class Ping:
            kind: ClassVar[str] = "ping"
            n: int = 0

        def test_first(river_sqlite_url):
            assert river_sqlite_url.startswith("sqlite:///")
            with Client(river_sqlite_url) as client:
                client.insert(Ping(1))
                assert require_inserted(client, Ping).id == 1

        def test_second_starts_empty(river_sqlite_url):
            with Client(river_sqlite_url) as client:
                require_not_inserted(client, Ping)
                assert client.insert(Ping(2)).job.id == 1  # ids restart too
        """
    )
    result = run("-v")
    result.assert_outcomes(passed=2)


def test_client_uses_the_overridden_workers(pytester: pytest.Pytester, run: Runner) -> None:
    pytester.makeconftest(
        """
        import dataclasses
        from typing import ClassVar
        import pytest
        from river_sync import Workers

        @dataclasses.dataclass
        class Known:
            kind: ClassVar[str] = "known"
            text: str = ""

        @dataclasses.dataclass
        class Unknown:
            kind: ClassVar[str] = "unknown"

        @pytest.fixture
        def river_workers():
            workers = Workers()
            workers.job(Known)(lambda ctx, args: ctx.record_output(args.text.upper()))
            return workers
        """
    )
    pytester.makepyfile(
        """
        import pytest
        from conftest import Known, Unknown
        from river_protocol.errors import ValidationError
        from river_sync import JobState
        from river_sync.testing import require_inserted

        def test_insert_only_client(river_client):
            river_client.insert(Known("a"))
            assert require_inserted(river_client, Known, state=JobState.AVAILABLE).decoded_args == Known("a")
            with pytest.raises(ValidationError, match="not registered"):
                river_client.insert(Unknown())

        def test_inline_client(river_inline_client):
            result = river_inline_client.insert(Known("b"))
            assert result.job.state is JobState.COMPLETED and result.job.metadata["output"] == "B"
        """
    )
    run().assert_outcomes(passed=2)


def test_default_workers_are_empty(pytester: pytest.Pytester, run: Runner) -> None:
    pytester.makepyfile(
        """
        def test_empty(river_workers, river_client):
            assert len(river_workers) == 0
            assert river_client.database.dialect.name == "sqlite"
        """
    )
    run().assert_outcomes(passed=1)


def test_postgres_skipped_without_a_server_setting(pytester: pytest.Pytester, run: Runner) -> None:
    pytester.makepyfile("def test_pg(river_postgres_url):\n    raise AssertionError('not reached')\n")
    result = run("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*set $RIVER_TEST_DATABASE_URL or pass --river-postgres-url*"])


def test_postgres_skipped_when_unreachable(pytester: pytest.Pytester, run: Runner) -> None:
    pytester.makepyfile("def test_pg(river_postgres_url):\n    raise AssertionError('not reached')\n")
    result = run("-rs", "--river-postgres-url=postgresql://postgres@127.0.0.1:1/none")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*Postgres unreachable at postgresql://postgres@127.0.0.1:1/none*"])


@pytest.mark.postgres
def test_postgres_scratch_database(pytester: pytest.Pytester, run: Runner) -> None:
    import psycopg

    from tests.conftest import pg_base_url

    base = pg_base_url()
    try:
        psycopg.connect(base, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres unreachable at {base}: {exc}")
    pytester.makepyfile(
        """
        import dataclasses
        from typing import ClassVar
        import psycopg
        from river_sync import Client
        from river_sync.testing import require_inserted, require_not_inserted

        NAMES = []

        @dataclasses.dataclass
        class Ping:
            kind: ClassVar[str] = "ping"

        def test_first(river_postgres_url):
            NAMES.append(river_postgres_url)
            open("pg_url.txt", "w").write(river_postgres_url)
            assert "/river_pytest_" in river_postgres_url
            with Client(river_postgres_url) as client:
                client.insert(Ping())
                require_inserted(client, Ping)

        def test_second(river_postgres_url):
            assert NAMES == [river_postgres_url]  # one database per session
            with Client(river_postgres_url) as client:
                require_not_inserted(client, Ping)
        """
    )
    run(f"--river-postgres-url={base}").assert_outcomes(passed=2)
    # The scratch database is gone after the session.
    name = Path(pytester.path / "pg_url.txt").read_text().rsplit("/", 1)[1]
    with psycopg.connect(base, autocommit=True) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,)).fetchone()
    assert left == (0,)


# ---------------------------------------------------------------- async fixtures (AnyIO's plugin)

ASYNC_CONFTEST = """
import dataclasses
from typing import ClassVar
import pytest
from river_sync import Workers

@dataclasses.dataclass
class Known:
    kind: ClassVar[str] = "known"
    text: str = ""

@pytest.fixture
def anyio_backend():
    return "{backend}"

@pytest.fixture
def river_workers():
    workers = Workers()

    async def shout(ctx, args):
        ctx.record_output(args.text.upper())

    workers.job(Known)(shout)
    return workers
"""

@pytest.mark.parametrize(("backend", "package"), [("trio", "river_trio"), ("asyncio", "river_asyncio")])
def test_async_fixtures_are_the_backends_client(
    pytester: pytest.Pytester, run: Runner, backend: str, package: str
) -> None:
    pytester.makeconftest(ASYNC_CONFTEST.replace("{backend}", backend))
    pytester.makepyfile(
        """
        import pytest
        import sniffio
        import {package}
        from conftest import Known
        from {package} import JobState
        from {package}.testing import InlineClient, require_inserted, require_not_inserted

        @pytest.mark.anyio
        async def test_insert_only_client(river_async_client):
            assert sniffio.current_async_library() == "{backend}"
            assert type(river_async_client) is {package}.Client
            assert river_async_client.ANYIO_BACKEND == "{backend}"
            await river_async_client.insert(Known("a"))
            job = await require_inserted(river_async_client, Known, state=JobState.AVAILABLE)
            assert job.decoded_args == Known("a")

        @pytest.mark.anyio
        async def test_inline_client(river_async_inline_client):
            assert isinstance(river_async_inline_client, InlineClient)
            result = await river_async_inline_client.insert(Known("b"))
            assert result.job.state is JobState.COMPLETED and result.job.metadata["output"] == "B"

        @pytest.mark.anyio
        async def test_each_test_starts_empty(river_async_client):
            await require_not_inserted(river_async_client, Known)
        """.replace("{package}", package).replace("{backend}", backend)
    )
    run().assert_outcomes(passed=3)


def test_async_client_under_asyncio_without_river_asyncio_fails_clearly(
    pytester: pytest.Pytester, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "river_asyncio", None)  # what a missing package raises
    pytester.makeconftest(ASYNC_CONFTEST.replace("{backend}", "asyncio"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.anyio
        async def test_insert_only_client(river_async_client):
            raise AssertionError("not reached")
        """
    )
    # --assert=plain: the assertion rewriter reads every loaded module's __loader__ when it marks
    # the installed distribution's packages (river_asyncio among them), and this one is None.
    result = run("--assert=plain")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*river_asyncio is not installed: a River async fixture under asyncio needs it*"])
