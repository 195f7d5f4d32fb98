"""``python -m benchmarks dashboard``: the web dashboard on a million-job ``river_job`` (Postgres).

Fills a scratch database with ``--jobs`` jobs (1,000,000 by default) in one server-side
``INSERT ... SELECT`` spread like a working system's table (mostly completed over a week, a
few percent available, scheduled, retryable, running, pending, discarded, cancelled, over 8
queues, 12 kinds and 20 tags), VACUUM ANALYZEs it, and times each page through the ASGI app
(Starlette's TestClient, no network): the overview and several filtered job lists, including a
filter matching nothing (the worst case of a keyset page) and a page deep in the cursor.
Then prints each query's plan: ``EXPLAIN (ANALYZE, BUFFERS)`` of every statement the
overview's intents and a filtered list run. Target (issue 33): each page under 200 ms on an
idle 2-core machine. Figures only, never assertions; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from benchmarks.scratch import Scratch

JOBS = 1_000_000
ROUNDS = 7
TARGET_MS = 200.0
QUEUES = 8
KINDS = 12

# Per thousand rows, cumulative: the state a row gets from (row number % 1000).
STATE_BANDS = (
    (850, "completed"), (870, "discarded"), (880, "cancelled"), (930, "available"),
    (960, "scheduled"), (975, "retryable"), (985, "running"), (1000, "pending"),
)

PAGES: tuple[tuple[str, str], ...] = (
    ("overview", "/"),
    ("jobs, no filter", "/jobs"),
    ("jobs, state=available", "/jobs?state=available"),
    ("jobs, state=retryable queue=q3", "/jobs?state=retryable&queue=q3"),
    ("jobs, queue=q5 kind=kind_7", "/jobs?queue=q5&kind=kind_7"),
    ("jobs, tag=t4", "/jobs?tag=t4"),
    ("jobs, state=discarded queue=nowhere (no match)", "/jobs?state=discarded&queue=nowhere"),
    ("jobs, id=12345", "/jobs?id=12345"),
    ("a job", "/jobs/12345"),
)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks dashboard", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"rows in river_job (default {JOBS:,})")
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help=f"timed requests per page (default {ROUNDS})"
    )
    parser.add_argument("--no-plans", action="store_true", help="skip the EXPLAIN ANALYZE output")
    args = parser.parse_args(argv)
    if args.jobs < 1000 or args.rounds < 1:
        parser.error("--jobs must be at least 1000 and --rounds at least 1")
    return args


def fill_sql(jobs: int) -> str:
    """One statement inserting ``jobs`` rows spread as described in the module's docstring."""
    bands = " ".join(f"WHEN i % 1000 < {upper} THEN '{state}'" for upper, state in STATE_BANDS)
    finalized = "('completed', 'discarded', 'cancelled')"
    return f"""
        INSERT INTO river_job (kind, args, state, queue, priority, attempt, max_attempts, attempted_at,
                               created_at, scheduled_at, finalized_at, errors, metadata, tags)
        SELECT 'kind_' || (i % {KINDS}), jsonb_build_object('n', i), s.state::river_job_state,
               'q' || (i % {QUEUES}), 1 + i % 4,
               CASE WHEN s.state IN ('available', 'scheduled', 'pending') THEN 0 ELSE 1 END, 25,
               CASE WHEN s.state IN ('available', 'scheduled', 'pending') THEN NULL ELSE t.at END,
               t.at - interval '5 seconds',
               CASE WHEN s.state IN ('scheduled', 'retryable') THEN now() + (i % 3600) * interval '1 second'
                    ELSE t.at - interval '5 seconds' END,
               CASE WHEN s.state IN {finalized} THEN t.at END,
               CASE WHEN s.state IN ('discarded', 'retryable') THEN ARRAY[jsonb_build_object(
                    'at', t.at, 'attempt', 1, 'error', 'boom', 'trace', 'Traceback ...')] END,
               CASE WHEN i % 5000 = 0 THEN '{{"periodic": true, "river:periodic_job_id": "p"}}'::jsonb
                    ELSE '{{}}'::jsonb END,
               ARRAY['t' || (i % 20)]::varchar(255)[]
        FROM generate_series(1, {jobs}) AS i
        CROSS JOIN LATERAL (SELECT CASE {bands} END AS state) AS s
        CROSS JOIN LATERAL (SELECT now() - (i % 604800) * interval '1 second' AS at) AS t
    """


def fill(url: str, jobs: int) -> float:
    """Migrate, insert ``jobs`` rows, VACUUM ANALYZE; seconds taken."""
    import psycopg

    from river_db.migrator import Migrator

    started = time.perf_counter()
    with Migrator(url) as migrator:
        migrator.migrate_up()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(fill_sql(jobs))
        conn.execute("INSERT INTO river_queue (name, created_at, metadata, updated_at) "
                     f"SELECT 'q' || n, now(), '{{}}', now() FROM generate_series(0, {QUEUES - 1}) AS n")
        conn.execute("VACUUM ANALYZE river_job")
    return time.perf_counter() - started


def time_pages(app: Any, pages: Sequence[tuple[str, str]], rounds: int) -> dict[str, list[float]]:
    """Milliseconds per request for each page, after one untimed request (warm caches)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    out: dict[str, list[float]] = {}
    with TestClient(app) as web:
        # A page deep in the list: follow the cursor 20 pages, then time that page.
        url = "/jobs?state=completed"
        for _ in range(20):
            page = web.get(url).text
            marker = 'id="next-page"'
            if marker not in page:
                break
            href = page.split(marker)[0].rsplit('href="', 1)[1].split('"')[0]
            url = href.replace("&amp;", "&").removeprefix("http://testserver")
        for name, path in [*pages, ("jobs, state=completed, 21st page", url)]:
            assert web.get(path).status_code in (200, 404), path
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                response = web.get(path)
                times.append((time.perf_counter() - started) * 1000)
                assert response.status_code in (200, 404), (path, response.status_code)
            out[name] = times
    return out


def report_lines(timings: dict[str, list[float]], target_ms: float = TARGET_MS) -> list[str]:
    lines = []
    for name, times in timings.items():
        median = statistics.median(times)
        verdict = "met" if median < target_ms else "missed"
        lines.append(f"{name:<50} median {median:7.1f} ms  (min {min(times):.1f}, max {max(times):.1f})"
                     f"  [target < {target_ms:.0f} ms: {verdict}]")
    return lines


def explain_intent(conn: Any, intent: Any, schema: str | None = None) -> list[str]:
    """Drive ``intent``'s Postgres plan on ``conn``, printing EXPLAIN (ANALYZE, BUFFERS) of each step."""
    from river_protocol.dialects.postgres import PostgresDialect
    from river_protocol.intents import Statement

    plan = PostgresDialect(schema).plan(intent)
    lines = [f"-- {type(intent).__name__}"]
    rows: list[tuple[Any, ...]] = []
    try:
        step = next(plan)
        while True:
            assert isinstance(step, Statement)
            sql = " ".join(step.sql.split())
            if sql.upper().startswith("EXPLAIN"):
                lines.append(f"   (estimate probe) {sql[:160]}")
            else:
                lines.append(f"   {sql[:300]}{' ...' if len(sql) > 300 else ''}")
                analysed = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + step.sql, step.params).fetchall()
                lines += ["      " + r[0] for r in analysed]
            rows = conn.execute(step.sql, step.params).fetchall() if step.fetch else []
            step = plan.send(rows)
    except StopIteration:
        pass
    return lines


def plan_lines(url: str, exact_up_to: int | None = None) -> list[str]:
    """The plans of the overview's intents and of four filtered lists (``exact_up_to``: the
    count's limit, the dashboard's by default)."""
    import psycopg

    from river_protocol.admin import list_jobs_intent
    from river_protocol.dashboard import OldestAvailable, RunningClients, count_intent, histogram_intent
    from river_protocol.intents import GetLeader

    now = datetime.now(UTC)
    intents: list[Any] = [
        count_intent() if exact_up_to is None else count_intent(exact_up_to),
        OldestAvailable(tuple(f"q{n}" for n in range(QUEUES))),
        histogram_intent(now),
        GetLeader(),
        RunningClients(),
        list_jobs_intent(states=["retryable"], queues=["q3"], order_by="id", descending=True, limit=50),
        list_jobs_intent(states=["discarded"], queues=["nowhere"], order_by="id", descending=True, limit=50),
        list_jobs_intent(queues=["q5"], kinds=["kind_7"], order_by="id", descending=True, limit=50),
        list_jobs_intent(tags_any=["t4"], order_by="id", descending=True, limit=50),
    ]
    lines: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for intent in intents:
            lines += explain_intent(conn, intent)
    return lines


def run(
    url: str, *, jobs: int, rounds: int, plans: bool, say: Callable[[str], None] = print,
    exact_up_to: int | None = None,
) -> dict[str, Any]:
    from river_ui import create_app

    say(f"filling river_job with {jobs:,} jobs ...")
    seconds = fill(url, jobs)
    say(f"filled in {seconds:.1f} s (VACUUM ANALYZE included)")
    timings = time_pages(create_app(database_url=url, refresh_seconds=0), PAGES, rounds)
    for line in report_lines(timings):
        say(line)
    if plans:
        for line in plan_lines(url, exact_up_to):
            say(line)
    return {"jobs": jobs, "timings_ms": timings}


def main(argv: Sequence[str] = ()) -> dict[str, Any]:
    args = parse_args(argv)
    scratch = Scratch()
    try:
        url = scratch.postgres("dashboard")
        return run(url, jobs=args.jobs, rounds=args.rounds, plans=not args.no_plans)
    finally:
        scratch.close()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
