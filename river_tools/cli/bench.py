"""``river bench``: River's benchmark, with Go River's flags, on either driver.

``--num-total-jobs N`` bulk-loads N jobs then works them all (burn-down);
``--duration D`` keeps a backlog topped up and works for D; with neither it
runs until Ctrl-C, as Go's does. Every job in the database is deleted first,
so the command refuses a database that holds any unless ``--wipe`` (or
``--yes``) allows it. Progress lines and notes go to stdout, or to stderr with
``--json`` so stdout carries only the final JSON object. ``--driver`` picks the
client: ``sync`` (threads), ``trio`` or ``asyncio`` (``river_asyncio``, imported
only for that driver; ``--loop uvloop`` runs it on uvloop).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from typing import Any, TextIO

from river_db.urls import dialect_of_url, sqlite_path
from river_protocol.constants import QUEUE_MAX_WORKERS_MAX
from river_tools.async_runner import LOOPS
from river_tools.bench import (
    FETCH_COOLDOWN,
    FETCH_POLL_INTERVAL,
    INSERT_BATCH,
    MAX_WORKERS_DEFAULT,
    MODE_BURN_DOWN,
    MODE_CONTINUOUS,
    BenchPlan,
    BenchResult,
    Tally,
    count_jobs,
    delete_jobs,
    fast_insert,
    final_lines,
)
from river_tools.cli.main import EXIT_OK, CommandFailed, UsageError, add_database_flags, database_url
from river_tools.cli.output import Progress, parse_duration
from river_tools.gc_tuning import tuned_for_worker

DRIVERS = ("sync", "trio", "asyncio")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench", help="Run River's benchmark",
        description="Insert and work no-op `benchmark` jobs, printing jobs worked per second every "
        "second, then overall jobs/s and insert-to-completion latency. By default it runs until "
        "interrupted (Ctrl-C); --duration stops it after a while; --num-total-jobs inserts that many "
        "jobs before starting the client and works until all are done. Every job in the database is "
        "deleted first, so use a development database: a database holding jobs is refused unless "
        "--wipe (or --yes) is given. An unmigrated database is migrated up.",
    )
    add_database_flags(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--duration", type=_duration, metavar="DURATION",
                      help="stop after this long, e.g. 30s, 1m, 5m30s (continuous insert and work)")
    mode.add_argument("-n", "--num-total-jobs", type=_jobs, metavar="N",
                      help="insert N jobs before starting, then work until all are finished")
    p.add_argument("--max-workers", type=_max_workers, default=MAX_WORKERS_DEFAULT, metavar="N",
                   help=f"workers for the default queue (default: {MAX_WORKERS_DEFAULT}, as Go's bench)")
    p.add_argument("--driver", choices=DRIVERS, default="sync",
                   help="river_sync (threads), river_trio (trio tasks) or river_asyncio (asyncio tasks) "
                   "client (default: sync)")
    p.add_argument("--loop", choices=LOOPS, default="default",
                   help="the asyncio driver's event loop (default: asyncio's own)")
    p.add_argument("--json", action="store_true",
                   help="print the final figures as one JSON object on stdout (progress goes to stderr)")
    p.add_argument("--processes", type=_jobs, default=1, metavar="N",
                   help="with --num-total-jobs: run the burn-down with 1 worker process, then with N, "
                   "and report the scaling")
    p.add_argument("--wipe", "--yes", "-y", dest="wipe", action="store_true",
                   help="allow deleting the jobs already in the database")
    p.add_argument("--default-gc", action="store_true",
                   help="leave the garbage collector as Python sets it (by default tuned as `river work` "
                   "tunes it)")
    p.set_defaults(func=cmd_bench)


def _duration(text: str) -> float:
    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _whole(text: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _jobs(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _max_workers(text: str) -> int:
    value = _whole(text)
    if not 1 <= value <= QUEUE_MAX_WORKERS_MAX:
        raise argparse.ArgumentTypeError(f"must be between 1 and {QUEUE_MAX_WORKERS_MAX}, got {value}")
    return value


def plan_of(args: argparse.Namespace) -> BenchPlan:
    url = database_url(args)
    database = dialect_of_url(url)
    if database == "sqlite":
        path = sqlite_path(url)
        if path == ":memory:":
            raise UsageError("an in-memory SQLite database can't be shared by the benchmark's connections; "
                             "use a file, e.g. --database-url sqlite://bench.sqlite3")
        url = f"sqlite://{path}"  # the clients take URLs, not the bare paths the CLI accepts
    return BenchPlan(url=url, schema=args.schema, database=database, driver=args.driver,
                     max_workers=args.max_workers, total_jobs=args.num_total_jobs, duration=args.duration,
                     default_gc=args.default_gc, loop=args.loop)


def migrate_if_needed(plan: BenchPlan, info: TextIO) -> list[int]:
    """Apply outstanding migrations (Go's bench only does so for in-memory SQLite, where there is
    no other way; here a fresh default SQLite file must work too). Returns the versions applied."""
    from river_db.migrator import Migrator

    with Migrator(plan.url, schema=plan.schema) as migrator:
        if migrator.validate().ok:
            return []
        applied = [v.version for v in migrator.migrate_up().versions]
    print(f"bench: the database was not fully migrated; applied migrations "
          f"{', '.join(f'{v:03d}' for v in applied)} (as `river migrate-up` would)", file=info, flush=True)
    return applied


def prepare(plan: BenchPlan, *, wipe: bool, info: TextIO) -> Tally:
    """Check for (and with ``wipe`` delete) existing jobs; bulk-load the burn-down's jobs."""
    from river_sync.database import Database

    tally = Tally(track_latency=plan.mode == MODE_CONTINUOUS, backlog_min=plan.max_workers)
    with Database.from_url(plan.url, schema=plan.schema, pool_size=1) as db:
        existing = count_jobs(db)
        if existing and not wipe:
            raise CommandFailed(
                f"the database holds {existing:,} jobs (rows in river_job) and river bench deletes every "
                "job before it runs; re-run with --wipe (or --yes) to allow that, or use a scratch database"
            )
        if existing:
            deleted = delete_jobs(db)
            print(f"bench: deleted {deleted:,} existing jobs (--wipe)", file=info, flush=True)
        if plan.total_jobs:
            started = time.perf_counter()
            with Progress("bench: inserting jobs", total=plan.total_jobs, stream=sys.stderr) as progress:
                fast_insert(db, plan.total_jobs, batch=INSERT_BATCH, on_batch=progress.advance)
            elapsed = time.perf_counter() - started
            tally.add_bulk(plan.total_jobs)
            print(f"bench: inserted {plan.total_jobs:,} jobs in {elapsed:.2f}s "
                  f"({plan.total_jobs / max(elapsed, 1e-9):,.0f} jobs/s, bulk insert)", file=info, flush=True)
    return tally


def run(plan: BenchPlan, tally: Tally, info: TextIO) -> BenchResult:
    how = (f"until {plan.total_jobs:,} jobs are worked" if plan.mode == MODE_BURN_DOWN
           else f"for {plan.duration:g}s" if plan.duration is not None else "until interrupted (Ctrl-C)")
    print(f"bench: {plan.driver} driver on {plan.database}, {plan.mode} {how}; max workers "
          f"{plan.max_workers}, fetch cooldown {FETCH_COOLDOWN.total_seconds() * 1000:g}ms, "
          f"poll interval {FETCH_POLL_INTERVAL.total_seconds() * 1000:g}ms", file=info, flush=True)
    if plan.driver != "sync":
        from river_tools.bench_async import run_async

        return run_async(plan, tally, info)
    from river_tools.bench import run_sync

    return run_sync(plan, tally, info)


def check_driver(plan: BenchPlan) -> None:
    """Refuse a driver that cannot run here before anything touches the database."""
    if plan.loop != "default" and plan.driver != "asyncio":
        raise UsageError(f"--loop {plan.loop} is an asyncio event loop; the {plan.driver} driver has its own")
    if plan.driver == "sync":
        return
    from river_tools.bench_async import DriverUnavailableError, client_class

    try:
        client_class(plan.driver)
    except DriverUnavailableError as exc:
        raise CommandFailed(str(exc)) from None


def cmd_bench(args: argparse.Namespace) -> int:
    plan = plan_of(args)
    check_driver(plan)
    info = sys.stderr if args.json else sys.stdout
    if args.processes > 1 and not plan.total_jobs:
        raise UsageError("--processes needs --num-total-jobs: it compares burn-downs of the same load")
    migrated = migrate_if_needed(plan, info)
    if args.processes > 1:
        return _bench_processes(plan, args, info, migrated)
    tally = prepare(plan, wipe=args.wipe, info=info)
    with tuned_for_worker(not plan.default_gc):
        result = run(plan, tally, info)
    if args.json:
        print(json.dumps({**result.to_json(), "migrated": migrated,
                          "gc": "default" if plan.default_gc else "tuned"}))
    else:
        for line in final_lines(result):
            print(line)
    return EXIT_OK


def _bench_processes(plan: BenchPlan, args: argparse.Namespace, info: TextIO, migrated: list[int]) -> int:
    from river_tools.bench_processes import run_scaling, scaling

    prepare(dataclasses.replace(plan, total_jobs=None), wipe=args.wipe, info=info)  # the --wipe check
    runs = run_scaling(plan, args.processes, info)
    ratio = scaling(runs)
    if args.json:
        print(json.dumps({"driver": plan.driver, "database": plan.database, "mode": "processes",
                          "runs": [r.to_json() for r in runs], "scaling": round(ratio, 3),
                          "migrated": migrated}))
    else:
        print(f"bench: {args.processes} processes work {ratio:.2f}x the jobs/s of one")
    return EXIT_OK
