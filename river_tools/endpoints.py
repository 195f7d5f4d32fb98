"""The HTTP endpoints of a ``river work`` process: ``/metrics`` (Prometheus) and ``/healthz``.

A small threaded WSGI server from the standard library, on a thread of its own for
the life of a ``with serve(...)`` block. ``/healthz`` answers 200 while the client
has started and every producer is alive, 503 otherwise, with a JSON report of each
producer (``river_db.client_support.health_report``).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from river_db.client_support import health_report

log = logging.getLogger("river.work")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]


def client_health(client: Any, clock: Callable[[], datetime] | None = None) -> HealthCheck:
    """``client``'s health as ``/healthz`` reports it (read from the server's thread)."""
    now = clock or (lambda: datetime.now(UTC))
    return lambda: health_report(str(client.state.value), client.stats(), now())


def health_app(check: HealthCheck) -> WSGIApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        healthy, report = check()
        body = json.dumps(report).encode()
        start_response("200 OK" if healthy else "503 Service Unavailable",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app


def routes_app(routes: Mapping[str, WSGIApp]) -> WSGIApp:
    """One WSGI app dispatching on the exact path; anything else is a 404 naming the paths served."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        target = routes.get(environ.get("PATH_INFO") or "/")
        if target is None:
            body = f"not found; this server serves {', '.join(sorted(routes))}\n".encode()
            start_response("404 Not Found",
                           [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]
        return target(environ, start_response)

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scraper that hangs never holds the process's exit


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # every scrape would be a stderr line
        log.debug("http: " + format, *args)


@contextmanager
def serve(app: WSGIApp, host: str, port: int, *, name: str) -> Iterator[tuple[str, int]]:
    """Serve ``app`` on ``host:port`` (port 0: any free one) until the block ends; yields the address."""
    server_class = _Server6 if ":" in host else _Server
    server = make_server(host, port, app, server_class=server_class, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              name=f"river-{name}-http", daemon=True)
    thread.start()
    try:
        bound = server.server_address
        yield str(bound[0]), int(bound[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
