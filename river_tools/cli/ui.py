"""``river ui``: serve the web dashboard (``river_ui``, the ``ui`` extra) with uvicorn.

Bound to 127.0.0.1 by default. Any other address needs authentication
(``RIVER_UI_USERNAME`` and ``RIVER_UI_PASSWORD``: HTTP basic) or
``--allow-unauthenticated-remote`` saying that an open dashboard is deliberate.
"""

from __future__ import annotations

import argparse
from typing import Any

from river_tools.cli.jobs import open_executor
from river_tools.cli.main import EXIT_OK, CommandFailed, UsageError, add_database_flags, database_url

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="Serve the web dashboard (queues, jobs, actions)",
        description="Serve River's web dashboard for this database (Postgres or SQLite). Needs the ui "
        "extra: pip install 'river-python[ui]'. HTTP basic authentication when RIVER_UI_USERNAME and "
        "RIVER_UI_PASSWORD are set.",
    )
    add_database_flags(p)
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default: {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    p.add_argument("--read-only", action="store_true", help="show everything, change nothing")
    p.add_argument(
        "--root-path",
        default="",
        metavar="PREFIX",
        help="the path prefix a reverse proxy serves the dashboard under (e.g. /river)",
    )
    p.add_argument(
        "--allow-unauthenticated-remote",
        action="store_true",
        help="listen beyond loopback without authentication (e.g. behind an authenticating proxy)",
    )
    p.set_defaults(func=cmd_ui)


def run_server(app: Any, *, host: str, port: int, root_path: str) -> None:
    """Serve ``app`` until interrupted (a seam for tests)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, root_path=root_path, log_level="info")


def cmd_ui(args: argparse.Namespace) -> int:
    try:
        from river_ui import create_app
        from river_ui.security import BasicAuth, ConfigurationError, check_bind
    except ModuleNotFoundError as exc:
        raise CommandFailed(
            f"the dashboard needs the ui extra ({exc.name} is missing): pip install 'river-python[ui]'"
        ) from exc
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be from 1 to 65535, got {args.port}")
    try:
        auth = BasicAuth.from_env()
        check_bind(args.host, auth, allow_unauthenticated_remote=args.allow_unauthenticated_remote)
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from exc
    url = database_url(args)
    with open_executor(args):  # the database exists and answers, or a clear error now
        pass
    app = create_app(database_url=url, schema=args.schema, auth=auth, read_only=args.read_only)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"River UI on http://{shown}:{args.port}{args.root_path}/ "
        f"({'read-only, ' if args.read_only else ''}{'basic auth' if auth else 'no auth'})",
        flush=True,
    )
    run_server(app, host=args.host, port=args.port, root_path=args.root_path)
    return EXIT_OK
