"""The benchmark modules import one another without a circle (lazy imports inside functions count)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench_imports() -> dict[str, set[str]]:
    """module -> the ``benchmarks`` modules it imports, anywhere in its source."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "benchmarks":
                found.update(f"benchmarks.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks."):
                found.add(node.module or "")
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("benchmarks."))
        graph[f"benchmarks.{path.stem}"] = found
    return graph


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (its modules in order), or [] when there is none."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str]:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return []
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt, [*path, node])
            if found:
                return found
        done.add(node)
        return []

    for node in sorted(graph):
        found = visit(node, [])
        if found:
            return found
    return []


def test_the_benchmark_modules_import_one_another_without_a_circle() -> None:
    assert circle(bench_imports()) == []


def test_the_circle_finder_finds_one() -> None:
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) == []
