"""Test helpers for async code (``river_trio``, ``river_asyncio``): ``river_sync.testing``'s names,
as coroutines where they do I/O or run workers.

- ``await require_inserted`` / ``require_many_inserted`` / ``require_not_inserted``:
  assertions about inserted jobs through an async ``Client``, an
  ``AsyncDatabase``, a URL or an open transaction (``assertions``).
- ``build_job``: a realistic claimed ``JobRow`` for an args value (pure; the
  same function as ``river_sync.testing.build_job``).
- ``await work_once``: run an async or sync worker on one job without a
  database; ``await work_with_client``: the same through a real client and
  database. Both return ``WorkResult`` (``work``).
- ``InlineClient`` / ``inline_client``: ``await insert`` runs the job at once (``inline``).

Run them inside ``trio.run`` or ``asyncio.run`` (or a test runner: anyio's pytest plugin,
pytest-trio). ``river_trio.testing`` and ``river_asyncio.testing`` re-export them.
"""

from river_async.testing.assertions import require_inserted, require_many_inserted, require_not_inserted
from river_async.testing.inline import InlineClient, inline_client
from river_async.testing.work import work_once, work_with_client
from river_db.testing.builder import build_job
from river_db.testing.expectations import ExpectedJob, InsertedJob
from river_db.testing.inline import InlineResult
from river_db.testing.offline import NoDatabaseError, OfflineClient
from river_db.testing.runs import WorkResult

__all__ = [
    "ExpectedJob",
    "InlineClient",
    "InlineResult",
    "InsertedJob",
    "NoDatabaseError",
    "OfflineClient",
    "WorkResult",
    "build_job",
    "inline_client",
    "require_inserted",
    "require_many_inserted",
    "require_not_inserted",
    "work_once",
    "work_with_client",
]
