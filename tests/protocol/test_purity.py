"""river_protocol is sans-IO: no I/O modules, no clock, no global randomness.

The import check runs in a fresh interpreter in which the I/O and concurrency
modules cannot be imported and the clock and global random functions raise;
it then imports every module of the package and drives the core through its
main paths, so a hidden ``datetime.now()`` or ``random.random()`` fails here.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import river_protocol

FORBIDDEN_MODULES = (
    "socket", "select", "selectors", "threading", "asyncio", "trio", "anyio", "sqlite3",
    "sqlean", "pysqlite3", "apsw", "psycopg", "psycopg_pool", "sqlalchemy", "subprocess",
    "multiprocessing", "logging", "urllib.request", "http",
)

GUARD = textwrap.dedent(
    f"""
    import sys, importlib.abc, datetime as _dt, time, random, os

    FORBIDDEN = {FORBIDDEN_MODULES!r}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name in FORBIDDEN or name.split(".")[0] in FORBIDDEN:
                raise ImportError(f"river_protocol must not import {{name}}")
            return None

    for name in list(sys.modules):
        if name in FORBIDDEN or name.split(".")[0] in FORBIDDEN:
            del sys.modules[name]
    sys.meta_path.insert(0, Block())

    def forbidden(what):
        def fail(*a, **k):
            raise AssertionError(f"river_protocol read {{what}}; time and randomness must be inputs")
        return fail

    class GuardedDatetime(_dt.datetime):
        now = classmethod(forbidden("datetime.now"))
        utcnow = classmethod(forbidden("datetime.utcnow"))
        today = classmethod(forbidden("datetime.today"))

    class GuardedDate(_dt.date):
        today = classmethod(forbidden("date.today"))

    _dt.datetime = GuardedDatetime
    _dt.date = GuardedDate
    for fn in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
               "sleep", "localtime", "gmtime"):
        setattr(time, fn, forbidden("time." + fn))
    for fn in ("random", "randint", "randrange", "uniform", "choice", "choices", "shuffle",
               "sample", "getrandbits", "gauss", "seed"):
        setattr(random, fn, forbidden("random." + fn))
    os.urandom = forbidden("os.urandom")
    """
)

PACKAGE_DIR = Path(river_protocol.__file__).parent


def all_module_names() -> list[str]:
    # river_protocol.testing holds hypothesis strategies for test suites; hypothesis itself
    # uses threads, and nothing in the core imports it (checked below).
    return ["river_protocol"] + [
        m.name
        for m in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="river_protocol.")
        if not m.name.startswith("river_protocol.testing")
    ]


def test_core_never_imports_the_testing_helpers() -> None:
    for path in PACKAGE_DIR.rglob("*.py"):
        if "testing" in path.relative_to(PACKAGE_DIR).parts:
            continue
        assert "river_protocol.testing" not in path.read_text(), path


def run_guarded(body: str) -> subprocess.CompletedProcess[str]:
    script = GUARD + "\n" + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_every_module_imports_without_io_modules() -> None:
    names = all_module_names()
    assert len(names) > 5
    result = run_guarded(
        f"""
        import importlib
        for name in {names!r}:
            importlib.import_module(name)
        leaked = [m for m in sys.modules if m.split(".")[0] in FORBIDDEN]
        assert not leaked, leaked
        print("imported", len({names!r}))
        """
    )
    assert result.returncode == 0, result.stderr
    assert "imported" in result.stdout


def test_guard_catches_a_clock_read() -> None:
    # The harness itself must be able to fail: a clock read in guarded code raises.
    result = run_guarded("import datetime; datetime.datetime.now()")
    assert result.returncode != 0
    assert "time and randomness must be inputs" in result.stderr


def test_guard_catches_a_forbidden_import() -> None:
    result = run_guarded("import threading")
    assert result.returncode != 0
    assert "must not import threading" in result.stderr


CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
               ("time", "time"), ("time", "time_ns"), ("time", "monotonic"), ("time", "perf_counter"),
               ("time", "sleep"), ("os", "urandom"), ("uuid", "uuid4"), ("uuid", "uuid1")}
RANDOM_GLOBALS = {"random", "randint", "randrange", "uniform", "choice", "choices", "shuffle", "sample",
                  "getrandbits", "gauss"}


def test_source_has_no_clock_or_global_random_calls() -> None:
    problems = []
    for path in PACKAGE_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                owner_name = owner.id if isinstance(owner, ast.Name) else (
                    owner.attr if isinstance(owner, ast.Attribute) else None)
                pair = (owner_name, node.func.attr)
                if pair in CLOCK_CALLS or (owner_name == "random" and node.func.attr in RANDOM_GLOBALS):
                    where = f"{path.relative_to(PACKAGE_DIR)}:{node.lineno}"
                    problems.append(f"{where} {owner_name}.{node.func.attr}")
            if isinstance(node, ast.ImportFrom) and node.module in ("random", "secrets"):
                problems.append(f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} from {node.module} import")
    assert not problems, problems


def test_core_paths_run_without_clock_or_global_randomness() -> None:
    # Drives each main path once under the guards: any hidden clock read or global random
    # draw raises inside the child interpreter.
    result = run_guarded(
        """
        import random as _random_module
        from dataclasses import dataclass
        from datetime import UTC, datetime, timedelta
        from typing import ClassVar

        from river_protocol.golang import encoding_json
        from river_protocol.args import arg_field
        from river_protocol.cron import parse_cron
        from river_protocol.dialects.postgres import PostgresDialect
        from river_protocol.dialects.sqlite import SQLiteDialect
        from river_protocol.intents import ClaimJobs, InsertJobs, SetStateIfRunning
        from river_protocol.job import JobRow
        from river_protocol.machines.base import IntentSucceeded, Tick
        from river_protocol.machines.completer import Completer, CompletionReason, Submit
        from river_protocol.machines.elector import Elector, Start as ElectorStart
        from river_protocol.machines.producer import Producer, ProducerConfig, Start as ProducerStart
        from river_protocol.migrations.bundle import migrations_for
        from river_protocol.migrations.plan import plan_migration
        from river_protocol.options import InsertOpts, resolve_insert_params
        from river_protocol.outcomes import Failed, Snooze, outcome_to_update
        from river_protocol.retry import DefaultRetryPolicy
        from river_protocol.states import JobState
        from river_protocol.unique import UniqueOpts, unique_fields_of

        class Seeded:
            # An injected random source, as drivers pass one in.
            def __init__(self): self.x = 0.25
            def random(self): return self.x

        now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

        @dataclass
        class Email:
            kind: ClassVar[str] = "email"
            to: str = arg_field(json="to", unique=True)

        encoded = encoding_json.encode_args(Email("a@b"))
        params = resolve_insert_params(
            "email", encoded,
            insert_opts=InsertOpts(unique_opts=UniqueOpts(by_args=True, by_period=timedelta(hours=1))),
            args_opts=None, unique_fields=unique_fields_of(Email), now=now,
        )
        assert params.unique_key is not None
        job = JobRow(id=1, kind="email", encoded_args=encoded, state=JobState.RUNNING, attempt=1,
                     attempted_at=now, scheduled_at=now, created_at=now)
        update = outcome_to_update(job, Failed("boom"), now=now, started_at=now,
                                   retry_policy=DefaultRetryPolicy(), rand=0.5)
        assert update.state is JobState.AVAILABLE  # a 1 s first retry skips the scheduler
        assert update.scheduled_at == now + timedelta(seconds=1)
        snooze = outcome_to_update(job, Snooze(timedelta(seconds=1)), now=now, started_at=now)
        assert snooze.state is JobState.AVAILABLE
        assert parse_cron("*/5 * * * *").next(now) == now + timedelta(minutes=5)
        for dialect in (PostgresDialect(), SQLiteDialect()):
            next(dialect.plan(ClaimJobs(queue="default", limit=10, client_id="c")))
            next(dialect.plan(SetStateIfRunning(updates=(update,))))
            next(dialect.plan(InsertJobs(jobs=(params,), nonce="0123456789abcdef")))
            assert migrations_for(dialect.name)
        assert plan_migration(set(), "up") == [1, 2, 3, 4, 5, 6, 7, 8]
        producer = Producer(ProducerConfig(queue="default", client_id="c", max_workers=2), Seeded())
        out = producer.handle(ProducerStart(), now)
        assert out.intents
        completer = Completer(Seeded())
        first = completer.handle(Submit(update, CompletionReason.FAILED), now)
        later = completer.handle(Tick(), first.next_deadline or now)
        assert any(isinstance(i, SetStateIfRunning) for i in first.intents + later.intents)
        elector = Elector("c", Seeded())
        out = elector.handle(ElectorStart(), now)
        print("core paths ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "core paths ok" in result.stdout
