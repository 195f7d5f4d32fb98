"""The asyncio driver: River's client on Postgres or SQLite with jobs as asyncio tasks.

For FastAPI, Starlette, Litestar, aiohttp and any other asyncio application
(uvloop included). The implementation is ``river_anyio`` (AnyIO), shared with
``river_trio`` name for name, with trio's rules on asyncio: no task outlives
the client's task group, and timeouts and stops are cancel scopes. Importing
this package loads nothing of trio.
"""

from river_anyio import __version__  # noqa: F401  (re-exported)
from river_anyio.exports import *  # noqa: F403  (the shared names; their list is river_anyio.exports)
from river_anyio.exports import __all__ as _shared
from river_asyncio.client import Client  # noqa: F401  (in __all__)
from river_protocol.outcomes import Cancel as Cancel  # outside __all__: see river_anyio.exports
from river_protocol.outcomes import Completed as Completed
from river_protocol.outcomes import Discard as Discard
from river_protocol.outcomes import Failed as Failed
from river_protocol.outcomes import Snooze as Snooze
from river_protocol.work import WorkOutcome as WorkOutcome

__all__ = sorted([*_shared, "Client"])
