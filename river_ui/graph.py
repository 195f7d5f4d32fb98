"""A workflow's tasks as a graph for an inline SVG drawn on the server.

Layered left to right: a task's column is one past its deepest dep (tasks whose deps are
all outside the workflow start the first column). Within a column tasks are ordered by the
mean row of their deps (one barycentre pass, which removes most crossings of a typical
fan-out/fan-in), then by name. Edges run from a dep's right side to the task's left side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NODE_WIDTH = 170
NODE_HEIGHT = 34
COLUMN_GAP = 60
ROW_GAP = 14
MARGIN = 10


@dataclass(frozen=True, slots=True)
class GraphTask:
    name: str
    deps: tuple[str, ...]
    state: str
    job_id: int


@dataclass(frozen=True, slots=True)
class Node:
    task: GraphTask
    x: float
    y: float
    column: int
    row: int


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True, slots=True)
class Graph:
    width: int
    height: int
    node_width: int
    node_height: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def _columns(tasks: Mapping[str, GraphTask]) -> dict[str, int]:
    """Each task's column: 0 without deps in the workflow, else one past its deepest dep."""
    column: dict[str, int] = {}
    visiting: set[str] = set()

    def depth(name: str) -> int:
        if name in column:
            return column[name]
        if name in visiting:  # a cycle in stored metadata: cut it rather than recurse forever
            return 0
        visiting.add(name)
        deps = [d for d in tasks[name].deps if d in tasks]
        column[name] = 1 + max((depth(d) for d in deps), default=-1)
        visiting.discard(name)
        return column[name]

    for name in sorted(tasks):
        depth(name)
    return column


def layout(tasks: Sequence[GraphTask]) -> Graph:
    by_name = {t.name: t for t in tasks}
    column = _columns(by_name)
    columns: dict[int, list[str]] = {}
    for name in sorted(by_name):
        columns.setdefault(column[name], []).append(name)
    row: dict[str, int] = {}
    for c in sorted(columns):

        def key(name: str) -> tuple[float, str]:
            rows = [row[d] for d in by_name[name].deps if d in row]
            return (sum(rows) / len(rows) if rows else 0.0, name)

        for i, name in enumerate(sorted(columns[c], key=key)):
            row[name] = i
    nodes = {
        name: Node(
            by_name[name],
            MARGIN + column[name] * (NODE_WIDTH + COLUMN_GAP),
            MARGIN + row[name] * (NODE_HEIGHT + ROW_GAP),
            column[name],
            row[name],
        )
        for name in by_name
    }
    edges = tuple(
        Edge(
            dep,
            node.task.name,
            nodes[dep].x + NODE_WIDTH,
            nodes[dep].y + NODE_HEIGHT / 2,
            node.x,
            node.y + NODE_HEIGHT / 2,
        )
        for node in sorted(nodes.values(), key=lambda n: n.task.name)
        for dep in node.task.deps
        if dep in nodes
    )
    if not nodes:
        return Graph(0, 0, NODE_WIDTH, NODE_HEIGHT, (), ())
    columns_used = max(column.values()) + 1
    rows_used = max(len(v) for v in columns.values())
    width = MARGIN * 2 + columns_used * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
    height = MARGIN * 2 + rows_used * (NODE_HEIGHT + ROW_GAP) - ROW_GAP
    return Graph(
        width,
        height,
        NODE_WIDTH,
        NODE_HEIGHT,
        tuple(sorted(nodes.values(), key=lambda n: (n.column, n.row))),
        edges,
    )
