"""Unique jobs: at most one job per unique key, however many times it is inserted.

A job is unique by kind plus whatever ``UniqueOpts`` names: its args (all of
them, or only the fields declared with ``arg_field(unique=True)``), its
queue, and a time period. While a job with the same key is in one of the
unique states, inserting another returns the existing row with
``unique_skipped_as_duplicate=True``. The key is computed exactly as River's
Go client computes it, so Go and Python inserts dedupe against each other.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from river_db.migrator import Migrator
from river_protocol.args import arg_field
from river_sync import Client, InsertManyParams, InsertOpts, UniqueOpts


@dataclass
class ReconcileAccount:
    kind: ClassVar[str] = "reconcile_account"
    account_id: int = arg_field(unique=True)
    # Not part of the key: a second request with another reason is still a duplicate.
    reason: str = arg_field(default="")

    @staticmethod
    def insert_opts() -> InsertOpts:
        # Defaults for every insert of this kind (an InsertOpts passed to insert() wins field by field).
        return InsertOpts(unique_opts=UniqueOpts(by_args=True, by_period=timedelta(hours=1)))


@dataclass
class RebuildSearchIndex:
    kind: ClassVar[str] = "rebuild_search_index"


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

    client = Client(url)  # insert-only: no queues, nothing to start
    try:
        first = client.insert(ReconcileAccount(account_id=1, reason="nightly"))
        print(f"account 1: inserted job {first.job.id} (skipped: {first.unique_skipped_as_duplicate})")

        again = client.insert(ReconcileAccount(account_id=1, reason="manual"))
        print(f"account 1 again: job {again.job.id} (skipped: {again.unique_skipped_as_duplicate})")

        other = client.insert(ReconcileAccount(account_id=2))
        print(f"account 2: inserted job {other.job.id} (skipped: {other.unique_skipped_as_duplicate})")

        # Uniqueness can also come with the insert, here by kind and queue: one rebuild per queue.
        # One batch may not repeat a unique key (River refuses it whole: UniqueKeyRepeatedError);
        # a later insert of the same key is skipped as a duplicate.
        per_queue = UniqueOpts(by_queue=True)
        batch = client.insert_many([
            InsertManyParams(RebuildSearchIndex(), InsertOpts(queue="search", unique_opts=per_queue)),
            InsertManyParams(RebuildSearchIndex(), InsertOpts(queue="archive", unique_opts=per_queue)),
        ])
        batch.append(client.insert(RebuildSearchIndex(), InsertOpts(queue="search", unique_opts=per_queue)))
        for result in batch:
            print(f"rebuild in {result.job.queue}: job {result.job.id} "
                  f"(skipped: {result.unique_skipped_as_duplicate})")

        total = sum(client.jobs.count_by_state().values())
        print(f"rows in the database: {total}")
    finally:
        client.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
