"""Test helpers: the counterparts of River's ``rivertest``, the same names on every client
(coroutines on the async clients where they do I/O or run workers).

- ``require_inserted`` / ``require_many_inserted`` / ``require_not_inserted``:
  assertions about inserted jobs, through a client, database, URL or an open
  transaction (``assertions``).
- ``build_job``: a realistic claimed ``JobRow`` for an args value (pure, from
  ``river_db.testing.builder``).
- ``work_once``: run a worker on one job without a database and get the
  outcome, the set-state update and the recorded output; ``work_with_client``:
  the same through a real client and database (``work``).
- ``InlineClient`` / ``inline_client``: ``insert`` runs the job at once (``inline``).
- The pytest plugin ``river_tools.pytest_plugin`` (auto-loaded) adds fixtures.

On the async clients, run them inside ``trio.run`` or ``asyncio.run`` (or a test runner:
anyio's pytest plugin, pytest-trio); ``river_trio.testing`` and ``river_asyncio.testing``
re-export them bound to their loop.
"""

from river_anyio.testing.assertions import require_inserted, require_many_inserted, require_not_inserted
from river_anyio.testing.inline import InlineClient, inline_client
from river_anyio.testing.work import work_once, work_with_client
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
