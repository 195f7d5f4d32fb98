"""The import contract between the packages: the "may import" column of the README's layout table.

The rules are read from that table (``may_import_table``), so the table and the check cannot
drift: each package may import the packages of ours its row names (and itself), ``nothing of
ours`` means none, ``anything`` means no rule (``river_tools``). Beyond the table:

- ``river_anyio`` imports, of the event loops, only AnyIO and sniffio at module level (trio and
  asyncio lazily, in ``river_anyio._backend``, when running under them);
- ``river_asyncio`` loads no trio module, even after running a client;
- ``river_otel`` needs at run time only ``opentelemetry-api`` of OpenTelemetry.

Checked twice: statically over every import statement (also inside functions and
``TYPE_CHECKING`` blocks), and by importing every module of a package in a fresh
interpreter and looking at what got loaded.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def may_import_table(readme: str) -> dict[str, frozenset[str] | None]:
    """package -> the packages of ours it may import (None: anything), from the README's layout table."""
    table = readme.split("<!-- --8<-- [start:layout] -->", 1)[1].split("<!-- --8<-- [end:layout] -->", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    packages = [row.split("|")[1].strip().strip("`") for row in rows]
    rules: dict[str, frozenset[str] | None] = {}
    for package, row in zip(packages, rows, strict=True):
        may = row.rstrip().rstrip("|").rsplit("|", 1)[1].strip()
        named = frozenset(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", may)) & set(packages)
        rules[package] = None if may == "anything" else named
    return rules


MAY_IMPORT = may_import_table((ROOT / "README.md").read_text(encoding="utf-8"))
OURS = tuple(MAY_IMPORT)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    package: tuple(sorted(set(OURS) - may - {package}))
    for package, may in MAY_IMPORT.items() if may is not None
}


def test_the_table_is_read_as_written() -> None:
    assert MAY_IMPORT["river_protocol"] == frozenset()
    assert MAY_IMPORT["river_tools"] is None
    assert MAY_IMPORT["river_trio"] == {"river_anyio", "river_protocol", "river_db"}
    assert MAY_IMPORT["river_otel"] == {"river_protocol", "river_db"}  # third-party names are no rule
    assert "conformance" in FORBIDDEN and "river_tools" not in FORBIDDEN


def test_every_package_of_ours_has_a_row() -> None:
    dirs = {p.parent.name for p in ROOT.glob("river_*/__init__.py")} | {"conformance"}
    assert dirs == set(OURS)


def imported_packages(source: str, module: str) -> set[tuple[str, int]]:
    """(top-level package of ours, line) for every import in ``source``, relative ones resolved."""
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: -node.level] if node.level else []
                names = [".".join([*base, node.module or ""])]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".", 1)[0]
            if top in OURS:
                found.add((top, node.lineno))
    return found


def _modules(package: str) -> list[tuple[str, Path]]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((".".join(parts), path))
    return out


def test_the_checker_sees_imports_anywhere_in_a_module() -> None:
    source = textwrap.dedent(
        """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from river_sync.client import Client
        def f():
            import river_trio.client
            from . import sibling
        """
    )
    found = {top for top, _ in imported_packages(source, "river_db.x")}
    assert found == {"river_sync", "river_trio", "river_db"}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_crosses_the_layering(package: str) -> None:
    crossings = [
        f"{path.relative_to(ROOT)}:{line} imports {top}"
        for module, path in _modules(package)
        for top, line in sorted(imported_packages(path.read_text(encoding="utf-8"), module))
        if top in FORBIDDEN[package]
    ]
    assert crossings == [], "\n".join(crossings)


LOADED = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    package = importlib.import_module(sys.argv[1])
    for info in pkgutil.walk_packages(package.__path__, sys.argv[1] + "."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    print("\\n".join(sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[2:])))
    """
)


@pytest.mark.parametrize("package", ["river_db", "river_sync", "river_anyio", "river_trio", "river_asyncio",
                                     "river_otel", "river_ui", "river_prometheus"])
def test_importing_a_package_loads_nothing_it_must_not_use(package: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", LOADED, package, *FORBIDDEN[package]],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )
    assert result.stdout.split() == [], f"importing {package} loaded {result.stdout.split()}"


def test_import_river_trio_loads_no_threaded_client_module() -> None:
    # The issue's own check, verbatim in spirit: nothing of river_sync comes along with river_trio.
    code = "import river_trio, sys; print(sorted(m for m in sys.modules if m.startswith('river_sync')))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                            check=True)
    assert result.stdout.strip() == "[]"


def test_river_otel_needs_only_the_opentelemetry_api() -> None:
    code = "import river_otel, sys; print([m for m in sys.modules if m.startswith('opentelemetry.sdk')])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------- the event loops


def top_level_imports(source: str) -> set[str]:
    """Top-level module names imported by ``source`` outside any function or class body."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".", 1)[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".", 1)[0])
            elif isinstance(node, (ast.If, ast.Try)):  # still module level (TYPE_CHECKING, fallbacks)
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", ()):
                    visit(handler.body)

    visit(ast.parse(source).body)
    return found


def test_the_checker_sees_only_module_level_imports() -> None:
    source = textwrap.dedent(
        """
        import anyio
        if True:
            import sniffio
        def backend():
            import trio
        """
    )
    assert top_level_imports(source) == {"anyio", "sniffio"}


LOOP_MODULES = {"trio", "asyncio", "outcome"}


@pytest.mark.parametrize("package", ["river_anyio", "river_asyncio"])
def test_no_module_imports_an_event_loop_but_through_anyio(package: str) -> None:
    # trio and asyncio come in lazily (river_anyio._backend), only under the loop that runs.
    crossings = [
        f"{path.relative_to(ROOT)} imports {name} at module level"
        for _, path in _modules(package)
        for name in sorted(top_level_imports(path.read_text(encoding="utf-8")) & LOOP_MODULES)
    ]
    assert crossings == []


ASYNCIO_RUN = textwrap.dedent(
    """
    import asyncio, sys
    from dataclasses import dataclass
    from typing import ClassVar

    import river_asyncio
    import river_asyncio.testing
    from river_asyncio import Client, EventKind, Migrator, QueueConfig, Workers

    @dataclass
    class Ping:
        kind: ClassVar[str] = "layering_ping"

    async def main(url: str) -> None:
        workers = Workers()

        @workers.job(Ping)
        async def ping(args: Ping) -> None:
            await asyncio.sleep(0)

        async with Client(url, workers=workers, queues={"default": QueueConfig(max_workers=2)}) as client:
            sub = client.subscribe([EventKind.JOB_COMPLETED])
            await client.insert(Ping())
            assert (await sub.get(15)).job.kind == "layering_ping"

    Migrator(sys.argv[1]).migrate_up()
    asyncio.run(main(sys.argv[1]))
    print(sorted(m for m in sys.modules if m == "trio" or m.startswith("trio.")))
    """
)


def test_river_asyncio_loads_no_trio_module_even_running_a_client(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'asyncio.sqlite3'}"
    result = subprocess.run([sys.executable, "-c", ASYNCIO_RUN, url], capture_output=True, text=True,
                            cwd=ROOT, check=False, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
