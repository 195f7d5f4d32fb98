"""One worker process of test_scale: a river_sync Client with several job threads.

``python scale_child.py URL RECORD_FILE MAX_WORKERS``

Prints ``ready`` once the client works, then works ``scale_job`` jobs until its
stdin closes; then stops the client (finishing what it runs) and exits 0.
Every execution appends the job id to RECORD_FILE (one per line), so the parent
sees each run, even one whose outcome never reached the database. On Postgres
each execution also inserts its id into ``scale_done`` and completes the job in
that same transaction (``ctx.complete_in``).
"""

from __future__ import annotations

import dataclasses
import queue
import sys
import threading
from datetime import timedelta
from typing import Any, ClassVar

from river_sync import Client, Database, QueueConfig, WorkContext, Workers


@dataclasses.dataclass
class ScaleJob:
    kind: ClassVar[str] = "scale_job"
    n: int = 0


def main(url: str, record_path: str, max_workers: int) -> int:
    postgres = url.startswith("postgres")
    record_lock = threading.Lock()
    # Connections are reused across jobs: the client may run each job on a new thread.
    idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
    connections: list[Any] = []
    record = open(record_path, "a", buffering=1)  # noqa: SIM115 - closed after the client stops

    def take_connection() -> Any:
        try:
            return idle.get_nowait()
        except queue.Empty:
            import psycopg

            conn = psycopg.connect(url)
            with record_lock:
                connections.append(conn)
            return conn

    def work(ctx: WorkContext, args: ScaleJob) -> None:
        with record_lock:
            record.write(f"{ctx.job.id}\n")
        if postgres:
            conn = take_connection()
            try:
                with conn.transaction():
                    conn.execute("INSERT INTO scale_done (job_id) VALUES (%s)", (ctx.job.id,))
                    ctx.complete_in(conn)
            finally:
                idle.put(conn)

    workers = Workers()
    workers.job(ScaleJob)(work)
    queue_config = QueueConfig(max_workers=max_workers, fetch_cooldown=timedelta(milliseconds=5),
                        fetch_poll_interval=timedelta(milliseconds=50))
    # A small pool: two of these processes plus the test share the server's connection limit.
    database = Database.from_url(url, pool_size=4)
    client = Client(database, workers=workers, queues={"default": queue_config})
    client.start()
    print("ready", flush=True)
    sys.stdin.read()
    client.stop()
    database.close()
    record.close()
    for conn in connections:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
