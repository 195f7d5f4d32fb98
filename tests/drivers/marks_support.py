"""Test-local intents on a ``marks`` table, and a ``caller_rows`` table a caller writes beside
them, for the blocking database layer's tests (tests/drivers/test_database.py) and the threaded
client's caller transactions (tests/drivers/test_caller_tx_sync.py).

The intents are registered into both dialects' planner tables, so those tests exercise the I/O
layer without depending on River's own statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from river_db.sqlite import connect_sqlite
from river_protocol.dialects.base import Dialect, Plan
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.intents import Intent, Statement


@dataclass(frozen=True)
class AddMark(Intent):
    """Insert a mark, then count marks: two statements that must share one transaction."""

    value: str
    transactional = True


@dataclass(frozen=True)
class CountMarks(Intent):
    value: str | None = None


def _ph(dialect: Dialect) -> str:
    return "%s" if dialect.paramstyle == "format" else "?"


def plan_add_mark(dialect: Any, intent: AddMark) -> Plan[int]:
    yield Statement(f"INSERT INTO {dialect.prefix}marks (v) VALUES ({_ph(dialect)})", (intent.value,),
                    fetch=False)
    rows = yield Statement(f"SELECT count(*) FROM {dialect.prefix}marks")
    return int(rows[0][0])


def plan_count_marks(dialect: Any, intent: CountMarks) -> Plan[int]:
    if intent.value is None:
        rows = yield Statement(f"SELECT count(*) FROM {dialect.prefix}marks")
    else:
        rows = yield Statement(f"SELECT count(*) FROM {dialect.prefix}marks WHERE v = {_ph(dialect)}",
                               (intent.value,))
    return int(rows[0][0])


for _cls in (PostgresDialect, SQLiteDialect):
    _cls.planners()[AddMark] = plan_add_mark
    _cls.planners()[CountMarks] = plan_count_marks


CALLER_TABLE = "CREATE TABLE IF NOT EXISTS caller_rows (id integer PRIMARY KEY, note text NOT NULL)"
MARKS_TABLE = "CREATE TABLE IF NOT EXISTS marks (v text NOT NULL)"


def pg_setup(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(MARKS_TABLE)
        conn.execute(CALLER_TABLE.replace("integer PRIMARY KEY", "serial PRIMARY KEY"))
        conn.execute("TRUNCATE marks, caller_rows")


def pg_count(url: str, table: str, where: str = "") -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table} {where}").fetchone()
        assert row is not None
        return int(row[0])


def sqlite_setup(path: str) -> None:
    conn = connect_sqlite(path)
    conn.execute(MARKS_TABLE)
    conn.execute(CALLER_TABLE)
    conn.close()




def sa_url(url: str) -> str:
    """``url`` (postgresql://) for SQLAlchemy's psycopg 3 driver."""
    return "postgresql+psycopg://" + url.split("://", 1)[1]
