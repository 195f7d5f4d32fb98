"""Which way an async client takes ``tx=``: on asyncio the asyncio-native runner
(``river_anyio.caller_tx.native_runner_for``) is asked first and the blocking kinds go to worker
threads; under trio the native runner is never asked and the asyncio-only kinds are refused
(``river_anyio.caller_tx._native_executor``, the one place deciding).

The real native runners (psycopg ``AsyncConnection``, SQLAlchemy's asyncio objects, asyncpg) are
tested in ``test_caller_tx_asyncio_runners.py``; here a stand-in replaces ``native_runner_for``:
its runner is a ``ThreadRunner`` on a real SQLite connection, so the insert, the commit and the
rollback are real and only the hand-over is faked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import anyio
import psycopg
import pytest
import sqlalchemy.ext.asyncio as sa_async

import river_anyio.caller_tx
import river_asyncio
import river_trio
from river_anyio.caller_tx import asyncio_only_kind, executor_for_caller_tx
from river_anyio.executor import ThreadRunner
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError


@dataclass
class Note:
    kind: ClassVar[str] = "tx_hook_note"
    text: str = ""


class NativeTx:
    """Stands for an asyncio-native transaction: wraps a blocking SQLite connection in BEGIN."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn


@pytest.fixture
def migrated_sqlite(tmp_path: Path) -> str:
    path = str(tmp_path / "river.sqlite3")
    conn = connect_sqlite(path)
    Migrator(conn).migrate_up()
    conn.close()
    return path


@pytest.fixture
def fake_native(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A stand-in ``native_runner_for`` taking ``NativeTx``; returns the calls it received."""
    calls: list[dict[str, Any]] = []

    async def native_runner_for(tx: Any, *, schema: str | None, expect: str | None) -> Any:
        calls.append({"tx": tx, "schema": schema, "expect": expect})
        if not isinstance(tx, NativeTx):
            return None
        return ThreadRunner(tx.conn, kind="sqlite"), SQLiteDialect(schema)

    monkeypatch.setattr(river_anyio.caller_tx, "native_runner_for", native_runner_for)
    return calls


def _count(path: str) -> int:
    conn = connect_sqlite(path)
    try:
        return int(conn.execute("SELECT count(*) FROM river_job WHERE kind = 'tx_hook_note'").fetchone()[0])
    finally:
        conn.close()


def test_on_asyncio_the_native_runner_carries_the_insert_and_the_callers_commit_or_rollback(
    migrated_sqlite: str, fake_native: list[dict[str, Any]]
) -> None:
    async def main() -> None:
        client = river_asyncio.Client(migrated_sqlite, skip_unknown_job_check=True)
        for commit in (False, True):
            conn = connect_sqlite(migrated_sqlite)
            try:
                conn.execute("BEGIN IMMEDIATE")
                result = await client.insert(Note(text=str(commit)), tx=NativeTx(conn))
                assert result.job.kind == "tx_hook_note"
                conn.commit() if commit else conn.rollback()
            finally:
                conn.close()
        await client.aclose()

    anyio.run(main, backend="asyncio")
    assert _count(migrated_sqlite) == 1  # the rolled-back insert took its job with it
    assert [c["expect"] for c in fake_native] == ["sqlite", "sqlite"]
    assert all(isinstance(c["tx"], NativeTx) and c["schema"] is None for c in fake_native)


def test_on_asyncio_the_native_runner_is_asked_first_and_declines_the_blocking_kinds(
    migrated_sqlite: str, fake_native: list[dict[str, Any]]
) -> None:
    async def main() -> None:
        native = connect_sqlite(migrated_sqlite)
        blocking = connect_sqlite(migrated_sqlite)
        try:
            native.execute("BEGIN")
            ex = await executor_for_caller_tx(NativeTx(native), expect="sqlite")
            assert ex.runner.__class__ is ThreadRunner and ex.conn.__class__ is NativeTx
            await ex.execute(_insert_note())
            native.commit()
            blocking.execute("BEGIN")  # the hook says None: the thread path takes it, as before
            ex = await executor_for_caller_tx(blocking, expect="sqlite")
            assert ex.conn is blocking
            await ex.execute(_insert_note())
            blocking.rollback()
        finally:
            native.close()
            blocking.close()

    anyio.run(main, backend="asyncio")
    asked = [c["tx"] for c in fake_native]  # the hook is asked first for every kind, and declines this one
    assert len(asked) == 2 and isinstance(asked[0], NativeTx) and not isinstance(asked[1], NativeTx)
    assert _count(migrated_sqlite) == 1


def _insert_note() -> Any:
    from river_protocol.intents import Statement

    return Statement("INSERT INTO river_job (kind, args, queue, state, max_attempts, priority) "
                     "VALUES ('tx_hook_note', '{}', 'default', 'available', 1, 1)", fetch=False)


def test_under_trio_the_native_runner_is_never_asked_and_asyncio_kinds_are_refused(
    migrated_sqlite: str, fake_native: list[dict[str, Any]]
) -> None:
    async def main() -> None:
        client = river_trio.Client(migrated_sqlite, skip_unknown_job_check=True)
        conn = connect_sqlite(migrated_sqlite)
        try:
            conn.execute("BEGIN IMMEDIATE")
            await client.insert(Note(text="blocking"), tx=conn)
            conn.commit()
        finally:
            conn.close()
        for tx in _asyncio_only_objects():
            with pytest.raises(ValidationError, match="runs on asyncio only: under trio"):
                await client.insert(Note(), tx=tx)
        await client.aclose()

    anyio.run(main, backend="trio")
    assert fake_native == []
    assert _count(migrated_sqlite) == 1


def test_on_asyncio_an_asyncio_library_object_that_is_no_transaction_is_refused() -> None:
    engine = sa_async.create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")

    async def main() -> None:
        with pytest.raises(ValidationError, match="SQLAlchemy's asyncio AsyncEngine cannot be used as tx="):
            await executor_for_caller_tx(engine)

    anyio.run(main, backend="asyncio")


def _asyncio_only_objects() -> list[Any]:
    """One of each asyncio-only kind, built without connecting (none is used past detection)."""
    import asyncpg  # type: ignore[import-untyped]

    engine = sa_async.create_async_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    bare_asyncpg = asyncpg.connection.Connection.__new__(asyncpg.connection.Connection)
    bare_asyncpg._aborted = True  # reads as closed, so its __del__ has nothing to clean up
    return [
        psycopg.AsyncConnection.__new__(psycopg.AsyncConnection),
        engine.connect(),  # an AsyncConnection, not started
        sa_async.AsyncSession(engine),
        bare_asyncpg,
    ]


def test_asyncio_only_kind_names_each_kind_and_nothing_else() -> None:
    names = [asyncio_only_kind(tx) for tx in _asyncio_only_objects()]
    assert names == ["psycopg's AsyncConnection", "SQLAlchemy's asyncio AsyncConnection",
                     "SQLAlchemy's asyncio AsyncSession", "asyncpg's Connection"]
    conn = connect_sqlite(":memory:")
    try:
        assert asyncio_only_kind(conn) is None
        assert asyncio_only_kind(psycopg.Connection.__new__(psycopg.Connection)) is None
    finally:
        conn.close()
