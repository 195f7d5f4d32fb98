"""River's tables in a Postgres schema of their own (Postgres only).

``schema=`` makes the migrator and the client qualify every table, function
and notification channel with that schema instead of following the
connection's ``search_path``. Go clients configured with the same
``Schema`` share the jobs. Two schemas in one database are two independent
River installations.

On SQLite the example only prints a note and exits 0.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import ClassVar

import psycopg

from river_db.migrator import Migrator
from river_sync import Client, EventKind, QueueConfig, WorkContext, Workers

SCHEMA = "billing_river"


@dataclass
class InvoiceArgs:
    kind: ClassVar[str] = "invoice"
    customer_id: int


workers = Workers()


@workers.job(InvoiceArgs)
def invoice(ctx: WorkContext, args: InvoiceArgs) -> None:
    print(f"invoiced customer {args.customer_id} (job {ctx.job.id} in schema {ctx.client.schema})")


def database_url(argv: list[str]) -> str | None:
    if len(argv) > 1:
        return argv[1]
    return os.environ.get("RIVER_DATABASE_URL")


def main(argv: list[str] | None = None) -> int:
    url = database_url(sys.argv if argv is None else argv)
    if url is None or not url.startswith(("postgres://", "postgresql://")):
        print("custom_schema: skipped: schemas need Postgres; "
              "run: python examples/custom_schema.py postgresql://localhost/mydb")
        return 0

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"')
    with Migrator(url, schema=SCHEMA) as migrator:
        migrator.migrate_up()

    client = Client(url, schema=SCHEMA, workers=workers, queues={"default": QueueConfig()})
    with client.subscribe([EventKind.JOB_COMPLETED]) as completed, client:
        client.insert(InvoiceArgs(customer_id=7))
        completed.get(timeout=10)

    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'river_job'"
        ).fetchall()
    print(f"river_job tables in schemas: {sorted(row[0] for row in found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
