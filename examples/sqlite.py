"""River on an embedded SQLite file: no server, the same schema and jobs as River's Go SQLite driver.

Pass a path (``jobs.sqlite3``), a ``sqlite://relative/path`` or
``sqlite:///absolute/path`` URL, or leave it out for a temporary file.

Notes on SQLite:
- River's schema stores JSONB, which needs SQLite >= 3.45. The stdlib
  ``sqlite3`` is used when it is new enough, otherwise sqlean-py (SQLite 3.50).
- Connections run in WAL mode: readers (this process, other processes, the
  ``sqlite3`` shell) keep reading while a job is being written. Writers take
  turns: each River write is a short ``BEGIN IMMEDIATE`` transaction, and a
  writer that finds the file locked waits up to the busy timeout (5 s).
- There is no LISTEN/NOTIFY: clients learn about new jobs from their own
  inserts at once, and from other processes through River's notification
  table or their fetch poll (``QueueConfig.fetch_poll_interval``, 1 s by default).
- Keep the file on a local disk; WAL does not work over network filesystems.
- Several processes may work one file; one of them is elected leader and runs
  maintenance and periodic jobs, as on Postgres.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import ClassVar

from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_sync import Client, EventKind, QueueConfig, WorkContext, Workers


@dataclass
class ThumbnailArgs:
    kind: ClassVar[str] = "thumbnail"
    photo_id: int


workers = Workers()


@workers.job(ThumbnailArgs)
def thumbnail(ctx: WorkContext, args: ThumbnailArgs) -> None:
    ctx.record_output({"thumbnail": f"thumbs/{args.photo_id}.jpg"})  # stored in the job's metadata


def database_path(argv: list[str]) -> str:
    if len(argv) > 1:
        return argv[1]
    if os.environ.get("RIVER_DATABASE_URL"):
        return os.environ["RIVER_DATABASE_URL"]
    return os.path.join(tempfile.mkdtemp(prefix="river-example-"), "jobs.sqlite3")


def main(argv: list[str] | None = None) -> int:
    path = database_path(sys.argv if argv is None else argv)
    if path.startswith(("postgres://", "postgresql://")):
        print("sqlite: skipped: this example is about SQLite; give it a file path")
        return 0
    with Migrator(path) as migrator:  # a plain path means SQLite
        migrator.migrate_up()

    client = Client(path, workers=workers, queues={"default": QueueConfig(max_workers=4)})
    with client.subscribe([EventKind.JOB_COMPLETED]) as completed, client:
        client.insert_many([ThumbnailArgs(photo_id=n) for n in range(1, 4)])
        for _ in range(3):
            job = completed.get(timeout=10).job
            assert job is not None
            print(f"job {job.id} completed: output {job.metadata['output']}")

    # Any SQLite client can read the jobs; a plain connection shows what River stored.
    file = path.split("://", 1)[-1]
    conn = connect_sqlite(file)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        rows = conn.execute("SELECT id, kind, state, json(args) FROM river_job ORDER BY id").fetchall()
    finally:
        conn.close()
    print(f"journal mode: {mode}")
    for row in rows:
        print("  ", *row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
