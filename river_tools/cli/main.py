"""The ``river`` command line.

Migration commands live here. Other command groups (jobs, queues, bench, work) plug in from
their own modules, listed in ``COMMAND_MODULES``: each exposes ``register(subparsers)``, adds
its subparsers with ``add_database_flags`` where useful, and sets ``func`` on each one to a
handler ``(args) -> int``. A listed module that doesn't exist yet is skipped.

Exit codes: 0 success, 1 operational failure (database error, failed migration, validate
found unapplied migrations), 2 usage error. Errors go to stderr as one clear line, except an
error raised by the user's own code (``UserCodeFailed``), which gets its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from river_db.urls import (
    ENV_DATABASE_URL,
    MEMORY,
    default_database_url,
    dialect_of_url,
    parse_database_url,
    sqlite_path,
)
from river_db.version import package_version
from river_protocol.errors import MigrationError, RiverError, ValidationError
from river_protocol.migrations import ALL, LINE_MAIN, LINES, check_line, migrations_for, render

COMMAND_MODULES: tuple[str, ...] = (
    "river_tools.cli.jobs",
    "river_tools.cli.queues",
    "river_tools.cli.workflows",
    "river_tools.cli.bench",
    "river_tools.cli.work",
    "river_tools.cli.health",
    "river_tools.cli.scaffold",
    "river_tools.cli.ui",
)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

Handler = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """Bad flags or values: reported with exit status 2."""


class CommandFailed(Exception):
    """The command ran but could not do its job: exit status 1."""


class UserCodeFailed(Exception):
    """The user's own code (a module the command imported, a factory it called) raised ``error``.

    Reported with ``error``'s traceback from the user's first frame on, as ``python -m`` would
    show it (River's frames above it would only hide the file and line), exit status 1.
    """

    def __init__(self, what: str, error: BaseException) -> None:
        super().__init__(f"{what}: {type(error).__name__}: {error}")
        self.what = what
        self.error = error


# ---------------------------------------------------------------- shared flags


def add_database_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help=f"postgres://..., postgresql://..., sqlite://PATH or a SQLite file path "
        f"(default: ${ENV_DATABASE_URL}, else sqlite://river.sqlite3 in the working directory)",
    )
    parser.add_argument("--schema", help="Postgres schema / attached SQLite database holding River's tables")


def add_line_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--line", default=LINE_MAIN, help=f"migration line (default: {LINE_MAIN}; known: {', '.join(LINES)})"
    )


def number_type(
    convert: Callable[[str], Any], *, expected: str, low: float, high: float | None = None,
    above: bool = False,
) -> Callable[[str], Any]:
    """An argparse ``type=``: ``convert(text)`` within [low, high] (``above``: more than ``low``)."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if above and not value > low:
            raise argparse.ArgumentTypeError(f"must be more than {low:g}, got {text}")
        if not value >= low or (high is not None and not value <= high):
            where = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"must be {where}, got {text}")
        return value

    return parse


def database_url(args: argparse.Namespace) -> str:
    """The database URL a command works on, checked before anything is opened or created."""
    url = str(args.database_url or default_database_url())
    try:
        parse_database_url(url)
    except ValidationError as exc:
        raise UsageError(f"--database-url: {exc}") from exc
    return url


def _check_line(line: str) -> None:
    try:
        check_line(line)
    except MigrationError as exc:
        raise UsageError(str(exc)) from exc


def _open_migrator(args: argparse.Namespace) -> Any:
    from river_db.migrator import Migrator
    from river_db.sqlite import SQLiteOpenError

    _check_line(args.line)
    url = database_url(args)
    try:
        return Migrator(url, schema=args.schema, line=args.line)
    except ValidationError:
        raise
    except SQLiteOpenError as exc:  # its message names the file tried and both URL spellings
        raise CommandFailed(f"{exc} (check --database-url or ${ENV_DATABASE_URL})") from exc
    except Exception as exc:
        if is_driver_error(exc):
            raise CommandFailed(
                f"could not open the database {_redact(url)}: {_one_line(exc)} "
                f"(check --database-url or ${ENV_DATABASE_URL})"
            ) from exc
        raise


# ---------------------------------------------------------------- migrate-up / migrate-down


def _register_migrate(sub: Any) -> None:
    for direction, summary, detail in (
        ("up", "Run River schema up migrations",
         "Applies every migration not yet applied, ascending (limit with --max-steps or "
         "--target-version)."),
        ("down", "Run River schema down migrations",
         "Reverts one migration by default; --max-steps N reverts N, --target-version V reverts "
         "down to V (V stays applied), --target-version 0 or -1 reverts everything."),
    ):
        p = sub.add_parser(
            f"migrate-{direction}", help=summary,
            description=f"{summary}. {detail} Combine --dry-run and --show-sql to print the SQL "
            "that would run without running it.",
        )
        add_database_flags(p)
        add_line_flag(p)
        p.add_argument("--target-version", type=int, metavar="N",
                       help="final version to end at (up: inclusive; down: stays applied; 0/-1 = all)")
        p.add_argument("--max-steps", type=int, metavar="N", help="migrate at most N versions (-1: none)")
        p.add_argument("--dry-run", action="store_true", help="show what would run, change nothing")
        p.add_argument("--show-sql", action="store_true", help="print the SQL of each migration")
        p.set_defaults(func=_cmd_migrate, direction=direction)


def _cmd_migrate(args: argparse.Namespace) -> int:
    # Go's CLI spells "everything" as 0; the library uses -1.
    target = ALL if args.target_version == 0 else args.target_version
    _check_line(args.line)
    known = [m.version for m in migrations_for(dialect_of_url(database_url(args)), args.line)]
    if target is not None and target != ALL and target not in known:
        raise UsageError(f"--target-version {target} is not a River migration version (known: {known})")
    opened = _sqlite_file(database_url(args))
    created = opened is not None and not os.path.exists(opened)
    with _open_migrator(args) as migrator:
        result = migrator.migrate(
            args.direction, target_version=target, max_steps=args.max_steps, dry_run=args.dry_run
        )
    out = sys.stdout
    if opened is not None:
        # `sqlite:///x.sqlite3` is /x.sqlite3 (Go River's rule): say which file this was, on
        # stderr, so stdout stays the migrations' report.
        print(f"SQLite database {opened}{' (created)' if created else ''}", file=sys.stderr)
    if not result.versions:
        print("no migrations to apply", file=out)
        return EXIT_OK
    width = max(len(v.name) for v in result.versions)
    for v in result.versions:
        if args.dry_run:
            print(f"migration {v.version:03d} [{args.direction}] [DRY RUN]", file=out)
        else:
            print(f"applied migration {v.version:03d} [{args.direction}] {v.name:<{width}} "
                  f"[{_duration(v.duration)}]", file=out)
        if args.show_sql:
            _print_sql(out, args.line, v.version, args.direction, v.sql, rule=True)
    if args.max_steps and args.max_steps > 0 and len(result.versions) < args.max_steps:
        print("no more migrations to apply", file=out)
    return EXIT_OK


def _sqlite_file(url: str) -> str | None:
    """The absolute path of a SQLite URL's file; None for Postgres and an in-memory database."""
    if dialect_of_url(url) != "sqlite":
        return None
    path = sqlite_path(url)
    return None if path == MEMORY else os.path.abspath(path)


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f}s"
    if seconds >= 0.001:
        return f"{seconds * 1000:.2f}ms"
    return f"{seconds * 1_000_000:.0f}µs"


def _print_sql(out: TextIO, line: str, version: int, direction: str, sql: str, *, rule: bool) -> None:
    if rule:
        print("-" * 80, file=out)
    print(f"-- River {line} migration {version:03d} [{direction}]", file=out)
    print(sql.strip(), file=out)
    if rule:
        print(file=out)


# ---------------------------------------------------------------- migrate-get


def _versions_arg(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid version list {text!r}: use e.g. 3 or 1,2,3") from None


def _register_get(sub: Any) -> None:
    p = sub.add_parser(
        "migrate-get", help="Print the SQL of River migrations",
        description="Print migration SQL for use with another migration tool, e.g. "
        "`river migrate-get --all --exclude-version 1 --up > river.up.sql`. No database is "
        "opened: --database-url (or --dialect) only selects Postgres or SQLite.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--version", type=_versions_arg, action="append", metavar="N[,N...]",
                       help="version(s) to print; repeatable or comma-separated")
    which.add_argument("--all", action="store_true", help="every version (descending with --down)")
    direction = p.add_mutually_exclusive_group(required=True)
    direction.add_argument("--up", action="store_true", help="print up migrations")
    direction.add_argument("--down", action="store_true", help="print down migrations")
    p.add_argument("--exclude-version", type=_versions_arg, action="append", default=[], metavar="N[,N...]",
                   help="skip version(s), typically 1 (River's own bookkeeping table)")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--database-url", metavar="URL", help="selects the dialect from the URL's scheme")
    target.add_argument("--dialect", choices=("postgres", "sqlite"), help="dialect to print SQL for")
    p.add_argument("--schema", help="schema to qualify River's objects with")
    add_line_flag(p)
    p.set_defaults(func=_cmd_get)


def _cmd_get(args: argparse.Namespace) -> int:
    from river_protocol.dialects.postgres import PostgresDialect
    from river_protocol.dialects.sqlite import SQLiteDialect

    _check_line(args.line)
    dialect_name = args.dialect or dialect_of_url(database_url(args))
    dialect = (PostgresDialect if dialect_name == "postgres" else SQLiteDialect)(schema=args.schema)
    bundle = {m.version: m for m in migrations_for(dialect_name, args.line)}
    direction = "up" if args.up else "down"
    if args.all:
        versions = sorted(bundle, reverse=direction == "down")
    else:
        versions = [v for group in args.version for v in group]
        unknown = [v for v in versions if v not in bundle]
        if unknown:
            raise UsageError(f"unknown migration version(s) {unknown} (available versions: {sorted(bundle)})")
    excluded = {v for group in args.exclude_version for v in group}
    first = True
    for version in versions:
        if version in excluded:
            continue
        if not first:
            print()
        first = False
        sql = render(bundle[version].sql(direction), dialect.prefix)
        _print_sql(sys.stdout, args.line, version, direction, sql, rule=False)
    return EXIT_OK


# ---------------------------------------------------------------- migrate-list / validate


def _register_list_and_validate(sub: Any) -> None:
    p = sub.add_parser("migrate-list", help="List River migrations, marking the current one",
                       description="List the line's migrations; `*` marks the latest applied one.")
    add_database_flags(p)
    add_line_flag(p)
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser(
        "validate", help="Check that every River migration is applied",
        description="Exit with status 1 when migrations are outstanding; pair with "
        "`river migrate-up --dry-run --show-sql` to see them.",
    )
    add_database_flags(p)
    add_line_flag(p)
    p.set_defaults(func=_cmd_validate)


def _cmd_list(args: argparse.Namespace) -> int:
    with _open_migrator(args) as migrator:
        applied = migrator.get_versions()
        current = max(applied, default=0)
        for m in migrator.all_versions():
            marker = "* " if m.version == current else ("  " if current else "")
            print(f"{marker}{m.version:03d} {m.name}")
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    with _open_migrator(args) as migrator:
        result = migrator.validate()
    if result.ok:
        print("River schema is up to date")
        return EXIT_OK
    print(f"river: unapplied migrations: {result.unapplied}; run `river migrate-up` to apply them",
          file=sys.stderr)
    return EXIT_FAILURE


# ---------------------------------------------------------------- entry point

BUILTIN_REGISTRARS: tuple[Callable[[Any], None], ...] = (
    _register_migrate,
    _register_get,
    _register_list_and_validate,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="river", description="River job queue for Python: schema migrations and tools."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in BUILTIN_REGISTRARS:
        register(sub)
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed usage and the error (or help/version)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler = args.func
    try:
        return handler(args)
    except (UsageError, ValidationError) as exc:
        print(f"river {args.command}: error: {exc}", file=sys.stderr)
        print(f"see `river {args.command} --help`", file=sys.stderr)
        return EXIT_USAGE
    except (CommandFailed, RiverError) as exc:
        print(f"river {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except UserCodeFailed as exc:
        print(f"river {args.command}: {exc.what} raised an error:", file=sys.stderr)
        traceback.print_exception(exc.error, file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"river {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (say `| head`) went away: stop quietly, and keep the interpreter's final
        # flush of stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
    except Exception as exc:
        if is_driver_error(exc):
            print(f"river {args.command}: database error: {_one_line(exc)}", file=sys.stderr)
        else:
            print(f"river {args.command}: unexpected error: {type(exc).__name__}: {_one_line(exc)}",
                  file=sys.stderr)
        return EXIT_FAILURE


def is_driver_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".", 1)[0] in ("psycopg", "sqlite3", "sqlean")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _redact(url: str) -> str:
    """The URL without a password, for error messages."""
    from river_db.urls import redact_url

    return redact_url(url)


if __name__ == "__main__":
    sys.exit(main())
