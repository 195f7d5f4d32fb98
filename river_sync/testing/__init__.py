"""Test helpers for code using ``river_sync``: the counterparts of River's ``rivertest``.

- ``require_inserted`` / ``require_many_inserted`` / ``require_not_inserted``:
  assertions about inserted jobs, through a client, database, URL or an open
  transaction (``assertions``).
- ``build_job``: a realistic claimed ``JobRow`` for an args value (``builder``).
- ``work_once``: run a worker on one job without a database and get the
  outcome, the set-state update and the recorded output; ``work_with_client``:
  the same through a real client and database (``work``).
- ``InlineClient`` / ``inline_client``: ``insert`` runs the job at once (``inline``).
- The pytest plugin ``river_tools.pytest_plugin`` (auto-loaded) adds fixtures.

``river_trio.testing`` is meant to mirror these names, as coroutines where
they do I/O or run workers.
"""

from river_db.testing.builder import build_job
from river_sync.testing.assertions import (
    ExpectedJob,
    InsertedJob,
    require_inserted,
    require_many_inserted,
    require_not_inserted,
)
from river_sync.testing.inline import InlineClient, InlineResult, inline_client
from river_sync.testing.work import NoDatabaseError, OfflineClient, WorkResult, work_once, work_with_client

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
