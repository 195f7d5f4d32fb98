"""Client.jobs and client.queues: ``river_async.admin``, kept at this import path."""

from river_async.admin import (
    JobsAPI,
    QueuesAPI,
)

__all__ = ["JobsAPI", "QueuesAPI"]
