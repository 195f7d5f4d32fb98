"""AsyncDatabase, the pooled database handle: ``river_anyio.database``, kept at this import path."""

from river_anyio.database import (
    DEFAULT_ACQUIRE_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_SQLITE_READERS,
    AsyncBackend,
    AsyncDatabase,
    Lease,
    run_blocking,
)

__all__ = [
    "DEFAULT_ACQUIRE_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_SQLITE_READERS",
    "AsyncBackend",
    "AsyncDatabase",
    "Lease",
    "run_blocking",
]
