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
