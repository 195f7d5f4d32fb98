"""``river jobs ...``: the operator's view of ``river_job``.

Read commands (stats, list, get, dump) and the safe transitions River itself offers (cancel,
retry, delete; tidy and purge only ever delete non-running jobs, requeue only touches running
ones). Every command works on Postgres and SQLite through the same intents the client uses.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from river_db.connect import open_connection
from river_db.executor import Executor
from river_db.urls import ENV_DATABASE_URL, dialect_of_url, explain_sqlite_path, missing_sqlite_file
from river_db.urls import sqlite_file_path as sqlite_path
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import JobNotFoundError, ValidationError
from river_protocol.golang.gotime import parse_time
from river_protocol.intents import (
    CancelJob,
    CountJobs,
    DeleteJob,
    DeleteJobs,
    GetJob,
    InsertJobs,
    InsertParams,
    JobListFilter,
    ListJobs,
    RequeueRunningJobs,
    RetryJob,
)
from river_protocol.job import JobRow
from river_protocol.options import (
    validate_kind,
    validate_max_attempts,
    validate_priority,
    validate_queue_name,
    validate_tags,
)
from river_protocol.outcomes import cancel_attempted_at_json
from river_protocol.states import FINALIZED_STATES, JobState
from river_tools.cli.main import (
    EXIT_FAILURE,
    EXIT_OK,
    CommandFailed,
    UsageError,
    add_database_flags,
    database_url,
)
from river_tools.cli.output import (
    Progress,
    compact_json,
    confirm,
    describe_duration,
    job_line,
    job_to_json,
    parse_duration,
    print_job,
    print_json,
    print_table,
    rfc3339,
    truncate,
)

BATCH = 1000
PAGE = 500
DEFAULT_LIST_LIMIT = 50
SQLITE_NONCE_KEY = "river:unique_nonce"
ORDER_COLUMNS = ("id", "created_at", "scheduled_at", "finalized_at")
# Lifecycle order reads better in a table than alphabetical order.
STATE_ORDER: tuple[JobState, ...] = (
    JobState.AVAILABLE, JobState.RUNNING, JobState.SCHEDULED, JobState.RETRYABLE, JobState.PENDING,
    JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED,
)
FINALIZED_ORDER = tuple(s for s in STATE_ORDER if s in FINALIZED_STATES)


# ---------------------------------------------------------------- connection


def now_utc() -> datetime:
    return datetime.now(UTC)


@contextmanager
def open_executor(args: argparse.Namespace) -> Iterator[Executor]:
    """An ``Executor`` on the command's database, with River-specific error messages."""
    url = database_url(args)
    dialect_name = dialect_of_url(url)
    if dialect_name == "sqlite":
        path = sqlite_path(url)  # an in-memory database is refused: a command needs a file
        if missing_sqlite_file(url) is not None:
            raise CommandFailed(
                f"no SQLite database at {explain_sqlite_path(path)}: pass --database-url "
                f"(or set ${ENV_DATABASE_URL}), "
                f"or create one with `river migrate-up --database-url {url}`"
            )
    try:
        conn, _ = open_connection(url)
    except Exception as exc:
        if type(exc).__module__.split(".", 1)[0] in ("psycopg", "sqlite3", "sqlean"):
            raise CommandFailed(
                f"could not open the database {_redact(url)}: {' '.join(str(exc).split())} "
                f"(check --database-url or ${ENV_DATABASE_URL})"
            ) from exc
        raise
    dialect = (PostgresDialect if dialect_name == "postgres" else SQLiteDialect)(schema=args.schema)
    try:
        yield Executor(conn, dialect)
    except Exception as exc:
        if _missing_tables(exc):
            where = f" in schema {args.schema!r}" if args.schema else ""
            raise CommandFailed(
                f"River's tables are missing{where} ({' '.join(str(exc).split())}): "
                f"run `river migrate-up --database-url ...` first"
            ) from exc
        raise
    finally:
        conn.close()


def _missing_tables(exc: BaseException) -> bool:
    if getattr(exc, "sqlstate", None) in ("42P01", "3F000"):  # undefined table / schema
        return True
    return type(exc).__module__.split(".", 1)[0] in ("sqlite3", "sqlean") and "no such table" in str(exc)


def _redact(url: str) -> str:
    from river_tools.cli.main import _redact as redact

    return redact(url)


# ---------------------------------------------------------------- argument types


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _job_id(text: str) -> int:
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"invalid job id {text!r}: job ids are positive integers") from None


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _max_age(text: str) -> timedelta:
    """A plain number means days (``--max-age 30``); a duration with a unit also works."""
    try:
        days = float(text)
    except ValueError:
        return _duration(text)
    if days <= 0:
        raise argparse.ArgumentTypeError(f"invalid --max-age {text!r}: must be greater than zero")
    return timedelta(days=days)


def _states(text: str) -> list[JobState]:
    try:
        return [JobState.parse(part.strip()) for part in text.split(",") if part.strip()]
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _flatten(groups: Sequence[Sequence[Any]] | None) -> list[Any]:
    return [item for group in groups or () for item in group]


def _split(values: Sequence[str] | None) -> tuple[str, ...] | None:
    items = tuple(v.strip() for value in values or () for v in value.split(",") if v.strip())
    return items or None


# ---------------------------------------------------------------- shared flags


def _common(p: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    add_database_flags(p)
    if json_flag:
        p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _yes_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("-y", "--yes", action="store_true",
                   help="don't ask for confirmation (required when stdin is not a terminal)")


def _filter_flags(p: argparse.ArgumentParser, *, states: bool = True, ages: bool = True) -> None:
    if states:
        p.add_argument("--state", dest="states", type=_states, action="append", metavar="STATE",
                       help="only jobs in this state; repeatable or comma-separated "
                       f"({', '.join(s.value for s in STATE_ORDER)})")
    _kind_queue_flags(p)
    if ages:
        p.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                       help="only jobs carrying this tag (any of several when repeated)")
        p.add_argument("--older-than", type=_duration, metavar="DURATION",
                       help="only jobs created longer ago than this (10m, 2h, 7d, ...)")
        p.add_argument("--newer-than", type=_duration, metavar="DURATION",
                       help="only jobs created more recently than this")


def _kind_queue_flags(p: argparse.ArgumentParser, *, kinds: bool = True) -> None:
    if kinds:
        p.add_argument("--kind", dest="kinds", action="append", metavar="KIND",
                       help="only this job kind; repeatable")
    p.add_argument("--queue", dest="queues", action="append", metavar="QUEUE",
                   help="only this queue; repeatable")


def _filter_from(args: argparse.Namespace, now: datetime) -> JobListFilter:
    states = _flatten(getattr(args, "states", None))
    older: timedelta | None = getattr(args, "older_than", None)
    newer: timedelta | None = getattr(args, "newer_than", None)
    return JobListFilter(
        kinds=_split(getattr(args, "kinds", None)),
        queues=_split(getattr(args, "queues", None)),
        states=tuple(dict.fromkeys(states)) or None,
        tags_any=_split(getattr(args, "tags", None)),
        created_before=None if older is None else now - older,
        created_after=None if newer is None else now - newer,
    )


def _count(ex: Executor, f: JobListFilter) -> int:
    return sum(ex.run(CountJobs(filter=f)).values())


def _aborted() -> int:
    print("aborted: nothing was changed", file=sys.stderr)
    return EXIT_FAILURE


# ---------------------------------------------------------------- registration


def register(sub: Any) -> None:
    jobs = sub.add_parser(
        "jobs", help="Inspect and manage jobs (stats, list, get, cancel, retry, delete, tidy, ...)",
        description="Inspect and manage River jobs on Postgres or SQLite. Destructive commands "
        "ask for confirmation on a terminal and need --yes in scripts.",
    )
    jsub = jobs.add_subparsers(dest="jobs_command", metavar="COMMAND", required=True)
    for registrar in (_register_stats, _register_list, _register_single, _register_tidy, _register_purge,
                      _register_dump, _register_import, _register_requeue):
        registrar(jsub)


# ---------------------------------------------------------------- stats


def _register_stats(sub: Any) -> None:
    p = sub.add_parser("stats", help="Job counts by state, queue and kind",
                       description="Count jobs by state, by queue and by kind.")
    _common(p)
    _filter_flags(p, states=False, ages=False)
    p.set_defaults(func=cmd_stats)


def cmd_stats(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        counts: dict[tuple[JobState, str, str], int] = ex.run(CountJobs(filter=_filter_from(args, now_utc())))
    by_state: Counter[JobState] = Counter()
    by_queue: dict[str, Counter[JobState]] = {}
    by_kind: dict[str, Counter[JobState]] = {}
    for (state, queue, kind), n in counts.items():
        by_state[state] += n
        by_queue.setdefault(queue, Counter())[state] += n
        by_kind.setdefault(kind, Counter())[state] += n
    total = sum(by_state.values())
    if args.json:
        def breakdown(groups: dict[str, Counter[JobState]]) -> dict[str, dict[str, int]]:
            return {name: {"total": sum(c.values()), **{s.value: c[s] for s in STATE_ORDER if c[s]}}
                    for name, c in sorted(groups.items())}

        print_json({
            "total": total,
            "by_state": {s.value: by_state[s] for s in STATE_ORDER},
            "by_queue": breakdown(by_queue),
            "by_kind": breakdown(by_kind),
        })
        return EXIT_OK
    print(f"{total} job{'s' if total != 1 else ''}")
    if not total:
        return EXIT_OK
    print()
    print_table(["state", "jobs"], [[s.value, by_state[s]] for s in STATE_ORDER])
    present = [s for s in STATE_ORDER if by_state[s]]
    for title, groups in (("queue", by_queue), ("kind", by_kind)):
        print()
        rows = [[name, sum(c.values()), *(c[s] for s in present)] for name, c in sorted(groups.items())]
        print_table([title, "total", *(s.value for s in present)], rows)
    return EXIT_OK


# ---------------------------------------------------------------- list


def _register_list(sub: Any) -> None:
    p = sub.add_parser(
        "list", help="List jobs with filters and cursor pagination",
        description="List jobs, oldest id first by default. When the page is full the command prints "
        "a cursor; pass it back with --after (and the same ordering flags) for the next page.",
    )
    _common(p)
    _filter_flags(p)
    p.add_argument("--limit", type=_positive_int, default=DEFAULT_LIST_LIMIT, metavar="N",
                   help=f"page size (default {DEFAULT_LIST_LIMIT})")
    p.add_argument("--order-by", choices=ORDER_COLUMNS, default="id", help="sort column (default id)")
    p.add_argument("--desc", action="store_true", help="newest / highest first")
    p.add_argument("--after", metavar="CURSOR",
                   help="continue after this cursor (printed by the previous page)")
    p.set_defaults(func=cmd_list)


def encode_cursor(job: JobRow, order_by: str, descending: bool) -> str:
    value = None if order_by == "id" else rfc3339(getattr(job, order_by))
    raw = compact_json({"o": order_by, "d": descending, "v": value, "id": job.id}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str, order_by: str, descending: bool) -> tuple[Any, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        job_id = int(data["id"])
        value = None if data["v"] is None else parse_time(str(data["v"]))
        made_for = (str(data["o"]), bool(data["d"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"invalid --after cursor {token!r}: pass the cursor printed by the previous page"
        ) from exc
    if made_for != (order_by, descending):
        flags = f"--order-by {made_for[0]}" + (" --desc" if made_for[1] else "")
        raise UsageError(f"the --after cursor belongs to a listing with `{flags}`; repeat those flags")
    return value, job_id


def cmd_list(args: argparse.Namespace) -> int:
    after = None if args.after is None else decode_cursor(args.after, args.order_by, args.desc)
    intent = ListJobs(filter=_filter_from(args, now_utc()), order_by=args.order_by,
                      descending=args.desc, limit=args.limit, after=after)
    with open_executor(args) as ex:
        jobs: list[JobRow] = ex.run(intent)
    cursor = encode_cursor(jobs[-1], args.order_by, args.desc) if len(jobs) == args.limit else None
    if args.json:
        print_json({"jobs": [job_to_json(j) for j in jobs], "next_cursor": cursor})
        return EXIT_OK
    if not jobs:
        print("no jobs found")
        return EXIT_OK
    rows = [[j.id, j.state.value, j.queue, j.kind, f"{j.attempt}/{j.max_attempts}", j.created_at,
             j.scheduled_at, truncate(j.encoded_args.decode("utf-8", "replace"), 40)] for j in jobs]
    print_table(["id", "state", "queue", "kind", "attempt", "created", "scheduled", "args"], rows)
    if cursor:
        print(f"\nmore jobs may follow: add --after {cursor}")
    return EXIT_OK


# ---------------------------------------------------------------- get / cancel / retry / delete


def _register_single(sub: Any) -> None:
    for name, summary, func in (
        ("get", "Show one job", cmd_get),
        ("cancel", "Cancel a job (a running job is asked to stop)", cmd_cancel),
        ("retry", "Make a job available to run again right away", cmd_retry),
        ("delete", "Delete a job that isn't running", cmd_delete),
    ):
        p = sub.add_parser(name, help=summary, description=f"{summary}.")
        _common(p)
        p.add_argument("id", type=_job_id, metavar="ID", help="job id")
        if name == "delete":
            _yes_flag(p)
        p.set_defaults(func=func)


def _not_found(job_id: int) -> CommandFailed:
    return CommandFailed(f"job {job_id} not found (find jobs with `river jobs list`)")


def _show(args: argparse.Namespace, job: JobRow, message: str) -> None:
    if args.json:
        print_json(job_to_json(job))
    else:
        print(message)


def cmd_get(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        try:
            job: JobRow = ex.run(GetJob(args.id))
        except JobNotFoundError:
            raise _not_found(args.id) from None
    if args.json:
        print_json(job_to_json(job))
    else:
        print_job(job)
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        try:
            # On Postgres the statement itself notifies the job's producer (river_control).
            job: JobRow = ex.run(CancelJob(args.id, cancel_attempted_at=cancel_attempted_at_json(now_utc())))
        except JobNotFoundError:
            raise _not_found(args.id) from None
        postgres = ex.dialect.name == "postgres"
    if job.state is JobState.CANCELLED:
        message = f"job {job.id} cancelled"
    elif job.state is JobState.RUNNING:
        how = ("its client was notified and asks the worker to stop" if postgres
               else "SQLite sends no notification, so the attempt runs on; if it fails it is "
               "cancelled instead of retried")
        message = f"job {job.id} is running: cancellation requested; {how}"
    else:
        message = f"job {job.id} is already {job.state.value}; nothing to cancel"
    _show(args, job, message)
    return EXIT_OK


def cmd_retry(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        try:
            job: JobRow = ex.run(RetryJob(args.id))
        except JobNotFoundError:
            raise _not_found(args.id) from None
    if job.state is JobState.RUNNING:
        raise CommandFailed(f"job {job.id} is running and can't be retried now; wait for it to finish "
                            f"(or cancel it with `river jobs cancel {job.id}`)")
    _show(args, job, f"job {job.id} is available to run (attempt {job.attempt} of {job.max_attempts})")
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        try:
            job: JobRow = ex.run(GetJob(args.id))
        except JobNotFoundError:
            raise _not_found(args.id) from None
        if job.state is JobState.RUNNING:
            raise _running_delete(job.id)
        question = f"Delete job {job.id} ({job.kind}, {job.state.value}, queue {job.queue})?"
        if not confirm(question, yes=args.yes):
            return _aborted()
        try:
            deleted: JobRow = ex.run(DeleteJob(args.id))
        except JobNotFoundError:
            raise _not_found(args.id) from None
        except ValidationError:  # it started running while we asked
            raise _running_delete(job.id) from None
    _show(args, deleted, f"deleted job {deleted.id} ({deleted.kind}, was {deleted.state.value})")
    return EXIT_OK


def _running_delete(job_id: int) -> CommandFailed:
    return CommandFailed(f"job {job_id} is running and can't be deleted; cancel it first with "
                         f"`river jobs cancel {job_id}` and delete it once it has stopped")


# ---------------------------------------------------------------- tidy / purge


def _register_tidy(sub: Any) -> None:
    p = sub.add_parser("tidy", help="Delete all finalized jobs (completed, cancelled, discarded)",
                       description="Delete every finalized job: completed, cancelled and discarded. "
                       "Jobs in any other state are never touched.")
    _common(p)
    _kind_queue_flags(p, kinds=False)
    _yes_flag(p)
    p.set_defaults(func=cmd_tidy)


def _register_purge(sub: Any) -> None:
    p = sub.add_parser(
        "purge", help="Delete old jobs in chosen non-running states",
        description="Delete jobs older than --max-age in the given states (default: the finalized "
        "states completed, cancelled, discarded). Age counts from finalized_at for finalized states "
        "(as River's job cleaner does) and from created_at for the others. Running jobs are never "
        "deleted. With --dump FILE the deleted rows are appended to FILE as JSON lines, each batch "
        "written before its deletion commits.",
    )
    _common(p)
    p.add_argument("--max-age", type=_max_age, required=True, metavar="DAYS",
                   help="age in days (or a duration like 12h)")
    p.add_argument("--state", dest="states", type=_states, action="append", metavar="STATE",
                   help="state(s) to purge; repeatable or comma-separated (not running)")
    _kind_queue_flags(p)
    p.add_argument("--dump", metavar="FILE", help="append the deleted jobs to FILE as JSON lines")
    _yes_flag(p)
    p.set_defaults(func=cmd_purge)


def _delete_all(
    ex: Executor, filters: Sequence[JobListFilter], bar: Progress, dump: TextIO | None
) -> Counter[str]:
    deleted: Counter[str] = Counter()
    for f in filters:
        while True:
            with ex.transaction():
                rows: list[JobRow] = ex.run(DeleteJobs(filter=f, limit=BATCH))
                if dump is not None and rows:
                    # Written and synced before COMMIT: a failed write rolls the batch back.
                    dump.write("".join(job_line(j) + "\n" for j in rows))
                    dump.flush()
                    os.fsync(dump.fileno())
            deleted.update(j.state.value for j in rows)
            bar.advance(len(rows))
            if len(rows) < BATCH:
                break
    return deleted


def _report_deleted(args: argparse.Namespace, deleted: Counter[str], extra: dict[str, Any]) -> None:
    total = sum(deleted.values())
    if args.json:
        print_json({"deleted": total, "by_state": dict(sorted(deleted.items())), **extra})
        return
    detail = ", ".join(f"{n} {state}" for state, n in sorted(deleted.items()))
    print(f"deleted {total} job{'s' if total != 1 else ''}" + (f" ({detail})" if detail else ""))


def cmd_tidy(args: argparse.Namespace) -> int:
    f = JobListFilter(states=FINALIZED_ORDER, queues=_split(args.queues))
    with open_executor(args) as ex:
        total = _count(ex, f)
        if total == 0:
            _report_deleted(args, Counter(), {})
            return EXIT_OK
        where = f" in queue(s) {', '.join(f.queues)}" if f.queues else ""
        question = f"Delete {total} finalized job(s) (completed, cancelled, discarded){where}?"
        if not confirm(question, yes=args.yes):
            return _aborted()
        with Progress("tidying", total) as bar:
            deleted = _delete_all(ex, [f], bar, None)
    _report_deleted(args, deleted, {})
    return EXIT_OK


def cmd_purge(args: argparse.Namespace) -> int:
    states = tuple(dict.fromkeys(_flatten(args.states))) or FINALIZED_ORDER
    if JobState.RUNNING in states:
        raise UsageError("running jobs are never purged; to free jobs whose workers died use "
                         "`river jobs requeue --older-than DURATION`, or cancel them")
    horizon = now_utc() - args.max_age
    common: dict[str, Any] = {"queues": _split(args.queues), "kinds": _split(args.kinds)}
    finalized = tuple(s for s in states if s.finalized)
    others = tuple(s for s in states if not s.finalized)
    filters = [
        *([JobListFilter(states=finalized, finalized_before=horizon, **common)] if finalized else []),
        *([JobListFilter(states=others, created_before=horizon, **common)] if others else []),
    ]
    extra: dict[str, Any] = {"dump": args.dump} if args.dump else {}
    with open_executor(args) as ex:
        total = sum(_count(ex, f) for f in filters)
        if total == 0:
            _report_deleted(args, Counter(), extra)
            return EXIT_OK
        question = (f"Delete {total} job(s) in state(s) {', '.join(s.value for s in states)} older than "
                    f"{describe_duration(args.max_age)}?")
        if not confirm(question, yes=args.yes):
            return _aborted()
        dump = _open_for_append(args.dump) if args.dump else None
        try:
            with Progress("purging", total) as bar:
                deleted = _delete_all(ex, filters, bar, dump)
        finally:
            if dump is not None:
                dump.close()
    _report_deleted(args, deleted, extra)
    return EXIT_OK


def _open_for_append(path: str) -> TextIO:
    try:
        return open(path, "a", encoding="utf-8")
    except OSError as exc:
        raise CommandFailed(
            f"cannot write the dump file {path}: {exc.strerror}; choose another --dump path"
        ) from exc


# ---------------------------------------------------------------- dump


def _register_dump(sub: Any) -> None:
    p = sub.add_parser(
        "dump", help="Write jobs as JSON lines (for backups and `river jobs import`)",
        description="Write every job (or those matching the filters) as JSON lines, one full row per "
        "line, streamed page by page. Refuses to overwrite an existing --output file.",
    )
    _common(p, json_flag=False)
    _filter_flags(p, ages=False)
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_dump)


def iter_jobs(ex: Executor, f: JobListFilter, page: int | None = None) -> Iterator[list[JobRow]]:
    """Pages of matching jobs by ascending id (keyset pagination, so concurrent changes don't shift pages)."""
    page = page or PAGE
    after: tuple[Any, int] | None = None
    while True:
        jobs: list[JobRow] = ex.run(ListJobs(filter=f, order_by="id", limit=page, after=after))
        if jobs:
            yield jobs
        if len(jobs) < page:
            return
        after = (None, jobs[-1].id)


def cmd_dump(args: argparse.Namespace) -> int:
    f = _filter_from(args, now_utc())
    with open_executor(args) as ex:
        if args.output:
            try:
                out: TextIO = open(args.output, "x", encoding="utf-8")  # noqa: SIM115
            except FileExistsError:
                raise CommandFailed(
                    f"{args.output} already exists; remove it or choose another --output"
                ) from None
            except OSError as exc:
                raise CommandFailed(f"cannot create {args.output}: {exc.strerror}") from exc
        else:
            out = sys.stdout
        # No bar while the dump itself scrolls by on the same terminal.
        show_bar = bool(args.output) or not out.isatty()
        written = 0
        try:
            total = _count(ex, f) if show_bar and sys.stderr.isatty() else None
            with Progress("dumping", total, enabled=show_bar and sys.stderr.isatty()) as bar:
                for jobs in iter_jobs(ex, f):
                    out.write("".join(job_line(j) + "\n" for j in jobs))
                    written += len(jobs)
                    bar.advance(len(jobs))
        finally:
            if args.output:
                out.close()
    if args.output:
        print(f"dumped {written} job{'s' if written != 1 else ''} to {args.output}", file=sys.stderr)
    return EXIT_OK


# ---------------------------------------------------------------- import


def _register_import(sub: Any) -> None:
    p = sub.add_parser(
        "import", help="Insert jobs from a `river jobs dump` file as new jobs",
        description="Insert each dumped job as a new job with its kind, args, queue, priority, "
        "max_attempts, tags, metadata and unique key/states. Jobs dumped as scheduled keep their "
        "scheduled time; all others become available now (attempts and errors start afresh). "
        "Unique keys are respected: a job whose unique key is already taken is skipped and "
        "counted. The whole file is checked before anything is inserted.",
    )
    _common(p)
    p.add_argument("file", metavar="FILE", help="JSON lines file written by `river jobs dump`")
    p.set_defaults(func=cmd_import)


def params_from_dump(data: Any) -> InsertParams:
    """The insert of one dumped row; ``ValueError`` says which field is wrong."""
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object per line")
    try:
        kind = data["kind"]
        args = data["args"]
    except KeyError as exc:
        raise ValueError(f"missing field {exc.args[0]!r}") from None
    if not isinstance(kind, str):
        raise ValueError("kind must be a string")
    validate_kind(kind)
    queue = data.get("queue", "default")
    priority = data.get("priority", 1)
    max_attempts = data.get("max_attempts", 25)
    tags = data.get("tags") or []
    metadata = data.get("metadata") or {}
    if not isinstance(queue, str) or not isinstance(priority, int) or not isinstance(max_attempts, int):
        raise ValueError("queue must be a string, priority and max_attempts whole numbers")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError("tags must be a list of strings")
    if not isinstance(metadata, dict):
        raise ValueError("metadata must be a JSON object")
    if not isinstance(args, dict):
        # A job's args are its args struct encoded, always an object; a string holding JSON text
        # (`"args": "{\"n\": 1}"`) would be stored as a JSON string no worker can decode.
        raise ValueError(f"args must be a JSON object, not {_json_type(args)} ({compact_json(args)[:60]})")
    # The SQLite insert nonce belongs to the original insert statement; a new insert sets its own.
    metadata = {k: v for k, v in metadata.items() if k != SQLITE_NONCE_KEY}
    validate_queue_name(queue)
    validate_priority(priority)
    validate_max_attempts(max_attempts)
    validate_tags(tags)
    unique_key_hex = data.get("unique_key")
    unique_states = data.get("unique_states")
    try:
        unique_key = None if unique_key_hex is None else bytes.fromhex(unique_key_hex)
    except (TypeError, ValueError):
        raise ValueError(f"unique_key {unique_key_hex!r} is not hex") from None
    if unique_states is not None and (not isinstance(unique_states, int) or not 0 <= unique_states < 256):
        raise ValueError(f"unique_states {unique_states!r} is not a state bitmask (0-255)")
    state, scheduled_at = JobState.AVAILABLE, None
    if data.get("state") == JobState.SCHEDULED.value and data.get("scheduled_at"):
        state, scheduled_at = JobState.SCHEDULED, parse_time(str(data["scheduled_at"]))
    return InsertParams(
        kind=kind, encoded_args=compact_json(args).encode(), state=state, queue=queue, priority=priority,
        max_attempts=max_attempts, metadata=compact_json(metadata).encode(), tags=tuple(tags),
        scheduled_at=scheduled_at, unique_key=unique_key,
        unique_states=unique_states if unique_key is not None else None,
    )


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type with its article, for messages."""
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "an array",
             dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _read_dump(path: str) -> list[InsertParams]:
    params: list[InsertParams] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    params.append(params_from_dump(json.loads(line)))
                except ValueError as exc:  # includes JSON and ValidationError
                    raise CommandFailed(f"{path}:{number}: not an importable job: {exc}; nothing was "
                                        "imported (fix or remove that line)") from None
    except FileNotFoundError:
        raise CommandFailed(
            f"no such file: {path} (write one with `river jobs dump --output FILE`)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandFailed(f"cannot read {path}: {exc}") from exc
    return params


def cmd_import(args: argparse.Namespace) -> int:
    params = _read_dump(args.file)
    inserted = skipped = 0
    with open_executor(args) as ex, Progress("importing", len(params)) as bar:
        for start in range(0, len(params), PAGE):
            batch = tuple(params[start:start + PAGE])
            results = ex.run(InsertJobs(jobs=batch, nonce=secrets.token_hex(8)))
            dupes = sum(1 for r in results if r.unique_skipped_as_duplicate)
            skipped += dupes
            inserted += len(results) - dupes
            bar.advance(len(batch))
    if args.json:
        print_json({"inserted": inserted, "skipped_duplicates": skipped})
    else:
        print(f"imported {inserted} job{'s' if inserted != 1 else ''}, skipped {skipped} unique duplicate"
              f"{'s' if skipped != 1 else ''}")
    return EXIT_OK


# ---------------------------------------------------------------- requeue


def _register_requeue(sub: Any) -> None:
    p = sub.add_parser(
        "requeue", help="Put running jobs of dead workers back to available",
        description="Move running jobs whose current attempt started longer ago than --older-than "
        "back to available (attempt count unchanged). Only for jobs whose workers are known to be "
        "gone: a live worker would run the job a second time. River's rescuer does this on its own "
        "after the rescue threshold.",
    )
    _common(p)
    p.add_argument("--older-than", type=_duration, required=True, metavar="DURATION",
                   help="attempt started longer ago than this (10m, 2h, 1d, ...)")
    _yes_flag(p)
    p.set_defaults(func=cmd_requeue)


def cmd_requeue(args: argparse.Namespace) -> int:
    horizon = now_utc() - args.older_than
    with open_executor(args) as ex:
        running = [j for page in iter_jobs(ex, JobListFilter(states=(JobState.RUNNING,))) for j in page]
        stale = [j for j in running if j.attempted_at is not None and j.attempted_at < horizon]
        if not stale:
            moved: list[JobRow] = []
        else:
            question = (f"Move {len(stale)} running job(s) attempted more than "
                        f"{describe_duration(args.older_than)} ago back to available? Their workers "
                        "must really be dead, or the jobs will run twice.")
            if not confirm(question, yes=args.yes):
                return _aborted()
            moved = ex.run(RequeueRunningJobs(attempted_before=horizon))
    if args.json:
        print_json({"requeued": len(moved), "ids": [j.id for j in moved]})
    elif moved:
        ids = ", ".join(str(j.id) for j in moved[:20]) + (", ..." if len(moved) > 20 else "")
        print(f"requeued {len(moved)} job{'s' if len(moved) != 1 else ''}: {ids}")
    else:
        print(f"no running jobs attempted more than {describe_duration(args.older_than)} ago")
    return EXIT_OK
