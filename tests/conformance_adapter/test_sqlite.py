"""The adapter on SQLite, as the harness runs it there: a bare file path, several processes on one file."""

from __future__ import annotations

from pathlib import Path

from river_db.sqlite import connect_sqlite
from river_tools.conformance_adapter import jsonrpc
from tests.conformance_adapter.adapter_process import AdapterProcess, echo, wait_for


def test_sqlite_methods_over_stdio(tmp_path: Path) -> None:
    path = str(tmp_path / "river.sqlite3")
    first = AdapterProcess("sqlite", path, "unused-on-sqlite")
    second = AdapterProcess("sqlite", path, "unused-on-sqlite")
    try:
        assert first.call("handshake")["driver"] == "sqlite"
        assert first.call("migrate")["versions"][0] == 1
        assert second.call("migrate")["versions"] == []  # the other process sees the schema
        unique = echo("unique", unique={"by_args": True})
        output = echo("on sqlite", "output", metadata={"n": 1.5}, tags=["tag_a"])
        # A batch repeating a unique key is refused whole.
        assert first.error_code("insert", {"jobs": [unique, unique]}) == jsonrpc.REJECTED
        inserted = first.insert(output, unique) + second.insert(unique)
        assert [r["unique_skipped_as_duplicate"] for r in inserted] == [False, False, True]
        # A skipped insert returns the stored job, its kind kept (Unique/SkipKeepsExistingKind).
        keep = echo("keeps kind", queue="nowhere", unique={"by_args": True, "exclude_kind": True})
        kept = first.insert(keep)[0]["job"]
        conn = connect_sqlite(path)
        conn.execute("UPDATE river_job SET kind = 'other_kind' WHERE id = ?", (kept["id"],))
        conn.close()
        stored = first.call("list", {"ids": [kept["id"]]})["jobs"][0]
        assert stored["kind"] == "other_kind"
        assert second.insert(keep) == [{"job": stored, "unique_skipped_as_duplicate": True}]
        assert first.call("list", {"ids": [kept["id"]]})["jobs"] == [stored]
        job = inserted[0]["job"]
        assert job["created_at"].count(".") == 1 and len(job["created_at"].split(".")[1]) <= 4  # ms
        listed = second.call("list", {"ids": [job["id"]], "order_by": "time", "tags_all": ["tag_a"]})
        assert listed["jobs"] == [job] and listed["cursor"]
        assert second.error_code("list", {"metadata": {"n": 1.5}}) == jsonrpc.REJECTED  # as River's SQLite
        assert first.error_code("insert", {"jobs": [echo("x")], "schema": "other"}) == jsonrpc.REJECTED

        second.call("tx_begin", {"tx": "t"})
        in_tx = second.insert(echo("in tx"), tx="t")[0]["job"]
        second.call("tx_end", {"tx": "t", "commit": True})
        second.call("start", {"client_id": "sqlite-worker", "max_workers": 2})
        try:
            def finished() -> bool:
                jobs = first.call("list", {"ids": [job["id"], in_tx["id"]], "states": ["completed"]})["jobs"]
                return len(jobs) == 2

            wait_for("both jobs completed", finished)
            done = first.call("list", {"ids": [job["id"]]})["jobs"][0]
            assert done["metadata"]["output"] == {"message": "on sqlite"}
            assert done["attempted_by"] == ["sqlite-worker"]
        finally:
            second.call("stop")
    finally:
        assert first.close() == 0, first.stderr
        assert second.close() == 0, second.stderr
