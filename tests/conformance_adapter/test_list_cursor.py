"""River's harness leaf List/CursorInterchange over stdio, on Postgres and SQLite.

The leaf's steps with a Python writer and a Python reader: the same pages and cursor text from
both, each resuming from the other's cursor; ``time`` ordered by the first listed state's column
for every job and its cursor; NULLs last ascending and first descending, pages ending on one.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from river_db.sqlite import connect_sqlite
from tests.conformance_adapter.adapter_process import AdapterProcess, adapter_in_schema, echo
from tests.conftest import pg_base_url

# Go's encoder escapes <, > and &, and the three ~ make the cursor text hold a "-".
CURSOR_KIND = "conformance_cursor<>&~~~"
ECHO = "conformance_echo"

Case = tuple[str, str, list[int] | None, list[str]]


def _cursor_interchange(
    writer: AdapterProcess, reader: AdapterProcess, insert_raw: Callable[[str], int]
) -> None:
    ids: dict[str, list[int]] = {ECHO: [], CURSOR_KIND: []}
    for i in range(3):
        # Fractional seconds Go writes with trailing zeros trimmed (.12, .22, .32).
        at = f"2099-01-01T00:00:0{i + 1}.{i + 1}2Z"
        [scheduled] = writer.insert(echo(f"cursor {i}", "", scheduled_at=at, queue="nowhere"))
        ids[ECHO].append(scheduled["job"]["id"])
        ids[CURSOR_KIND].append(insert_raw(CURSOR_KIND))

    def verify(cases: list[Case]) -> None:
        for kind, order_by, order, states in cases:
            for direction in ("asc", "desc"):
                what = f"{kind} by {order_by} {direction} in {states}"
                expected = [ids[kind][i] for i in order] if order else list(ids[kind])
                if direction == "desc":
                    expected.reverse()
                params: dict[str, Any] = {"direction": direction, "kinds": [kind], "limit": 2,
                                          "order_by": order_by, "states": states}
                page, again = writer.call("list", params), reader.call("list", params)
                assert [job["id"] for job in page["jobs"]] == expected[:2], what
                assert page == again, what
                assert page["cursor"], what
                if kind == CURSOR_KIND:
                    assert "-" in page["cursor"], what
                rest = reader.call("list", {**params, "after": page["cursor"]})
                assert [job["id"] for job in rest["jobs"]] == expected[2:], what

    verify([(ECHO, "id", None, []), (ECHO, "scheduled_at", None, ["scheduled"]),
            (ECHO, "time", None, ["scheduled"]), (CURSOR_KIND, "id", None, [])])
    # Cancelled in id order, so finalized_at grows with the id.
    for kind in (ECHO, CURSOR_KIND):
        for job_id in ids[kind]:
            writer.call("cancel", {"id": job_id})
    verify([(kind, field, None, ["cancelled"]) for kind in (ECHO, CURSOR_KIND)
            for field in ("finalized_at", "time")])
    # The retried middle job is available, scheduled now, with no finalized_at.
    writer.call("retry", {"id": ids[ECHO][1]})
    verify([(ECHO, "time", [0, 2, 1], ["cancelled", "available"]),
            (ECHO, "time", [1, 0, 2], ["available", "cancelled"])])
    page = writer.call("list", {"kinds": [ECHO], "limit": 2, "order_by": "time",
                                "states": ["available", "cancelled"]})
    # The cursor holds the first listed state's column (scheduled_at) of a cancelled job.
    assert base64.urlsafe_b64decode(page["cursor"]).endswith(b'"time":"2099-01-01T00:00:01.12Z"}')
    # With the last one retried too, pages end on a NULL finalized_at.
    writer.call("retry", {"id": ids[ECHO][2]})
    verify([(ECHO, "time", [0, 1, 2], ["cancelled", "available"])])


@pytest.mark.postgres
def test_cursor_interchange_on_postgres() -> None:
    with adapter_in_schema(pg_base_url()) as (process, schema):
        def insert_raw(kind: str) -> int:
            row = schema.conn.execute("INSERT INTO river_job (args, kind, max_attempts, queue, state)"
                                      " VALUES ('{}', %s, 25, 'nowhere', 'available') RETURNING id",
                                      (kind,)).fetchone()
            assert row is not None
            return int(row[0])

        _cursor_interchange(process, process, insert_raw)


def test_cursor_interchange_on_sqlite(tmp_path: Path) -> None:
    path = str(tmp_path / "river.sqlite3")
    writer = AdapterProcess("sqlite", path, "unused-on-sqlite")
    reader = AdapterProcess("sqlite", path, "unused-on-sqlite")
    try:
        writer.call("migrate")

        def insert_raw(kind: str) -> int:
            conn = connect_sqlite(path)
            try:
                row = conn.execute("INSERT INTO river_job (kind, queue) VALUES (?, 'nowhere') RETURNING id",
                                   (kind,)).fetchone()
            finally:
                conn.close()
            return int(row[0])

        _cursor_interchange(writer, reader, insert_raw)
    finally:
        assert writer.close() == 0, writer.stderr
        assert reader.close() == 0, reader.stderr
