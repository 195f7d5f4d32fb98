"""``/metrics`` in your own web app: an ASGI app (FastAPI, Starlette) and a WSGI one (Django, Flask).

Both render ``registry`` as Prometheus's text format (or OpenMetrics when the scraper
asks for it). The ASGI app renders in a worker thread, because a ``DatabaseCollector``
in the registry reads the database when its cache has expired, and that read would
otherwise block the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio.to_thread
from prometheus_client import CollectorRegistry
from prometheus_client import make_wsgi_app as _prometheus_wsgi_app
from prometheus_client.exposition import choose_encoder

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def make_asgi_app(registry: CollectorRegistry) -> ASGIApp:
    """An ASGI app serving ``registry`` at whatever path it is mounted on
    (``app.mount("/metrics", make_asgi_app(metrics.registry))``)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # mounted as the whole app: nothing to set up
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
            return
        if scope["type"] != "http":
            return
        accept = ",".join(value.decode("latin-1") for name, value in scope.get("headers", ())
                          if name.lower() == b"accept")
        encoder, content_type = choose_encoder(accept)
        body = await anyio.to_thread.run_sync(encoder, registry)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type.encode("latin-1"))]})
        await send({"type": "http.response.body", "body": body})

    return app


def make_wsgi_app(registry: CollectorRegistry) -> Callable[..., Any]:
    """A WSGI app serving ``registry`` (prometheus_client's own, bound to that registry)."""
    app: Callable[..., Any] = _prometheus_wsgi_app(registry)
    return app
