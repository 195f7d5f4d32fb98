"""A workflow's tasks laid out as a graph (river_ui.graph)."""

from __future__ import annotations

from river_ui.graph import COLUMN_GAP, MARGIN, NODE_HEIGHT, NODE_WIDTH, ROW_GAP, GraphTask, layout


def task(name: str, *deps: str, state: str = "completed", job_id: int = 1) -> GraphTask:
    return GraphTask(name, deps, state, job_id)


def test_columns_follow_the_deepest_dep_and_rows_their_deps() -> None:
    graph = layout(
        [
            task("load", "t_orders", "t_refunds"),
            task("t_refunds", "extract"),
            task("extract"),
            task("t_orders", "extract"),
            task("notify", "load"),
            task("audit"),
        ]
    )
    where = {n.task.name: (n.column, n.row) for n in graph.nodes}
    assert where == {
        "audit": (0, 0),
        "extract": (0, 1),
        "t_orders": (1, 0),
        "t_refunds": (1, 1),
        "load": (2, 0),
        "notify": (3, 0),
    }
    assert graph.width == 2 * MARGIN + 4 * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
    assert graph.height == 2 * MARGIN + 2 * (NODE_HEIGHT + ROW_GAP) - ROW_GAP
    edge = next(e for e in graph.edges if (e.source, e.target) == ("extract", "t_refunds"))
    assert (edge.x1, edge.y1) == (MARGIN + NODE_WIDTH, MARGIN + (NODE_HEIGHT + ROW_GAP) + NODE_HEIGHT / 2)
    assert (edge.x2, edge.y2) == (MARGIN + NODE_WIDTH + COLUMN_GAP, edge.y1)
    assert len(graph.edges) == 5


def test_rows_follow_the_mean_row_of_the_deps() -> None:
    graph = layout([task("a"), task("b"), task("from_b", "b"), task("from_a", "a")])
    rows = {n.task.name: n.row for n in graph.nodes}
    assert rows["from_a"] == rows["a"] == 0 and rows["from_b"] == rows["b"] == 1  # no crossing


def test_deps_outside_the_workflow_and_cycles_do_not_break_it() -> None:
    graph = layout([task("x", "gone"), task("p", "q"), task("q", "p")])
    assert {n.task.name for n in graph.nodes} == {"x", "p", "q"}
    assert all(e.source in {"p", "q"} for e in graph.edges)
    empty = layout([])
    assert (empty.width, empty.height, empty.nodes, empty.edges) == (0, 0, (), ())
