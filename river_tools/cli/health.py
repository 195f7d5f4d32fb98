"""``river health``: exit 0 when the database answers and River's schema is current.

For a Kubernetes probe or a Docker ``HEALTHCHECK``: one line on stdout (``--json`` for a
machine-readable object) and an exit status, 0 healthy, 1 not, with the reason:

- ``unreachable``: the database did not answer within ``--timeout`` (or refused, or a SQLite
  file that does not exist, which is never created here);
- ``unmigrated``: River's tables are not there (no migration of the line applied);
- ``outdated``: some migrations are applied but not all that this River needs.

On the main line this River needs version 7, as its clients do (``river_protocol.schema_check``):
a database at 7, where River Go v0.43 to v0.47 keep it, is healthy, and the reason says that
version 8 is there to apply.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from typing import Any

from river_db.connect import open_connection
from river_db.migrator import Migrator
from river_db.urls import explain_sqlite_path, missing_sqlite_file, parse_database_url
from river_protocol.migrations import LINE_MAIN, migrations_for
from river_protocol.schema_check import migrate_command, required_versions
from river_tools.cli.main import (
    EXIT_FAILURE,
    EXIT_OK,
    _check_line,
    _one_line,
    _redact,
    add_database_flags,
    add_line_flag,
    database_url,
    is_driver_error,
    number_type,
)
from river_tools.cli.output import print_json

DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Health:
    """What ``river health`` found: ``status`` is ok, unreachable, unmigrated or outdated."""

    status: str
    reason: str
    database: str
    line: str
    applied: int | None = None  # the newest version of the line applied (None: unknown)
    needed: int | None = None  # the newest version of the line this River needs

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "health", help="Check that the database answers and River's schema is current",
        description="Exit 0 when the database answers and every migration of the line is applied, "
        "1 with the reason otherwise (unreachable, unmigrated, outdated): for a Kubernetes probe or a "
        "Docker HEALTHCHECK. Never creates a SQLite file.",
    )
    add_database_flags(p)
    add_line_flag(p)
    p.add_argument("--timeout", type=_timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"how long to wait for the database to answer (default: {DEFAULT_TIMEOUT:g})")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(func=cmd_health)


_timeout = number_type(float, expected="a number of seconds", low=0, above=True)


def check_health(url: str, *, schema: str | None = None, line: str = "main",
                 timeout: float = DEFAULT_TIMEOUT) -> Health:
    """Connect to ``url`` and compare the applied migrations of ``line`` with this River's."""
    parsed = parse_database_url(url)
    shown = _redact(url)
    shipped = [m.version for m in migrations_for(parsed.dialect, line)]
    required = list(required_versions(parsed.dialect)) if line == LINE_MAIN else shipped
    needed = max(required)

    def found(status: str, reason: str, applied: int | None = None) -> Health:
        return Health(status, reason, shown, line, applied, needed)

    try:
        conn = _connect(parsed, timeout)
    except FileNotFoundError as exc:
        return found("unreachable", str(exc))
    except Exception as exc:
        if not is_driver_error(exc) and not isinstance(exc, OSError):
            raise
        return found("unreachable", f"could not connect to the database: {_one_line(exc)}")
    try:
        with Migrator(conn, schema=schema, line=line) as migrator:
            applied = migrator.get_versions()
            missing = [v for v in required if v not in applied]
    except Exception as exc:
        if not is_driver_error(exc):
            raise
        return found("unreachable", f"the database answered with an error: {_one_line(exc)}")
    finally:
        conn.close()
    fix = f"run `{migrate_command(shown, schema, line)}`"
    if not applied:
        where = f" in schema {schema!r}" if schema else ""
        return found("unmigrated", f"River's tables are missing{where} (no migration of line {line!r} "
                     f"applied); {fix}", 0)
    if missing:
        return found("outdated", f"River's schema is at version {max(applied)} of line {line!r}; this "
                     f"River needs version {needed} (unapplied: {missing}); {fix}", max(applied))
    newer = [v for v in shipped if v > needed and v not in applied]
    extra = f"; version {', '.join(map(str, newer))} can be applied, not needed" if newer else ""
    return found("ok", f"the database answers and River's schema is current (line {line!r}, "
                 f"version {max(applied)}{extra})", max(applied))


def _connect(parsed: Any, timeout: float) -> Any:
    missing = missing_sqlite_file(parsed.text)  # the clients' and the other commands' check
    if missing is not None:
        raise FileNotFoundError(f"no SQLite database at {explain_sqlite_path(missing)}")
    conn, _ = open_connection(parsed.text, connect_timeout=timeout)
    return conn


def cmd_health(args: argparse.Namespace) -> int:
    _check_line(args.line)
    health = check_health(database_url(args), schema=args.schema, line=args.line, timeout=args.timeout)
    if args.json:
        print_json({**asdict(health), "ok": health.ok})
    else:
        print(f"{health.status}: {health.reason}")
    return EXIT_OK if health.ok else EXIT_FAILURE
