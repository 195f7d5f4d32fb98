"""A small synchronous executor: runs intents' plans on one DB-API connection.

The connection is psycopg 3 (autocommit) or sqlite3-style (isolation_level
None); transactions are explicit. Inside a caller's transaction
(``in_caller_tx=True``) no BEGIN/COMMIT is issued: the caller owns it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from river_db.connect import OWN_PREPARES, use_unprepared
from river_protocol.dialects.base import Dialect, drive
from river_protocol.intents import CopyRows, Intent, Statement

log = logging.getLogger(__name__)

# "prepared statement ... does not exist" / "... already exists": a pooler that hid itself
# from ``behind_pooler`` moved us to another server connection.
PREPARED_STATEMENT_LOST = frozenset({"26000", "42P05"})
_TUPLES_OK = 2  # libpq's PGRES_TUPLES_OK: the statement returned rows (maybe none)
_BINARY_CURSORS: dict[type, bool] = {}


def _takes_binary(cursor_type: type) -> bool:
    """Whether a psycopg 3 cursor class can return binary results: client-side binding cursors
    (Django's, for one) can't."""
    known = _BINARY_CURSORS.get(cursor_type)
    if known is None:
        # A psycopg cursor is in hand, so psycopg is installed.
        from psycopg import AsyncClientCursor, ClientCursor

        known = _BINARY_CURSORS[cursor_type] = not issubclass(cursor_type, (ClientCursor, AsyncClientCursor))
    return known


def copy_sql(step: CopyRows) -> str:
    """The ``COPY ... FROM STDIN`` statement of ``step``."""
    return f"COPY {step.table} ({', '.join(step.columns)}) FROM STDIN"


def psycopg_binary(cur: Any, step: Statement) -> bool:
    """Whether to ask psycopg for ``step``'s rows in binary format."""
    return step.binary and _takes_binary(type(cur))


def psycopg_fetches(cur: Any, step: Statement) -> bool:
    """Whether the statement psycopg cursor ``cur`` just ran returned rows to fetch: its result
    says so (``description`` would build a Column per column on every statement)."""
    result = cur.pgresult
    return step.fetch and result is not None and result.status == _TUPLES_OK


def plain_tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
    # psycopg's default rows are tuples already; copy only other row types.
    return rows if not rows or type(rows[0]) is tuple else [tuple(r) for r in rows]


def _stop_preparing(conn: Any, exc: BaseException) -> None:
    """Turn preparing off on ``conn`` for good; the failed statement is retried by its owner
    (the completer, the producer) or raised to the caller."""
    log.warning("river: a prepared statement was not found on the server (%s): a connection "
                "pooler in transaction mode? No longer preparing statements on this connection", exc)
    use_unprepared(conn)


def execute_step(conn: Any, step: Statement | CopyRows) -> list[tuple[Any, ...]]:
    """Run one statement on a blocking DB-API connection (psycopg 3, sqlite3-style, or a caller's)."""
    if isinstance(step, CopyRows):
        with conn.cursor() as cur, cur.copy(copy_sql(step)) as copy:
            for row in step.rows:
                copy.write_row(row)
        return []
    cur = conn.cursor()
    try:
        if hasattr(cur, "pgresult"):
            # psycopg 3: it can return binary results. Statements are prepared only on
            # River's own direct connections (OWN_PREPARES).
            try:
                cur.execute(step.sql, step.params, binary=psycopg_binary(cur, step),
                            prepare=None if getattr(conn, OWN_PREPARES, False) else False)
            except Exception as exc:
                if getattr(exc, "sqlstate", None) in PREPARED_STATEMENT_LOST and getattr(
                        conn, OWN_PREPARES, False):
                    _stop_preparing(conn, exc)
                raise
            fetch = psycopg_fetches(cur, step)
        else:
            cur.execute(step.sql, step.params)
            fetch = step.fetch and cur.description is not None
        return plain_tuples(cur.fetchall()) if fetch else []
    finally:
        cur.close()


class Executor:
    def __init__(self, conn: Any, dialect: Dialect, *, in_caller_tx: bool = False) -> None:
        self.conn = conn
        self.dialect = dialect
        self._in_tx = in_caller_tx

    def execute(self, step: Statement | CopyRows) -> list[tuple[Any, ...]]:
        return execute_step(self.conn, step)

    @contextmanager
    def transaction(self) -> Iterator[Executor]:
        if self._in_tx:
            yield self
            return
        self.execute(Statement(self.dialect.begin_sql, fetch=False))
        self._in_tx = True
        try:
            yield self
        except BaseException:
            self._in_tx = False
            self.execute(Statement("ROLLBACK", fetch=False))
            raise
        self._in_tx = False
        self.execute(Statement("COMMIT", fetch=False))

    def run(self, intent: Intent) -> Any:
        if not self._in_tx and self.dialect.needs_transaction(intent):
            with self.transaction():
                return drive(self.dialect.plan(intent), self.execute)
        return drive(self.dialect.plan(intent), self.execute)
