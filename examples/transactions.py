"""Transactional enqueueing: a business row and its job commit together, or neither exists.

Pass the caller's transaction as ``tx=`` and the job is inserted inside it:
no job for an order that rolled back, and no order whose follow-up job was
lost. Here the transaction is a SQLAlchemy ``Connection`` (a ``Session``
works the same way); a psycopg connection or a sqlite3 connection does too,
and ``river_sync.transaction(client)`` opens one when you have none.

The client shares the application's engine, so River uses the same pool.
SQLite needs >= 3.45 for River's schema: ``sqlite_module()`` picks the
stdlib module when it is new enough, otherwise sqlean-py.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import ClassVar

import sqlalchemy as sa

from river_db.migrator import Migrator
from river_db.sqlite import sqlite_module
from river_sync import Client


@dataclass
class SendReceiptArgs:
    kind: ClassVar[str] = "send_receipt"
    order_id: int


def create_engine(url: str) -> sa.Engine:
    if url.startswith(("postgres://", "postgresql://")):
        return sa.create_engine("postgresql+psycopg://" + url.split("://", 1)[1])
    path = url.split("://", 1)[1] if "://" in url else url  # River's sqlite://PATH, or a bare path
    return sa.create_engine(f"sqlite:///{path}", module=sqlite_module())


def place_order(engine: sa.Engine, client: Client, order_id: int, *, fail: bool) -> None:
    with engine.begin() as conn:  # commits at the end of the block, rolls back on an exception
        conn.execute(sa.text("INSERT INTO orders (id, total_cents) VALUES (:id, 4200)"), {"id": order_id})
        client.insert(SendReceiptArgs(order_id=order_id), tx=conn)
        if fail:
            raise RuntimeError("payment declined")


def database_url(argv: list[str]) -> str:
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("RIVER_DATABASE_URL"):
        return os.environ["RIVER_DATABASE_URL"]
    return "sqlite://" + os.path.join(tempfile.mkdtemp(prefix="river-example-"), "river.sqlite3")


def main(argv: list[str] | None = None) -> int:
    url = database_url(sys.argv if argv is None else argv)
    with Migrator(url) as migrator:
        migrator.migrate_up()

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS orders (id integer PRIMARY KEY, total_cents int)"))
        conn.execute(sa.text("DELETE FROM orders"))
    client = Client(engine)  # insert-only; workers would run elsewhere
    try:
        place_order(engine, client, 1, fail=False)
        print("order 1 committed")
        try:
            place_order(engine, client, 2, fail=True)
        except RuntimeError as exc:
            print(f"order 2 rolled back: {exc}")

        with engine.connect() as conn:
            orders = [row.id for row in conn.execute(sa.text("SELECT id FROM orders ORDER BY id"))]
        receipts = [job.args["order_id"] for job in client.jobs.list(kinds=["send_receipt"]).jobs]
        print(f"orders: {orders}; receipt jobs for orders: {receipts}")
        assert orders == receipts == [1]
    finally:
        client.stop()
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
