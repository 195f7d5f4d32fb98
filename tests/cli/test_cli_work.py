"""`river work MODULE:ATTR`: a real worker process, stopped by signals, on SQLite and Postgres.

The worker module is written into a temporary directory (the working
directory of the process, which ``river work`` makes importable). The test
follows the process through its output lines, never by sleeping.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from river_db.migrator import Migrator
from river_protocol.claim_filters import TagFilter
from river_protocol.client_core import QueueConfig
from river_protocol.job import JobRow
from river_protocol.states import JobState
from river_sync import Client, InsertOpts, Workers
from river_tools.cli.main import main
from river_tools.cli.work import (
    UsageError,
    apply_overrides,
    build_client,
    effective_queues,
    load_target,
    tag_filter_of,
)

RIVER = Path(sys.executable).with_name("river")
WAIT = 20.0  # upper bound for anything the process does; never a sleep

APP = '''
import os
import sys
from dataclasses import dataclass
from typing import ClassVar

from river_sync import Client, QueueConfig, Workers


@dataclass
class Quick:
    kind: ClassVar[str] = "quick"
    n: int = 0


@dataclass
class Long:
    kind: ClassVar[str] = "long"


workers = Workers()


def say(text):
    sys.stdout.write(text + "\\n")  # one write per line: workers run on several threads
    sys.stdout.flush()


@workers.job(Quick)
def quick(ctx, args):
    say(f"done {ctx.job.id}")


@workers.job(Long)
def long(ctx, args):
    say(f"started {ctx.job.id}")
    while not ctx.token.wait(0.05):
        pass
    say(f"cancelled {ctx.job.id}")
    ctx.raise_if_cancelled()


QUEUES = {"default": QueueConfig(max_workers=5), "other": QueueConfig(max_workers=7)}
client = Client(os.environ["WORK_APP_DB"], workers=workers, queues=QUEUES)


def make_client(database_url=None):
    return Client(database_url or os.environ["WORK_APP_DB"], workers=workers, queues=QUEUES)


def zero_arg_factory():
    return make_client()


not_a_client = 42
'''


@dataclass
class Quick:
    kind: ClassVar[str] = "quick"
    n: int = 0


@dataclass
class Long:
    kind: ClassVar[str] = "long"


# ---------------------------------------------------------------- fixtures and the process


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("scratch_pg_url")
        request.applymarker(pytest.mark.postgres)
    else:
        url = f"sqlite://{tmp_path}/jobs.sqlite3"
    with Migrator(url) as migrator:
        migrator.migrate_up()
    return url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path}/jobs.sqlite3"
    with Migrator(url) as migrator:
        migrator.migrate_up()
    return url


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "work_app.py").write_text(APP)
    return tmp_path


@pytest.fixture
def inserter(db_url: str) -> Iterator[Client]:
    client = Client(db_url)
    yield client
    client.stop()


class WorkerProcess:
    """``river work`` in a subprocess, with its stdout and stderr lines readable as they come."""

    def __init__(self, cwd: Path, db_url: str, *args: str) -> None:
        env = {**os.environ, "WORK_APP_DB": db_url}
        env.pop("RIVER_DATABASE_URL", None)
        self.proc = subprocess.Popen(
            [str(RIVER), "work", *args], cwd=cwd, env=env, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.lines: dict[str, queue.Queue[str]] = {"out": queue.Queue(), "err": queue.Queue()}
        self.seen: dict[str, list[str]] = {"out": [], "err": []}
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for name, stream in (("out", self.proc.stdout), ("err", self.proc.stderr)):
            threading.Thread(target=self._pump, args=(stream, self.lines[name]), daemon=True).start()

    @staticmethod
    def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))

    def expect(self, text: str, stream: str = "out") -> str:
        """A line of ``stream`` containing ``text``: one already seen, or the first new one.

        Jobs finish in any order, so a line read while waiting for another one counts too.
        """
        for line in self.seen[stream]:
            if text in line:
                return line
        while True:
            try:
                line = self.lines[stream].get(timeout=WAIT)
            except queue.Empty:
                self.proc.kill()
                raise AssertionError(
                    f"no {stream} line containing {text!r}; seen: {self.seen}; exit: {self.proc.poll()}"
                ) from None
            self.seen[stream].append(line)
            if text in line:
                return line

    def signal(self, sig: signal.Signals = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def exit_code(self) -> int:
        try:
            return self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def processes() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for process in started:
        process.kill()


def start(processes: list[WorkerProcess], cwd: Path, db_url: str, *args: str) -> WorkerProcess:
    process = WorkerProcess(cwd, db_url, *args)
    processes.append(process)
    process.expect("working ", "err")  # the client is configured and about to start
    return process


def row(client: Client, job_id: int) -> JobRow:
    return client.jobs.get(job_id)


# ---------------------------------------------------------------- working and stopping


def test_works_jobs_and_exits_0_on_sigterm(
    app_dir: Path, db_url: str, inserter: Client, processes: list[WorkerProcess]
) -> None:
    before = inserter.insert(Quick(1)).job.id  # waiting before the worker starts
    worker = start(processes, app_dir, db_url, "work_app:client")
    after = [inserter.insert(Quick(n)).job.id for n in (2, 3)]  # announced to the running worker
    for job_id in (before, *after):
        worker.expect(f"done {job_id}")

    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0
    worker.expect("stopped (soft stop)", "err")
    for job_id in (before, *after):
        assert row(inserter, job_id).state is JobState.COMPLETED


def test_second_signal_cancels_a_running_job_back_to_available(
    app_dir: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    inserter = Client(sqlite_url)
    try:
        long_id = inserter.insert(Long()).job.id
        worker = start(processes, app_dir, sqlite_url, "work_app:client")
        worker.expect(f"started {long_id}")

        worker.signal(signal.SIGTERM)
        # Python merges a signal into one still pending: send the second once the first was handled.
        worker.expect("SIGTERM received: stopping after running jobs finish", "err")
        worker.signal(signal.SIGTERM)
        worker.expect(f"cancelled {long_id}")
        assert worker.exit_code() == 0
        worker.expect("stopped (hard stop)", "err")

        interrupted = row(inserter, long_id)
        assert interrupted.state is JobState.AVAILABLE
        assert interrupted.attempt == 0 and interrupted.errors == ()  # no attempt used
    finally:
        inserter.stop()


def test_sigint_stops_like_sigterm(app_dir: Path, sqlite_url: str, processes: list[WorkerProcess]) -> None:
    worker = start(processes, app_dir, sqlite_url, "work_app:client")
    worker.signal(signal.SIGINT)
    assert worker.exit_code() == 0
    worker.expect("SIGINT received", "err")


def test_queues_tags_and_max_workers_narrow_what_is_worked(
    app_dir: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    inserter = Client(sqlite_url)
    try:
        def put(queue_name: str, tags: tuple[str, ...]) -> int:
            return inserter.insert(Quick(), InsertOpts(queue=queue_name, tags=tags)).job.id

        wanted = put("other", ("blue",))
        elsewhere = [put("default", ("blue",)), put("other", ("red",)), put("other", ())]

        worker = start(processes, app_dir, sqlite_url, "work_app:client",
                       "--queues", "other", "--tags", "blue,green", "--max-workers", "2")
        assert "other (2 workers)" in worker.seen["err"][-1]
        assert "default" not in worker.seen["err"][-1]
        worker.expect(f"done {wanted}")
        worker.signal()
        assert worker.exit_code() == 0

        assert row(inserter, wanted).state is JobState.COMPLETED
        # All were available before the worker's first fetch: had a filter leaked, that fetch
        # would have claimed them too, and the soft stop would have waited for them.
        for job_id in elsewhere:
            untouched = row(inserter, job_id)
            assert untouched.state is JobState.AVAILABLE and untouched.attempt == 0
    finally:
        inserter.stop()


def test_untagged_works_only_jobs_without_tags(
    app_dir: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    inserter = Client(sqlite_url)
    try:
        tagged = inserter.insert(Quick(), InsertOpts(tags=("blue",))).job.id
        plain = inserter.insert(Quick()).job.id
        worker = start(processes, app_dir, sqlite_url, "work_app:client", "--untagged")
        worker.expect(f"done {plain}")
        worker.signal()
        assert worker.exit_code() == 0
        assert row(inserter, tagged).state is JobState.AVAILABLE
    finally:
        inserter.stop()


def test_factory_receives_the_database_url(
    app_dir: Path, sqlite_url: str, tmp_path: Path, processes: list[WorkerProcess]
) -> None:
    other = f"sqlite://{tmp_path}/other.sqlite3"
    with Migrator(other) as migrator:
        migrator.migrate_up()
    inserter = Client(other)
    try:
        job_id = inserter.insert(Quick()).job.id
        # WORK_APP_DB points elsewhere: only --database-url can lead the worker to this job.
        worker = start(processes, app_dir, sqlite_url, "work_app:make_client", "--database-url", other)
        worker.expect(f"done {job_id}")
        worker.signal()
        assert worker.exit_code() == 0
    finally:
        inserter.stop()


# ---------------------------------------------------------------- usage errors (in-process)


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> str:
    """A uniquely named copy of the app, importable from the working directory."""
    name = f"work_app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORK_APP_DB", sqlite_url)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield name
    sys.modules.pop(name, None)


@pytest.mark.parametrize(("argv", "message"), [
    (["nocolon"], "expected MODULE:ATTR"),
    (["{app}:"], "expected MODULE:ATTR"),
    (["no_such_module_xyz:client"], "cannot import module 'no_such_module_xyz'"),
    (["{app}:missing"], "has no attribute 'missing'"),
    (["{app}:not_a_client"],
     "must be a river_sync, river_trio or river_asyncio Client or a callable returning one, got int"),
    (["{app}:client", "--database-url", "x.sqlite3"], "--database-url: {app}:client is a client"),
    (["{app}:zero_arg_factory", "--schema", "s"],
     "--schema given, but {app}:zero_arg_factory() takes no schema"),
    (["{app}:client", "--queues", "bad queue!"], "queue name"),
    (["{app}:client", "--max-workers", "0"], "must be at least 1"),
    (["{app}:client", "--tags", "a", "--untagged"], "not allowed with argument"),
    (["{app}:client", "--tags", "x"], "tags should match regex"),
])
def test_usage_errors_exit_2_with_a_clear_message(
    app_module: str, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["work", *[a.format(app=app_module) for a in argv]])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message.format(app=app_module) in err


def test_load_target_resolves_dotted_attributes(app_module: str) -> None:
    assert load_target(f"{app_module}:QUEUES.get") is not None
    assert str(Path.cwd()) in sys.path or "" in sys.path


def test_build_client_calls_factories_with_accepted_overrides(app_module: str, tmp_path: Path) -> None:
    make_client = load_target(f"{app_module}:make_client")
    with Migrator(f"sqlite://{tmp_path}/x.db") as migrator:  # a client opens no missing SQLite file
        migrator.migrate_up()
    client = build_client(make_client, "make_client", {"database_url": f"sqlite://{tmp_path}/x.db"})
    assert isinstance(client, Client) and client.database.dialect.name == "sqlite"
    client.stop()
    with pytest.raises(UsageError, match="returned int"):
        build_client(lambda: 1, "f", {})
    instance = load_target(f"{app_module}:client")
    assert build_client(instance, "client", {}) is instance
    instance.stop()


# ---------------------------------------------------------------- overrides


def test_effective_queues() -> None:
    configured = {"default": QueueConfig(max_workers=5), "other": QueueConfig(max_workers=7)}
    assert effective_queues(configured, None, None) == configured
    assert effective_queues(configured, ("other", "new"), None) == {
        "other": QueueConfig(max_workers=7), "new": QueueConfig(),
    }
    assert effective_queues(configured, None, 3) == {
        "default": QueueConfig(max_workers=3), "other": QueueConfig(max_workers=3),
    }


def test_tag_filter_of() -> None:
    def ns(**kwargs: Any) -> argparse.Namespace:
        return argparse.Namespace(**{"tags": None, "untagged": False, **kwargs})

    assert tag_filter_of(ns()) is None
    assert tag_filter_of(ns(tags=("alpha", "beta"))) == TagFilter(("alpha", "beta"))
    assert tag_filter_of(ns(untagged=True)) == TagFilter(())


def test_apply_overrides_refuses_a_started_client(sqlite_url: str) -> None:
    workers = Workers()
    workers.job(Quick)(lambda args: None)
    client = Client(sqlite_url, workers=workers, queues={"default": QueueConfig()})
    client.start()
    try:
        with pytest.raises(UsageError, match="only be configured before it starts"):
            apply_overrides(client, {"default": QueueConfig()}, None)
    finally:
        client.stop()


def test_a_client_without_queues_is_refused(app_module: str, capsys: pytest.CaptureFixture[str]) -> None:
    (Path.cwd() / f"{app_module}_ro.py").write_text(
        "import os\nfrom river_sync import Client\nclient = Client(os.environ['WORK_APP_DB'])\n"
    )
    assert main(["work", f"{app_module}_ro:client"]) == 2
    assert "works no queues" in capsys.readouterr().err


# ---------------------------------------------------------------- --processes N (a supervisor)

PROCS_APP = '''
import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from river_sync import Client, LeaderElectionConfig, MaintenanceConfig, QueueConfig, Workers


@dataclass
class Hold:
    kind: ClassVar[str] = "hold"


workers = Workers()


@dataclass
class Stuck:
    kind: ClassVar[str] = "stuck"


def hold(ctx, args):
    who = f"by {ctx.client.client_id} pid {os.getpid()}"
    sys.stdout.write(f"started {ctx.job.id} attempt {ctx.job.attempt} {who}\\n")
    sys.stdout.flush()
    while not ctx.token.wait(0.05):
        pass
    ctx.raise_if_cancelled()


workers.job(Hold)(hold)
# The rescuer leaves a job alone while it is within its timeout, as River does: a short one.
workers.job(Stuck, timeout=timedelta(seconds=1))(hold)


def make_client():
    return Client(
        os.environ["WORK_APP_DB"], workers=workers, queues={"default": QueueConfig(max_workers=1)},
        leader_election=LeaderElectionConfig(interval=timedelta(milliseconds=300),
                                             jitter=timedelta(milliseconds=50), ttl=timedelta(seconds=2)),
        maintenance=MaintenanceConfig(
            rescue_after=timedelta(seconds=1), rescuer_interval=timedelta(milliseconds=200),
            scheduler_interval=timedelta(milliseconds=200), stagger_start=False,
        ),
    )
'''


@dataclass
class Hold:
    kind: ClassVar[str] = "hold"


@dataclass
class Stuck:
    kind: ClassVar[str] = "stuck"


def expect_count(worker: WorkerProcess, text: str, count: int, stream: str = "out") -> list[str]:
    """Wait until ``count`` lines containing ``text`` were seen on ``stream``; returns them."""
    while True:
        found = [line for line in worker.seen[stream] if text in line]
        if len(found) >= count:
            return found
        try:
            line = worker.lines[stream].get(timeout=WAIT)
        except queue.Empty:
            worker.proc.kill()
            raise AssertionError(f"{count} x {text!r} not seen; seen: {worker.seen}") from None
        worker.seen[stream].append(line)


@pytest.fixture
def procs_app_dir(tmp_path: Path) -> Path:
    (tmp_path / "procs_app.py").write_text(PROCS_APP)
    return tmp_path


def test_processes_run_one_client_each_and_stop_in_two_steps(
    procs_app_dir: Path, db_url: str, inserter: Client, processes: list[WorkerProcess]
) -> None:
    ids = [inserter.insert(Hold()).job.id for _ in range(2)]
    worker = WorkerProcess(procs_app_dir, db_url, "procs_app:make_client", "--processes", "2")
    processes.append(worker)
    # Each process works one job at a time, so both jobs running means both processes claimed one.
    # (Count distinct clients, not lines: under load a claim whose answer was lost is reconciled
    # and its job started again by the same process.)
    def clients_of(lines: list[str]) -> set[str]:
        return {line.split(" by ")[1].split()[0] for line in lines}

    n = 2
    while len(clients := clients_of(expect_count(worker, "started ", n))) < 2:
        n += 1
    started = [line for line in worker.seen["out"] if "started " in line]
    assert len(clients) == 2 and len({line.split(" pid ")[1] for line in started}) == 2
    expect_count(worker, "working ", 2, "err")

    worker.signal(signal.SIGTERM)
    worker.expect("stopping after running jobs finish in 2 worker processes", "err")
    expect_count(worker, "SIGTERM received: stopping after running jobs finish", 2, "err")
    assert worker.proc.poll() is None  # the held jobs keep the soft stop waiting
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0
    for job_id in ids:
        back = row(inserter, job_id)
        assert back.state is JobState.AVAILABLE and back.attempt == 0  # cancelled by the hard stop


def test_a_killed_process_is_restarted_and_its_job_rescued(
    procs_app_dir: Path, db_url: str, inserter: Client, processes: list[WorkerProcess]
) -> None:
    job_id = inserter.insert(Stuck()).job.id
    worker = WorkerProcess(procs_app_dir, db_url, "procs_app:make_client", "--processes", "2")
    processes.append(worker)
    first = worker.expect(f"started {job_id} attempt 1")
    victim = int(first.split(" pid ")[1])
    os.kill(victim, signal.SIGKILL)
    worker.expect("exited with status -9", "err")
    restarted = expect_count(worker, " started (pid", 3, "err")  # 2 at first, then the replacement
    assert "worker process" in restarted[-1] and f"(pid {victim})" not in restarted[-1]

    # The killed client's job stays running until the leader's rescuer makes it retryable;
    # then it runs again, attempt 2, in a live process.
    again = worker.expect(f"started {job_id} attempt 2")
    assert int(again.split(" pid ")[1]) != victim
    rescued = row(inserter, job_id)
    assert rescued.attempt >= 2 and "stuck" in rescued.errors[0].error.lower()

    # A child still importing would die of the signal instead of stopping: wait until all three
    # clients (two first, one replacement) have said they are working.
    expect_count(worker, "working ", 3, "err")
    worker.signal(signal.SIGTERM)
    expect_count(worker, "SIGTERM received: stopping after running jobs finish", 2, "err")
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0


def test_processes_refuse_an_in_memory_database(procs_app_dir: Path, processes: list[WorkerProcess]) -> None:
    worker = WorkerProcess(procs_app_dir, "sqlite://:memory:", "procs_app:make_client", "--processes", "2")
    processes.append(worker)
    assert worker.exit_code() == 2
    worker.expect("in-memory SQLite database exists only inside one process", "err")


def test_child_command_repeats_the_flags_without_processes() -> None:
    from river_tools.cli.work import child_command

    args = argparse.Namespace(target="app:make", log_level="debug", queues=("a", "b"), max_workers=3,
                              tags=("t",), untagged=False, database_url="sqlite://x.db", schema="s",
                              processes=4, default_gc=False)
    assert child_command(args)[1:] == [
        "-m", "river_tools.cli", "work", "app:make", "--log-level", "debug", "--queues", "a,b",
        "--max-workers", "3", "--tags", "t", "--database-url", "sqlite://x.db", "--schema", "s",
    ]
    args.default_gc = True
    assert child_command(args)[-1] == "--default-gc"


def test_children_stop_when_the_supervisor_is_killed(
    procs_app_dir: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    worker = WorkerProcess(procs_app_dir, sqlite_url, "procs_app:make_client", "--processes", "2")
    processes.append(worker)
    started = expect_count(worker, " started (pid", 2, "err")
    pids = [int(line.split("(pid ")[1].rstrip(")")) for line in started]
    expect_count(worker, "working ", 2, "err")
    worker.proc.kill()
    worker.proc.wait()
    # Each child got SIGTERM from the kernel when its parent died, and stopped softly.
    for pid in pids:
        deadline = time.monotonic() + WAIT
        while Path(f"/proc/{pid}").exists() and "zombie" not in _proc_state(pid):
            assert time.monotonic() < deadline, f"worker process {pid} outlived its supervisor"
            time.sleep(0.05)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


# ---------------------------------------------------------------- errors in the user's own code


CRASHING = {
    "crash_on_import": "import os\n\n\ndef helper():\n    return 1 / 0\n\n\nhelper()\n",
    "crash_in_factory": "def make_client():\n    raise RuntimeError('no config file')\n",
    "crash_missing_dep": "import no_such_dependency_xyz  # noqa\n",
    "crash_syntax": "def broken(:\n    pass\n",
    "crash_async": (
        "import river_asyncio  # noqa\n\n\nasync def make_client():\n    raise KeyError('token')\n"
    ),
}


@pytest.fixture
def crash_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, text in CRASHING.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield tmp_path
    for name in CRASHING:
        sys.modules.pop(name, None)


@pytest.mark.parametrize(("target", "heading", "lines"), [
    ("crash_on_import:client", "importing crash_on_import raised an error:",
     ['crash_on_import.py", line 8, in <module>', 'crash_on_import.py", line 5, in helper',
      "ZeroDivisionError: division by zero"]),
    ("crash_in_factory:make_client", "crash_in_factory:make_client() raised an error:",
     ['crash_in_factory.py", line 2, in make_client', "RuntimeError: no config file"]),
    ("crash_missing_dep:client", "importing crash_missing_dep raised an error:",
     ['crash_missing_dep.py", line 1, in <module>',
      "ModuleNotFoundError: No module named 'no_such_dependency_xyz'"]),
    # --backend: another test of this process may have loaded river_trio as well
    ("crash_async:make_client --backend asyncio", "crash_async:make_client() raised an error:",
     ['crash_async.py", line 5, in make_client', "KeyError: 'token'"]),
    ("crash_syntax:client", "importing crash_syntax raised an error:",
     ['crash_syntax.py", line 1', "SyntaxError"]),
])
def test_an_error_in_the_users_code_shows_its_traceback(
    crash_dir: Path, target: str, heading: str, lines: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["work", *target.split()]) == 1
    err = capsys.readouterr().err
    first, second = err.splitlines()[:2]
    assert first == f"river work: {heading}"
    if "SyntaxError" not in lines:  # a SyntaxError's report has no frames, only the file and line
        assert second == "Traceback (most recent call last):"
        # From the user's first frame on, as `python -m` shows it: no frame of River's own.
        assert "river_tools" not in err and "importlib" not in err
    for line in lines:
        assert line in err
    assert "unexpected error" not in err


def test_rivers_own_errors_in_a_factory_keep_their_one_line_message(
    crash_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (crash_dir / "bad_settings.py").write_text(
        "from river_sync import Client\n\ndef make_client():\n"
        "    return Client('sqlite://:memory:', queues={'bad queue!': None})\n"
    )
    try:
        assert main(["work", "bad_settings:make_client"]) == 2
    finally:
        sys.modules.pop("bad_settings", None)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.startswith("river work: error: bad_settings:make_client: ")


def test_river_work_process_prints_the_traceback_of_the_users_module(crash_dir: Path) -> None:
    proc = subprocess.run([str(RIVER), "work", "crash_on_import:client"], cwd=crash_dir, text=True,
                          capture_output=True, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert 'crash_on_import.py", line 5, in helper' in proc.stderr
    assert proc.stderr.rstrip().endswith("ZeroDivisionError: division by zero")


# ---------------------------------------------------------------- --metrics-port and --health-port


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    status, text = http_get(url)
    assert status == 200, text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def served_at(worker: WorkerProcess, what: str) -> str:
    line = worker.expect(f"serving {what} at http://", "err")
    return line.rsplit(" at ", 1)[1]


def test_metrics_port_serves_counters_that_move_as_jobs_run(
    app_dir: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    inserter = Client(sqlite_url)
    try:
        worker = start(processes, app_dir, sqlite_url, "work_app:client", "--metrics-port", "0",
                       "--metrics-cache", "0")
        base = served_at(worker, "/healthz and /metrics")
        assert base.startswith("http://127.0.0.1:")  # loopback unless --metrics-host says otherwise
        worked = ("river_jobs_worked_total", frozenset({("kind", "quick"), ("queue", "default"),
                                                        ("outcome", "completed")}))
        runs = ("river_job_run_duration_seconds_count", frozenset({("kind", "quick")}))
        before = samples(f"{base}/metrics")
        assert before.get(worked, 0) == 0 and before.get(runs, 0) == 0
        assert before[("river_database_up", frozenset())] == 1

        ids = [inserter.insert(Quick(n)).job.id for n in range(3)]
        for job_id in ids:
            worker.expect(f"done {job_id}")
        completed = ("river_jobs", frozenset({("queue", "default"), ("state", "completed")}))
        deadline = time.monotonic() + WAIT
        while (after := samples(f"{base}/metrics")).get(completed, 0) < 3:  # the completer batches
            assert time.monotonic() < deadline, after
            time.sleep(0.05)
        assert after[worked] == 3 and after[runs] == 3
        assert after[("river_jobs_running", frozenset({("queue", "default")}))] == 0
        assert after[("river_jobs", frozenset({("queue", "default"), ("state", "available")}))] == 0

        status, text = http_get(f"{base}/healthz")
        assert status == 200, text
        report = json.loads(text)
        assert report["status"] == "ok" and report["client_state"] == "started"
        assert {p["queue"]: p["alive"] for p in report["producers"]} == {"default": True, "other": True}
        assert all(p["last_fetched_at"] is not None for p in report["producers"])
        assert http_get(f"{base}/nothing")[0] == 404
    finally:
        inserter.stop()
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0


def test_health_port_serves_healthz_alone(
    app_dir: Path, sqlite_url: str, processes: list[WorkerProcess]
) -> None:
    worker = start(processes, app_dir, sqlite_url, "work_app:client", "--health-port", "0")
    base = served_at(worker, "/healthz")
    worker.expect("working ", "err")
    deadline = time.monotonic() + WAIT
    while (answer := http_get(f"{base}/healthz"))[0] != 200:  # producers start after "working"
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)
    assert json.loads(answer[1])["status"] == "ok"
    assert http_get(f"{base}/metrics")[0] == 404
    worker.signal(signal.SIGTERM)
    assert worker.exit_code() == 0


def test_metrics_flags_are_refused_with_processes(
    app_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["work", f"{app_module}:client", "--processes", "2", "--metrics-port", "0"]) == 2
    assert "--metrics-port serves one process" in capsys.readouterr().err


def test_database_url_of_prefers_the_flag_then_what_the_client_was_given(sqlite_url: str) -> None:
    def ns(url: str | None = None) -> argparse.Namespace:
        return argparse.Namespace(database_url=url)

    from river_tools.cli.work import database_url_of

    client = Client(sqlite_url)
    path_client = Client(Path(sqlite_url.removeprefix("sqlite://")))
    try:
        assert database_url_of(client, ns()) == sqlite_url
        assert database_url_of(client, ns("postgresql://elsewhere/db")) == "postgresql://elsewhere/db"
        assert database_url_of(path_client, ns()) == sqlite_url.removeprefix("sqlite://")
        assert database_url_of(object(), ns()) is None  # a client built on a pool or a connection
    finally:
        client.stop()
        path_client.stop()


def test_metrics_without_a_database_url_log_that_the_counts_are_off(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from river_tools.cli.work import instrument

    client = Client(sqlite_url)
    client._database_arg = object()  # as a client given a connection pool
    try:
        with caplog.at_level("WARNING", logger="river.work"):
            args = argparse.Namespace(database_url=None, schema=None, metrics_cache=5.0)
            metrics = instrument(client, args)
        assert "job counts are off: the client was given no URL" in caplog.text
        assert client.middleware == (metrics.work,) and client.insert_middleware == (metrics.insert_many,)
    finally:
        client.stop()


def test_a_metrics_port_already_taken_exits_1_naming_it(
    app_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["work", f"{app_module}:client", "--metrics-port", str(port)]) == 1
    assert f"river work: error: cannot listen on 127.0.0.1:{port}: " in capsys.readouterr().err


def test_metrics_port_without_prometheus_client_names_the_extra(
    app_module: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "river_prometheus", None)  # as if prometheus_client were missing
    assert main(["work", f"{app_module}:client", "--metrics-port", "0"]) == 2
    assert "pip install 'river-python[prometheus]'" in capsys.readouterr().err


def test_an_unmigrated_or_missing_database_is_one_line_naming_the_fix(
    app_module: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    assert main(["work", f"{app_module}:make_client", "--database-url", f"sqlite://{empty}"]) == 1
    err = capsys.readouterr().err
    assert "river work: error: River's tables are missing" in err and "Traceback" not in err
    assert f"Run `river migrate-up --database-url sqlite://{empty}`" in err
    missing = tmp_path / "missing.sqlite3"
    assert main(["work", f"{app_module}:make_client", "--database-url", f"sqlite://{missing}"]) == 1
    err = capsys.readouterr().err
    assert f"river work: error: no SQLite database at {missing}" in err and not missing.exists()
