"""``work_once`` and ``work_with_client``: ``river_anyio.testing.work``, kept at this import path."""

from river_anyio.testing.work import (
    NoDatabaseError,
    OfflineClient,
    WorkResult,
    client_transaction,
    work_once,
    work_with_client,
)

__all__ = ["NoDatabaseError", "OfflineClient", "WorkResult", "client_transaction", "work_once",
           "work_with_client"]
