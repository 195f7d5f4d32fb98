"""``river work MODULE:ATTR``: run a worker process for a client defined in your code.

``ATTR`` is a client that has not started (``river_sync``, ``river_trio`` or
``river_asyncio``), or a function returning one, plain or ``async def`` (an async
one is awaited in the event loop the client then runs in); ``--database-url`` and
``--schema`` are passed to the function when it takes a ``database_url`` /
``schema`` parameter. An async client runs under ``anyio.run`` on the backend its
class names (``ANYIO_BACKEND``; ``--loop uvloop`` for asyncio). ``--queues``, ``--max-workers`` and
``--tags`` narrow what the client works, so one module can serve several
worker pools (Loco's tag filtering: ``--tags`` takes only jobs carrying one of
those tags, ``--untagged`` only jobs without tags).

The first SIGINT/SIGTERM stops fetching and lets running jobs finish; a second
one cancels them (jobs that honour their token go back to ``available``). The
exit status is 0 once the client has stopped.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from river_db.urls import MEMORY, parse_database_url
from river_protocol.claim_filters import TagFilter
from river_protocol.client_core import QueueConfig
from river_protocol.errors import RiverError, ValidationError
from river_sync.client import Client
from river_sync.signals import DEFAULT_SIGNALS, run_until_signalled
from river_tools import async_runner
from river_tools.cli.main import (
    EXIT_OK,
    CommandFailed,
    UsageError,
    UserCodeFailed,
    is_driver_error,
    number_type,
)
from river_tools.gc_tuning import tuned_for_worker

log = logging.getLogger("river.work")

LOG_LEVELS = ("debug", "info", "warning", "error")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "work", help="Work jobs with a client defined in your code",
        description="Import MODULE:ATTR (a river_sync, river_trio or river_asyncio Client, or a function, "
        "plain or async, returning one) and run it until SIGINT/SIGTERM: the first signal lets running "
        "jobs finish, a second cancels them. The working directory is importable, as with `python -m`.",
    )
    p.add_argument("target", metavar="MODULE:ATTR", help="e.g. myapp.jobs:client or myapp.jobs:make_client")
    p.add_argument("--backend", choices=async_runner.BACKENDS,
                   help="the event loop an async def ATTR runs in (default: that of the River package "
                   "its module imported, river_trio or river_asyncio)")
    p.add_argument("--loop", choices=async_runner.LOOPS, default="default",
                   help="asyncio's event loop for a river_asyncio client (default: asyncio's own)")
    p.add_argument("--queues", type=_names, metavar="A,B",
                   help="work only these queues (each keeps its configured settings, else the defaults)")
    p.add_argument("--max-workers", type=_positive, metavar="N", help="max workers for every queue worked")
    tags = p.add_mutually_exclusive_group()
    tags.add_argument("--tags", type=_names, metavar="A,B", help="work only jobs carrying one of these tags")
    tags.add_argument("--untagged", action="store_true", help="work only jobs without tags")
    p.add_argument("--database-url", metavar="URL",
                   help="passed to ATTR as database_url= (ATTR must be a callable accepting it)")
    p.add_argument("--schema", help="passed to ATTR as schema= (ATTR must be a callable accepting it)")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="logging level (default: info)")
    p.add_argument("--processes", type=_positive, default=1, metavar="N",
                   help="run N worker processes, each with its own client, under a supervisor that passes "
                   "stop signals on and restarts a process that dies (default: 1, no supervisor)")
    p.add_argument("--metrics-port", type=_port, metavar="PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics (and /healthz) while working: "
                   "this process's runs and inserts, and the database's job counts (needs the prometheus "
                   "extra; 0 picks a free port)")
    p.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="the address --metrics-port and --health-port listen on (default: 127.0.0.1, "
                   "this machine only; 0.0.0.0 for every interface)")
    p.add_argument("--metrics-cache", type=_seconds, default=5.0, metavar="SECONDS",
                   help="how long one read of the database's job counts serves scrapes (default: 5; "
                   "many scrapers then cost the database one count per interval)")
    p.add_argument("--health-port", type=_port, metavar="PORT",
                   help="serve http://HOST:PORT/healthz: 200 while the client has started and every "
                   "producer is alive, else 503; a JSON report of each producer and when it last fetched")
    p.add_argument("--default-gc", action="store_true",
                   help="leave the garbage collector as Python sets it (by default the worker freezes what "
                   "startup allocated and collects the young generation less often)")
    p.set_defaults(func=cmd_work)


def _names(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of names, got {text!r}")
    return names


_port = number_type(int, expected="a port number", low=0, high=65535)
_seconds = number_type(float, expected="a number of seconds", low=0)
_positive = number_type(int, expected="a whole number", low=1)


# ---------------------------------------------------------------- loading the client


@contextmanager
def user_code(what: str) -> Iterator[None]:
    """Run the user's code (an import, a factory): what it raises is shown with its traceback.

    River's own errors (a client refusing its settings, a database error) keep their one-line
    messages; anything else is the user's to debug, so it becomes ``UserCodeFailed``.
    """
    try:
        yield
    except (UsageError, RiverError, ValidationError):
        raise
    except Exception as exc:
        if is_driver_error(exc):
            raise
        exc.__traceback__ = _from_user_frames(exc.__traceback__)
        raise UserCodeFailed(what, exc) from None


_OUR_FILES = (str(Path(__file__).resolve().parent.parent), "importlib")


def _from_user_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without its leading frames of river_tools and importlib (those of ``python -m`` too)."""
    first = tb
    while first is not None and any(part in first.tb_frame.f_code.co_filename for part in _OUR_FILES):
        first = first.tb_next
    return first if first is not None else tb


def load_target(target: str) -> Any:
    """The object named by ``MODULE:ATTR`` (ATTR may be dotted); the working directory is importable."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"expected MODULE:ATTR (e.g. myapp.jobs:client), got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    with user_code(f"importing {module_name}"):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                raise UsageError(f"cannot import module {module_name!r}: {exc}") from exc
            raise
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from None
    return value


CLIENT_KINDS = "a river_sync, river_trio or river_asyncio Client"


def is_client(value: Any) -> bool:
    """A client ``river work`` can run: a ``river_sync`` one, or an async one (duck-typed)."""
    return isinstance(value, Client) or async_runner.is_async_client(value)


def build_client(target: Any, name: str, overrides: Mapping[str, Any]) -> Any:
    """``target`` itself, or what calling it with the accepted ``overrides`` returns.

    Calling an ``async def`` factory gives an awaitable, returned as it is: it must be
    awaited in the event loop its client will run in (see ``checked_client``).
    """
    if is_client(target):
        if overrides:
            flags = ", ".join(f"--{k.replace('_', '-')}" for k in overrides)
            raise UsageError(f"{flags}: {name} is a client, not a callable that could take them; "
                             "define a function accepting them (e.g. def make_client(database_url=None))")
        return target
    if not callable(target):
        raise UsageError(f"{name} must be {CLIENT_KINDS} or a callable returning one, "
                         f"got {type(target).__qualname__}")
    _check_accepts(target, name, overrides)
    with user_code(f"{name}()"):
        made = target(**overrides)
    return made if inspect.isawaitable(made) else checked_client(made, name)


def checked_client(value: Any, name: str, backend: str | None = None) -> Any:
    """``value`` (what ``name()`` returned) if it is a client, of ``backend`` when one is given."""
    if not is_client(value):
        raise UsageError(f"{name}() returned {type(value).__qualname__}, not {CLIENT_KINDS}")
    if backend is not None:
        runs_on = async_runner.backend_of(value) if async_runner.is_async_client(value) else None
        if runs_on != backend:
            what = f"a client for {runs_on}" if runs_on else "a river_sync client (no event loop)"
            raise UsageError(f"{name}() ran in {backend}'s event loop but returned {what}; "
                             + (f"pass --backend {runs_on}" if runs_on else "make it a plain def"))
    return value


def guess_backend(module_name: str) -> str:
    """The backend of an ``async def`` factory in ``module_name``: that of the one async River
    package loaded with it (``river_asyncio`` loads no trio module)."""
    packages = (("trio", "river_trio"), ("asyncio", "river_asyncio"))
    loaded = [backend for backend, package in packages if package in sys.modules]
    if len(loaded) != 1:
        found = " and ".join(f"river_{b}" for b in loaded) or "neither river_trio nor river_asyncio"
        raise UsageError(f"{module_name} loads {found}: pass --backend trio or --backend asyncio "
                         "to say which event loop its async factory runs in")
    return loaded[0]


def _check_accepts(fn: Any, name: str, overrides: Mapping[str, Any]) -> None:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return  # a builtin or C callable: let the call itself complain
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    for key in overrides:
        param = params.get(key)
        if param is None or param.kind is param.POSITIONAL_ONLY:
            raise UsageError(f"--{key.replace('_', '-')} given, but {name}() takes no {key} parameter")


# ---------------------------------------------------------------- overrides


def effective_queues(
    configured: Mapping[str, QueueConfig], only: tuple[str, ...] | None, max_workers: int | None
) -> dict[str, QueueConfig]:
    """The queues to work: ``only`` (configured settings, else defaults) or all, with ``max_workers``."""
    names = only if only is not None else tuple(configured)
    queues = {name: configured.get(name) or QueueConfig() for name in names}
    if max_workers is not None:
        queues = {name: dataclasses.replace(q, max_workers=max_workers) for name, q in queues.items()}
    return queues


def tag_filter_of(args: argparse.Namespace) -> TagFilter | None:
    if args.untagged:
        return TagFilter(())
    return TagFilter(args.tags) if args.tags else None


def apply_overrides(client: Client, queues: dict[str, QueueConfig], tag_filter: TagFilter | None) -> None:
    """Reconfigure a client that hasn't started: the queues it works and its claim tag filter."""
    try:
        client.configure(queues=queues, tag_filter=tag_filter)
    except ValidationError as exc:
        raise UsageError(f"cannot work these queues: {exc}") from None
    except RiverError as exc:
        raise UsageError(f"{exc}; river work starts the client itself") from None


# ---------------------------------------------------------------- the command


def cmd_work(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    target = load_target(args.target)
    overrides = {k: v for k, v in (("database_url", args.database_url), ("schema", args.schema)) if v}
    try:
        made = build_client(target, args.target, overrides)
    except ValidationError as exc:
        raise UsageError(f"{args.target}: {exc}") from exc
    if inspect.isawaitable(made):  # an async factory: its client exists only inside the event loop
        backend = args.backend or guess_backend(args.target.partition(":")[0])
        _check_loop(args, backend)
        if args.processes > 1:
            _close_unawaited(made)
            _check_endpoints_with_processes(args)
            return _supervise(args, None)  # each child awaits the factory; a bad one exits 2 there
        return _work_async(args, made, backend)
    client = made
    if async_runner.is_async_client(client):
        backend = async_runner.backend_of(client)
        if args.backend is not None and args.backend != backend:
            raise UsageError(f"--backend {args.backend}: {args.target} is a client for {backend}")
        _check_loop(args, backend)
    elif args.backend is not None or args.loop != "default":
        flag = "--backend" if args.backend is not None else "--loop"
        raise UsageError(f"{flag}: {args.target} is a river_sync client, which runs on threads")
    queues = worked_queues(client, args)
    if args.processes > 1:
        _check_endpoints_with_processes(args)
        return _supervise(args, client)
    if async_runner.is_async_client(client):
        return _work_async(args, client, backend)
    ready = configure_for_work(client, args, queues)
    with tuned_for_worker(not args.default_gc), _EarlySignals() as early, http_endpoints(client, args):
        threading.Thread(target=early.hand_over, args=(ready,), name="river-work-ready", daemon=True).start()
        how = run_until_signalled(client)
    log.info("stopped (%s stop)", how)
    return EXIT_OK


# ---------------------------------------------------------------- /metrics and /healthz


def _check_endpoints_with_processes(args: argparse.Namespace) -> None:
    for flag in ("metrics_port", "health_port"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag.replace('_', '-')} serves one process: with --processes N each "
                             "process would need a port of its own; run N `river work` processes instead")


def database_url_of(client: Any, args: argparse.Namespace) -> str | None:
    """The URL of ``client``'s database: ``--database-url``, else the URL or path it was built
    from (None: it was given a pool, an engine or a connection)."""
    if args.database_url:
        return str(args.database_url)
    given = getattr(client, "_database_arg", None)
    return str(given) if isinstance(given, (str, Path)) else None


def instrument(client: Any, args: argparse.Namespace) -> Any:
    """A ``river_prometheus.RiverMetrics`` counting ``client``'s runs and inserts (its middleware,
    outermost), and reading the database's job counts at scrape time when its URL is known."""
    try:
        from river_prometheus import RiverMetrics
    except ModuleNotFoundError as exc:
        raise UsageError(f"--metrics-port needs prometheus_client ({exc}): "
                         "pip install 'river-python[prometheus]'") from None
    metrics = RiverMetrics()
    client.configure(**metrics.middleware_for(client, asynchronous=async_runner.is_async_client(client)))
    url = database_url_of(client, args)
    if url is None:
        log.warning("metrics: the database's job counts are off: the client was given no URL; "
                    "pass --database-url to read them")
        return metrics
    try:
        metrics.watch_database(url, schema=args.schema or getattr(client, "_schema_arg", None),
                               cache_seconds=args.metrics_cache)
    except ValidationError as exc:
        log.warning("metrics: the database's job counts are off: %s", exc)
    return metrics


@contextmanager
def http_endpoints(client: Any, args: argparse.Namespace) -> Iterator[None]:
    """Serve ``--metrics-port`` (``/metrics`` and ``/healthz``) and ``--health-port`` (``/healthz``)
    for the block; ``client`` has not started yet (its metrics middleware goes in first)."""
    from river_tools.endpoints import client_health, health_app, routes_app, serve

    ports: dict[int, dict[str, Any]] = {}
    health = health_app(client_health(client))
    if args.metrics_port is not None:
        metrics = instrument(client, args)  # first: it says so when prometheus_client is missing
        from river_prometheus import make_wsgi_app

        ports.setdefault(args.metrics_port, {}).update({"/metrics": make_wsgi_app(metrics.registry),
                                                         "/healthz": health})
    if args.health_port is not None:
        ports.setdefault(args.health_port, {})["/healthz"] = health
    with ExitStack() as stack:
        for port, routes in ports.items():
            name = "metrics" if "/metrics" in routes else "health"
            try:
                server = serve(routes_app(routes), args.metrics_host, port, name=name)
                host, bound = stack.enter_context(server)
            except OSError as exc:
                reason = exc.strerror or exc
                raise CommandFailed(f"cannot listen on {args.metrics_host}:{port}: {reason}") from None
            where = f"[{host}]" if ":" in host else host
            log.info("serving %s at http://%s:%d", " and ".join(sorted(routes)), where, bound)
        yield


def _check_loop(args: argparse.Namespace, backend: str) -> None:
    try:
        async_runner.backend_options(backend, args.loop)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _close_unawaited(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)  # a coroutine never awaited would warn at exit
    if close is not None:
        close()


def worked_queues(client: Any, args: argparse.Namespace) -> dict[str, QueueConfig]:
    """The queues the flags make ``client`` work; refuses a client that would work none."""
    queues = effective_queues(client.queues.worked(), args.queues, args.max_workers)
    if not queues:
        raise UsageError(f"{args.target} works no queues: configure queues= on the client or pass --queues")
    return queues


def configure_for_work(client: Any, args: argparse.Namespace, queues: dict[str, QueueConfig]) -> str:
    """Apply the flags to ``client`` (not started); returns the line announcing the worker."""
    tag_filter = tag_filter_of(args)
    if args.queues is not None or args.max_workers is not None or tag_filter is not None:
        apply_overrides(client, queues, tag_filter)
    described = ", ".join(f"{name} ({q.max_workers} workers)" for name, q in queues.items())
    tags = f"; tags: {', '.join(tag_filter.tags) or '(untagged only)'}" if tag_filter is not None else ""
    on = "" if not async_runner.is_async_client(client) else f" ({async_runner.backend_of(client)})"
    return (f"working {described} on {client.dialect_name}{tags}; client {client.client_id}{on} "
            "(SIGINT/SIGTERM: stop after running jobs, twice: cancel them)")


def _work_async(args: argparse.Namespace, made: Any, backend: str) -> int:
    """Run an async client (or await an async factory's, then run it) under ``anyio.run``."""

    async def main(early: _EarlySignals) -> str:
        client = made
        if inspect.isawaitable(made):
            try:
                with user_code(f"{args.target}()"):
                    client = await made
                client = checked_client(client, args.target, backend)
            except ValidationError as exc:  # as for a plain factory: the client's settings are input
                raise UsageError(f"{args.target}: {exc}") from exc
        ready = configure_for_work(client, args, worked_queues(client, args))
        with http_endpoints(client, args):
            threading.Thread(target=early.hand_over, args=(ready,), name="river-work-ready",
                             daemon=True).start()
            return await async_runner.run_until_signalled(client)

    with tuned_for_worker(not args.default_gc), _EarlySignals() as early:
        try:
            how = async_runner.run(main, early, backend=backend, loop=args.loop)
        except BaseExceptionGroup as group:
            sole = sole_exception(group)
            if sole is None:
                raise
            raise sole from None  # so a client's ValidationError or RiverError reads as in the sync path
    log.info("stopped (%s stop)", how)
    return EXIT_OK


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception inside ``group`` and its nested groups, or None if there are several."""
    while len(group.exceptions) == 1:
        inner = group.exceptions[0]
        if not isinstance(inner, BaseExceptionGroup):
            return inner
        group = inner
    return None


class _EarlySignals:
    """Signals that arrive before ``run_until_signalled`` has installed its handlers.

    Until then a SIGTERM would kill the process with jobs half-claimed and a
    SIGINT would interrupt the client's start. They are recorded here and sent
    again once the real handlers are in place, and only then is the process
    announced as ready (so a supervisor reading the log never signals too early).
    """

    HAND_OVER_LIMIT = 30.0  # seconds for the client to get to its handlers

    def __init__(self) -> None:
        self.received: list[int] = []
        self.previous: dict[signal.Signals, Any] = {}

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)

    def __enter__(self) -> _EarlySignals:
        for sig in DEFAULT_SIGNALS:
            self.previous[sig] = signal.signal(sig, self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            if signal.getsignal(sig) == self._record:
                signal.signal(sig, handler)

    def hand_over(self, ready: str) -> None:
        deadline = time.monotonic() + self.HAND_OVER_LIMIT
        while any(signal.getsignal(sig) == self._record for sig in DEFAULT_SIGNALS):
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)  # signal handlers can't be waited on; they are swapped within moments
        log.info("%s", ready)
        for signum in self.received:
            os.kill(os.getpid(), signum)


# ---------------------------------------------------------------- --processes


def child_command(args: argparse.Namespace) -> list[str]:
    """The ``river work`` command line each supervised process runs: these flags, one process."""
    argv = [sys.executable, "-m", "river_tools.cli", "work", args.target, "--log-level", args.log_level]
    if args.queues is not None:
        argv += ["--queues", ",".join(args.queues)]
    if args.max_workers is not None:
        argv += ["--max-workers", str(args.max_workers)]
    if args.tags:
        argv += ["--tags", ",".join(args.tags)]
    if args.untagged:
        argv.append("--untagged")
    if args.database_url:
        argv += ["--database-url", args.database_url]
    if args.schema:
        argv += ["--schema", args.schema]
    if args.default_gc:
        argv.append("--default-gc")
    if getattr(args, "backend", None):
        argv += ["--backend", args.backend]
    if getattr(args, "loop", "default") != "default":
        argv += ["--loop", args.loop]
    # --metrics-port and --health-port are refused with --processes (_check_endpoints_with_processes).
    return argv


def in_memory_sqlite(client: Any) -> bool:
    """Whether ``client``'s database is an in-memory SQLite one (which processes cannot share)."""
    if client.dialect_name != "sqlite":
        return False
    if isinstance(client, Client):
        # Database keeps its SQLite file path on its backend.
        return getattr(client.database._backend, "path", "") in ("", MEMORY)
    # An async client opens its database when it starts: read what it was given.
    given = getattr(client, "_database_arg", None)
    if isinstance(given, str):
        return parse_database_url(given).in_memory
    if isinstance(given, Path):
        return False
    backend = getattr(getattr(given, "_backend", None), "path", None)
    return backend in ("", MEMORY)


def _supervise(args: argparse.Namespace, client: Any | None) -> int:
    """Check the configuration once here (``client``: None for an async factory, which only the
    children run), then hand the work to ``args.processes`` children."""
    from river_tools.supervisor import Supervisor

    if client is not None:
        dialect = client.dialect_name
        in_memory = in_memory_sqlite(client)
        if isinstance(client, Client):
            client.stop()  # the supervisor holds no connection; each child builds its own client
        # (an async client opens nothing before it runs)
        if in_memory:
            raise UsageError("--processes needs a database the processes can share; an in-memory SQLite "
                             "database exists only inside one process")
        if dialect == "sqlite":
            log.warning("SQLite has one writer per file: %d processes share its write lock (claims and "
                        "completions queue behind each other), so they add CPU for the jobs' own work, "
                        "not queue throughput", args.processes)
    log.info("supervising %d worker processes", args.processes)
    return Supervisor(child_command(args), args.processes).run()
