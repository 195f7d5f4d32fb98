"""The trio driver: River's client on Postgres or SQLite with jobs as trio tasks.

Names mirror ``river_sync`` one for one; methods that do I/O are async. The
implementation is ``river_anyio`` (AnyIO, shared with ``river_asyncio``);
``river_trio.Client`` is its client bound to trio, so it keeps trio's
semantics, trio's clock (``trio.testing.MockClock`` drives every timer) and
trio's primitives on the hot paths.
"""

from river_anyio import __version__  # noqa: F401  (re-exported)
from river_anyio.exports import *  # noqa: F403  (the shared names; their list is river_anyio.exports)
from river_anyio.exports import __all__ as _shared
from river_protocol.outcomes import Cancel as Cancel  # outside __all__: see river_anyio.exports
from river_protocol.outcomes import Completed as Completed
from river_protocol.outcomes import Discard as Discard
from river_protocol.outcomes import Failed as Failed
from river_protocol.outcomes import Snooze as Snooze
from river_protocol.work import WorkOutcome as WorkOutcome
from river_trio.client import Client  # noqa: F401  (in __all__)

__all__ = sorted([*_shared, "Client"])
