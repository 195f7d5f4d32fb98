"""The sync connection utilities both drivers share (river_db.connect)."""

from __future__ import annotations

import pytest

from river_db.connect import check_pool_size, dialect_for
from river_db.sqlite import open_sqlite, sqlite_reader_count, sqlite_reset, sqlite_to_explicit
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError


def test_check_pool_size() -> None:
    check_pool_size(1)
    with pytest.raises(ValidationError, match="pool_size must be at least 1, got 0"):
        check_pool_size(0)


def test_sqlite_reader_count_is_zero_for_private_memory() -> None:
    assert sqlite_reader_count(":memory:", 4) == 0
    assert sqlite_reader_count("", 4) == 0
    assert sqlite_reader_count("file::memory:?cache=shared", 4) == 0
    assert sqlite_reader_count("/tmp/x.db", 4) == 4
    assert sqlite_reader_count("/tmp/x.db", -1) == 0


def test_dialect_for() -> None:
    assert isinstance(dialect_for("postgres", "s"), PostgresDialect)
    sqlite = dialect_for("sqlite", None)
    assert isinstance(sqlite, SQLiteDialect)


def test_open_reset_and_explicit_sqlite(tmp_path: object) -> None:
    path = f"{tmp_path}/c.db"
    writer = open_sqlite(path, busy_timeout_ms=100, readonly=False)
    reader = open_sqlite(path, busy_timeout_ms=100, readonly=True)
    try:
        writer.execute("CREATE TABLE t (x INTEGER)")
        assert reader.execute("PRAGMA query_only").fetchone()[0] == 1
        previous = sqlite_to_explicit(writer)
        assert writer.isolation_level is None
        writer.execute("BEGIN")
        writer.execute("INSERT INTO t VALUES (1)")
        assert sqlite_reset(writer) is True
        assert not writer.in_transaction
        writer.isolation_level = previous
        assert writer.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    finally:
        reader.close()
        writer.close()


def test_caller_tx_must_match_the_clients_dialect(tmp_path: object) -> None:
    from river_db.caller_tx import resolve_caller_tx
    from river_db.sqlite import connect_sqlite

    conn = connect_sqlite(f"{tmp_path}/tx.db")
    try:
        conn.execute("BEGIN")
        _, dialect = resolve_caller_tx(conn, None, expect="sqlite")
        assert dialect.name == "sqlite"
        with pytest.raises(ValidationError, match="tx is a sqlite transaction but the client uses postgres"):
            resolve_caller_tx(conn, None, expect="postgres")
    finally:
        conn.close()
