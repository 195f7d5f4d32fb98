"""`river work` with async clients: a river_trio one and a river_asyncio one, in real processes.

Both run real worker processes against SQLite and Postgres, as ``test_cli_work``
does for river_sync. The asyncio app's workers say which event loop runs them
(asyncio's own or uvloop) and how many trio modules the process has loaded: an
asyncio worker process loads none.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from river_protocol.states import JobState
from river_sync import Client
from river_tools import async_runner
from river_tools.cli.main import main
from river_tools.cli.work import (
    UsageError,
    build_client,
    checked_client,
    child_command,
    guess_backend,
    in_memory_sqlite,
    is_client,
)
from tests.cli import test_cli_work as sync_work
from tests.cli.test_cli_work import Hold, Long, Quick, WorkerProcess, expect_count, row, start

# The river_sync tests' fixtures: databases on both dialects, an inserter, and the processes to kill.
db_url, sqlite_url = sync_work.db_url, sync_work.sqlite_url
inserter, processes = sync_work.inserter, sync_work.processes

# What both apps share: the args types, a line writer and the workers (their imports come first).
APP_COMMON = '''

@dataclass
class Quick:
    kind: ClassVar[str] = "quick"
    n: int = 0


@dataclass
class Long:
    kind: ClassVar[str] = "long"


@dataclass
class Hold:
    kind: ClassVar[str] = "hold"


workers = Workers()


def say(text):
    sys.stdout.write(text + "\\n")
    sys.stdout.flush()


# Each app defines where(): which event loop runs the job.
@workers.job(Quick)
async def quick(ctx, args):
    say(f"done {ctx.job.id} {where()}")


@workers.job(Long)
async def long(ctx, args):
    say(f"started {ctx.job.id}")
    try:
        await anyio.sleep_forever()
    finally:
        say(f"cancelled {ctx.job.id}")


@workers.job(Hold)
async def hold(ctx, args):
    say(f"started {ctx.job.id} attempt {ctx.job.attempt} by {ctx.client.client_id} pid {os.getpid()} "
        + where())
    await anyio.sleep_forever()
'''

TRIO_APP = '''
import os
import sys
from dataclasses import dataclass
from typing import ClassVar

import anyio
import sniffio

from river_trio import Client, QueueConfig, Workers
''' + APP_COMMON + '''


def where():
    return f"on {sniffio.current_async_library()}"


QUEUES = {"default": QueueConfig(max_workers=5), "other": QueueConfig(max_workers=7)}
client = Client(os.environ["WORK_APP_DB"], workers=workers, queues=QUEUES)


def make_client(database_url=None):
    return Client(database_url or os.environ["WORK_APP_DB"], workers=workers, queues=QUEUES)


async def amake_client(database_url=None):
    await anyio.sleep(0)  # an async factory may await its setup
    return make_client(database_url)


def one_worker_client():
    return Client(os.environ["WORK_APP_DB"], workers=workers, queues={"default": QueueConfig(max_workers=1)})


async def signals_itself():
    import signal

    os.kill(os.getpid(), signal.SIGTERM)  # before river work has its handlers: recorded, then replayed
    return make_client()


async def invalid_settings():
    return Client(os.environ["WORK_APP_DB"], workers=workers, queues=QUEUES, max_attempts=0)


no_workers_allowed = Client(os.environ["WORK_APP_DB"], workers=workers,
                            queues={"default": QueueConfig(max_workers=0)})  # refused when it starts


async def returns_a_sync_client():
    import river_sync

    return river_sync.Client(os.environ["WORK_APP_DB"])
'''

ASYNCIO_APP = '''
import asyncio
import os
import sys
from dataclasses import dataclass
from typing import ClassVar

import anyio
import sniffio

from river_asyncio import Client, QueueConfig, Workers
''' + APP_COMMON + '''


def where():
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    trio_modules = sum(1 for name in sys.modules if name == "trio" or name.startswith("trio."))
    return f"on {sniffio.current_async_library()} ({loop}); trio modules loaded: {trio_modules}"


QUEUES = {"default": QueueConfig(max_workers=3)}
client = Client(os.environ["WORK_APP_DB"], workers=workers, queues=QUEUES)


async def amake_client(database_url=None):
    await asyncio.sleep(0)  # an async factory may await its setup, in the loop the client runs in
    return Client(database_url or os.environ["WORK_APP_DB"], workers=workers, queues=QUEUES)


def one_worker_client():
    return Client(os.environ["WORK_APP_DB"], workers=workers, queues={"default": QueueConfig(max_workers=1)})
'''


@pytest.fixture
def trio_app(tmp_path: Path) -> Path:
    (tmp_path / "trio_app.py").write_text(TRIO_APP)
    return tmp_path


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """Both apps, ``trio_app`` and ``asyncio_app``, side by side."""
    (tmp_path / "trio_app.py").write_text(TRIO_APP)
    (tmp_path / "asyncio_app.py").write_text(ASYNCIO_APP)
    return tmp_path


def ran_on(backend: str, loop: str = "default") -> str:
    """How a job line of ``backend``'s app ends: the asyncio app also names its loop and says that
    the process loaded no trio module."""
    if backend == "trio":
        return "on trio"
    return f"on asyncio ({'uvloop' if loop == 'uvloop' else 'asyncio'}); trio modules loaded: 0"


# ---------------------------------------------------------------- both backends, in real processes


@pytest.mark.parametrize(("backend", "loop"), [("trio", "default"), ("asyncio", "default"),
                                               ("asyncio", "uvloop")])
@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_an_async_client_works_jobs_on_its_backend_and_stops_softly(
    app_dir: Path, request: pytest.FixtureRequest, inserter: Client, processes: list[WorkerProcess],
    backend: str, loop: str, dialect: str,
) -> None:
    url = request.getfixturevalue("db_url" if dialect == "postgres" else "sqlite_url")
    writer = inserter if dialect == "postgres" else Client(url)
    try:
        before = writer.insert(Quick(1)).job.id
        flags = ("--loop", loop) if loop != "default" else ()
        worker = start(processes, app_dir, url, f"{backend}_app:client", *flags)
        assert f"({backend})" in worker.seen["err"][-1]
        after = writer.insert(Quick(2)).job.id
        for job_id in (before, after):
            worker.expect(f"done {job_id} {ran_on(backend, loop)}")
        worker.signal(signal.SIGINT)
        assert worker.exit_code() == 0
        worker.expect("SIGINT received: stopping after running jobs finish", "err")
        worker.expect("stopped (soft stop)", "err")
        assert row(writer, after).state is JobState.COMPLETED
    finally:
        if writer is not inserter:
            writer.stop()


@pytest.mark.parametrize(("backend", "signum"), [("trio", signal.SIGTERM), ("asyncio", signal.SIGINT)])
def test_a_second_signal_cancels_an_async_job_back_to_available(
    app_dir: Path, db_url: str, inserter: Client, processes: list[WorkerProcess], backend: str,
    signum: signal.Signals,
) -> None:
    long_id = inserter.insert(Long()).job.id
    worker = start(processes, app_dir, db_url, f"{backend}_app:client")
    worker.expect(f"started {long_id}")
    worker.signal(signum)
    worker.expect(f"{signum.name} received: stopping after running jobs finish", "err")
    assert worker.proc.poll() is None  # the soft stop waits for the job
    worker.signal(signum)
    worker.expect(f"cancelled {long_id}")
    assert worker.exit_code() == 0
    worker.expect("stopped (hard stop)", "err")
    back = row(inserter, long_id)
    assert back.state is JobState.AVAILABLE and back.attempt == 0 and back.errors == ()


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_an_async_factory_is_awaited_with_the_database_url_and_narrowed(
    app_dir: Path, sqlite_url: str, tmp_path: Path, processes: list[WorkerProcess], backend: str
) -> None:
    from river_db.migrator import Migrator
    from river_sync import InsertOpts

    other = f"sqlite://{tmp_path}/other.sqlite3"
    with Migrator(other) as migrator:
        migrator.migrate_up()
    inserter = Client(other)
    try:
        wanted = inserter.insert(Quick(), InsertOpts(queue="other")).job.id
        elsewhere = inserter.insert(Quick()).job.id
        worker = start(processes, app_dir, sqlite_url, f"{backend}_app:amake_client",
                       "--database-url", other, "--queues", "other", "--max-workers", "2")
        banner = worker.seen["err"][-1]
        assert f"({backend})" in banner and "other (2 workers)" in banner and "default" not in banner
        worker.expect(f"done {wanted} {ran_on(backend)}")
        worker.signal()
        assert worker.exit_code() == 0
        assert row(inserter, elsewhere).state is JobState.AVAILABLE
    finally:
        inserter.stop()


def test_a_signal_before_the_handlers_is_kept_for_them(
    trio_app: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    worker = WorkerProcess(trio_app, sqlite_url, "trio_app:signals_itself")
    processes.append(worker)
    assert worker.exit_code() == 0  # not killed by the SIGTERM: it became a soft stop
    ready = worker.expect("working ", "err")
    stopping = worker.expect("SIGTERM received: stopping after running jobs finish", "err")
    assert worker.seen["err"].index(ready) < worker.seen["err"].index(stopping)
    worker.expect("stopped (soft stop)", "err")


@pytest.mark.parametrize(("backend", "loop"), [("trio", "default"), ("asyncio", "uvloop")])
def test_processes_run_one_async_client_each_and_stop_in_two_steps(
    app_dir: Path, db_url: str, inserter: Client, processes: list[WorkerProcess], backend: str, loop: str
) -> None:
    ids = [inserter.insert(Hold()).job.id for _ in range(2)]
    flags = ("--loop", loop) if loop != "default" else ()
    worker = WorkerProcess(app_dir, db_url, f"{backend}_app:one_worker_client", "--processes", "2", *flags)
    processes.append(worker)
    n = 2
    while len({line.split(" by ")[1].split()[0] for line in expect_count(worker, "started ", n)}) < 2:
        n += 1  # a claim reconciled under load starts its job again in the same process
    started = [line for line in worker.seen["out"] if "started " in line]
    assert len({line.split(" pid ")[1].split()[0] for line in started}) == 2
    assert all(line.endswith(ran_on(backend, loop)) for line in started), started
    expect_count(worker, "working ", 2, "err")
    worker.signal(signal.SIGTERM)
    expect_count(worker, "SIGTERM received: stopping after running jobs finish", 2, "err")
    assert worker.proc.poll() is None  # the held jobs keep the soft stop waiting
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0
    for job_id in ids:
        back = row(inserter, job_id)
        assert back.state is JobState.AVAILABLE and back.attempt == 0


def test_processes_with_an_async_factory_that_returns_no_client_exit_2(
    trio_app: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    worker = WorkerProcess(trio_app, sqlite_url, "trio_app:returns_a_sync_client", "--processes", "2")
    processes.append(worker)
    assert worker.exit_code() == 2  # the children found it; the supervisor stopped the rest
    worker.expect("exited with a usage error", "err")


def test_processes_refuse_an_in_memory_database_for_a_trio_client(
    trio_app: Path, processes: list[WorkerProcess]
) -> None:
    worker = WorkerProcess(trio_app, "sqlite://:memory:", "trio_app:client", "--processes", "2")
    processes.append(worker)
    assert worker.exit_code() == 2
    worker.expect("in-memory SQLite database exists only inside one process", "err")


# ---------------------------------------------------------------- usage errors (in-process)


@pytest.fixture
def trio_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> Iterator[str]:
    name = f"trio_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(TRIO_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORK_APP_DB", sqlite_url)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    # As in a trio app's process: river_asyncio, which other tests import here, is not loaded
    # (river work guesses a factory's backend from the river packages loaded).
    monkeypatch.delitem(sys.modules, "river_asyncio", raising=False)
    yield name
    sys.modules.pop(name, None)


@pytest.mark.parametrize(("argv", "message"), [
    (["{app}:client", "--backend", "asyncio"], "--backend asyncio: {app}:client is a client for trio"),
    (["{app}:client", "--loop", "uvloop"], "--loop uvloop is an asyncio event loop; a trio client"),
    (["{app}:amake_client", "--backend", "asyncio"],
     "{app}:amake_client() ran in asyncio's event loop but returned a client for trio; pass --backend trio"),
    (["{app}:returns_a_sync_client"],
     "returned a river_sync client (no event loop); make it a plain def"),
    (["{app}:Quick"], "{app}:Quick() returned Quick, not a river_sync, river_trio or river_asyncio Client"),
    (["{app}:invalid_settings"], "{app}:invalid_settings: max_attempts must be between 1 and 32767"),
    (["{app}:no_workers_allowed"], "error: max_workers must be between 1 and 10000, got 0"),
])
def test_async_usage_errors_exit_2(
    trio_module: str, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["work", *[a.format(app=trio_module) for a in argv]])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message.format(app=trio_module) in err


def test_a_sync_client_refuses_backend_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> None:
    name = f"sync_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "import os\nfrom river_sync import Client\nclient = Client(os.environ['WORK_APP_DB'])\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORK_APP_DB", sqlite_url)
    try:
        assert main(["work", f"{name}:client", "--loop", "uvloop"]) == 2
        assert "--loop: " in capsys.readouterr().err
        assert main(["work", f"{name}:client", "--backend", "trio"]) == 2
        assert "is a river_sync client, which runs on threads" in capsys.readouterr().err
    finally:
        sys.modules.pop(name, None)


def test_guess_backend_needs_exactly_one_async_river_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import river_trio

    monkeypatch.setitem(sys.modules, "river_trio", river_trio)
    monkeypatch.delitem(sys.modules, "river_asyncio", raising=False)
    assert guess_backend("app") == "trio"
    monkeypatch.setitem(sys.modules, "river_asyncio", argparse)  # any module: only its presence counts
    with pytest.raises(UsageError, match="loads river_trio and river_asyncio: pass --backend"):
        guess_backend("app")
    monkeypatch.delitem(sys.modules, "river_trio")
    assert guess_backend("app") == "asyncio"
    monkeypatch.delitem(sys.modules, "river_asyncio")
    with pytest.raises(UsageError, match="neither river_trio nor river_asyncio"):
        guess_backend("app")


def test_build_client_returns_an_async_factory_unawaited_and_checks_its_result(trio_module: str) -> None:
    from river_tools.cli.work import load_target

    made = build_client(load_target(f"{trio_module}:amake_client"), "f", {})
    client = anyio.run(lambda: made, backend="trio")  # awaited in the loop it is for
    assert checked_client(client, "f", "trio") is client and is_client(client)
    with pytest.raises(UsageError, match="returned int"):
        checked_client(1, "f", "trio")
    instance = load_target(f"{trio_module}:client")
    assert build_client(instance, "client", {}) is instance


def test_backend_of_and_is_async_client() -> None:
    import river_trio

    client = river_trio.Client("sqlite://:memory:")
    assert async_runner.is_async_client(client) and async_runner.backend_of(client) == "trio"
    assert not async_runner.is_async_client(river_trio.Client)  # the class, not a client
    sync = Client("sqlite://:memory:")
    try:
        assert not async_runner.is_async_client(sync) and is_client(sync)
    finally:
        sync.stop()

    class Other(river_trio.Client):
        ANYIO_BACKEND = "curio"

    with pytest.raises(ValueError, match="ANYIO_BACKEND is 'curio'"):
        async_runner.backend_of(Other("sqlite://:memory:"))
    assert async_runner.backend_options("asyncio", "uvloop") == {"use_uvloop": True}
    assert async_runner.backend_options("trio") == {}
    with pytest.raises(ValueError, match="loop must be one of"):
        async_runner.backend_options("asyncio", "tokio")


def test_in_memory_sqlite_reads_an_async_clients_database_argument(tmp_path: Path) -> None:
    import river_trio

    assert in_memory_sqlite(river_trio.Client("sqlite://:memory:"))
    assert not in_memory_sqlite(river_trio.Client(f"sqlite://{tmp_path}/x.db"))
    assert not in_memory_sqlite(river_trio.Client(tmp_path / "x.db"))
    assert not in_memory_sqlite(river_trio.Client("postgresql://localhost/x"))


def test_child_command_repeats_backend_and_loop() -> None:
    args = argparse.Namespace(target="app:make", log_level="info", queues=None, max_workers=None, tags=None,
                              untagged=False, database_url=None, schema=None, processes=2, default_gc=False,
                              backend="asyncio", loop="uvloop")
    assert child_command(args)[-4:] == ["--backend", "asyncio", "--loop", "uvloop"]


def test_run_until_signalled_stops_softly_then_hard_on_either_backend(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The AnyIO runner itself (river_anyio's, which river_tools uses), in-process, with a client
    double that records its calls and needs a third signal's time to finish its hard stop."""
    import logging
    import os

    from river_anyio.signals import run_until_signalled

    assert async_runner.run_until_signalled is run_until_signalled  # one loop serves both

    class Recorder:
        ANYIO_BACKEND = "trio"

        def __init__(self) -> None:
            self.calls: list[str] = []
            self.stopped = anyio.Event()
            self.finish = anyio.Event()

        async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            await self.stopped.wait()

        async def stop(self, timeout: float | None = None) -> None:
            self.calls.append(f"stop {timeout}")

        async def stop_and_cancel(self) -> None:
            self.calls.append("stop_and_cancel")
            await self.finish.wait()  # a worker that ignores cancellation for a while
            self.stopped.set()

        async def wait(self) -> bool:
            await self.stopped.wait()
            return True

    for backend in async_runner.BACKENDS:
        caplog.clear()

        async def scenario() -> tuple[str, list[str]]:
            client = Recorder()
            async with anyio.create_task_group() as tg:
                result: list[str] = []

                async def runner(*, task_status: anyio.abc.TaskStatus[None]) -> None:
                    result.append(await async_runner.run_until_signalled(
                        client, signals=(signal.SIGUSR1,), soft_stop_timeout=3.0, task_status=task_status))

                await tg.start(runner)
                for wanted in (1, 2):
                    os.kill(os.getpid(), signal.SIGUSR1)
                    while len(client.calls) < wanted:
                        await anyio.sleep(0.01)
                os.kill(os.getpid(), signal.SIGUSR1)
                while "still waiting" not in caplog.text:
                    await anyio.sleep(0.01)
                assert client.calls == ["stop 3.0", "stop_and_cancel"]  # the third only logs
                client.finish.set()
            return result[0], client.calls

        with caplog.at_level(logging.WARNING):
            assert anyio.run(scenario, backend=backend) == ("hard", ["stop 3.0", "stop_and_cancel"]), backend
        messages = [r.getMessage() for r in caplog.records]
        assert [m.split(": ", 1)[1].split(" (")[0] for m in messages] == [
            "SIGUSR1 received: stopping after running jobs finish",
            "SIGUSR1 received again: cancelling running jobs",
            "SIGUSR1 received: still waiting for workers that ignore cancellation",
        ], messages


def test_client_package_imports_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import river_trio

    assert async_runner.client_package("trio") is river_trio
    monkeypatch.setitem(sys.modules, "river_asyncio", None)  # what a missing package raises
    with pytest.raises(async_runner.DriverUnavailableError,
                       match="river_asyncio is not installed: the asyncio client needs it"):
        async_runner.client_package("asyncio")
    with pytest.raises(async_runner.DriverUnavailableError, match="not installed: my tool needs it"):
        async_runner.client_package("asyncio", needed_by="my tool")
    with pytest.raises(ValueError, match="no River client for 'curio'"):
        async_runner.client_package("curio")


def test_sole_exception() -> None:
    from river_tools.cli.work import sole_exception

    error = ValueError("x")
    assert sole_exception(ExceptionGroup("a", [ExceptionGroup("b", [error])])) is error
    assert sole_exception(ExceptionGroup("a", [error, KeyError("y")])) is None


@pytest.mark.parametrize("target", ["asyncio_app:amake_client", "trio_app:client"])
def test_metrics_port_counts_an_async_clients_runs(
    app_dir: Path, sqlite_url: str, processes: list[WorkerProcess], target: str
) -> None:
    worker = start(processes, app_dir, sqlite_url, target, "--metrics-port", "0", "--metrics-cache", "0")
    base = sync_work.served_at(worker, "/healthz and /metrics")
    writer = Client(sqlite_url)
    try:
        ids = [writer.insert(Quick(n)).job.id for n in range(2)]
    finally:
        writer.stop()
    for job_id in ids:
        worker.expect(f"done {job_id}")
    worked = ("river_jobs_worked_total", frozenset({("kind", "quick"), ("queue", "default"),
                                                    ("outcome", "completed")}))
    # Counted by the async middleware once each run returns, a moment after its line is printed.
    deadline = time.monotonic() + sync_work.WAIT
    while (scraped := sync_work.samples(f"{base}/metrics")).get(worked, 0) < 2:
        assert time.monotonic() < deadline, scraped
        time.sleep(0.02)
    assert scraped[worked] == 2
    assert scraped[("river_database_up", frozenset())] == 1
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0
