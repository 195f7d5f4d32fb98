"""Client.jobs and client.queues: ``river_anyio.admin``, kept at this import path."""

from river_anyio.admin import (
    JobsAPI,
    QueuesAPI,
)

__all__ = ["JobsAPI", "QueuesAPI"]
