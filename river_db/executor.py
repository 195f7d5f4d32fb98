"""A small synchronous executor: runs intents' plans on one DB-API connection.

The connection is psycopg 3 (autocommit) or sqlite3-style (isolation_level
None); transactions are explicit. Inside a caller's transaction
(``in_caller_tx=True``) no BEGIN/COMMIT is issued: the caller owns it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from river_protocol.dialects.base import Dialect, drive
from river_protocol.intents import CopyRows, Intent, Statement


class Executor:
    def __init__(self, conn: Any, dialect: Dialect, *, in_caller_tx: bool = False) -> None:
        self.conn = conn
        self.dialect = dialect
        self._in_tx = in_caller_tx

    def execute(self, step: Statement | CopyRows) -> list[tuple[Any, ...]]:
        if isinstance(step, CopyRows):
            cols = ", ".join(step.columns)
            with self.conn.cursor() as cur, cur.copy(f"COPY {step.table} ({cols}) FROM STDIN") as copy:
                for row in step.rows:
                    copy.write_row(row)
            return []
        cur = self.conn.cursor()
        try:
            cur.execute(step.sql, step.params)
            if step.fetch and cur.description is not None:
                rows = cur.fetchall()
                # psycopg's default rows are tuples already; copy only other row types.
                return rows if not rows or type(rows[0]) is tuple else [tuple(r) for r in rows]
            return []
        finally:
            cur.close()

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
        if intent.transactional and not self._in_tx:
            with self.transaction():
                return drive(self.dialect.plan(intent), self.execute)
        return drive(self.dialect.plan(intent), self.execute)
