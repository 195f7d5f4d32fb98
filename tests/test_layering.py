"""The import contract between the packages (the layering the README's layout describes).

- ``river_protocol`` imports no other package of ours (its purity is tests/protocol/test_purity.py);
- ``river_db``, the neutral layer, imports neither driver nor the tools;
- ``river_sync`` and ``river_trio`` import each other never, and the tools never;
- ``river_otel`` (the OpenTelemetry middleware) imports neither driver nor the tools, and at run
  time needs only ``opentelemetry-api`` of OpenTelemetry;
- ``river_tools`` may import anything.

Checked twice: statically over every import statement (also inside functions and
``TYPE_CHECKING`` blocks), and by importing every module of a package in a fresh
interpreter and looking at what got loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("river_protocol", "river_db", "river_sync", "river_trio", "river_tools", "river_otel", "conformance")

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "river_protocol": ("river_db", "river_sync", "river_trio", "river_tools", "river_otel", "conformance"),
    "river_db": ("river_sync", "river_trio", "river_tools", "river_otel"),
    "river_sync": ("river_trio", "river_tools", "river_otel"),
    "river_trio": ("river_sync", "river_tools", "river_otel"),
    "river_otel": ("river_sync", "river_trio", "river_tools", "conformance"),
}


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


@pytest.mark.parametrize("package", ["river_db", "river_sync", "river_trio", "river_otel"])
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
