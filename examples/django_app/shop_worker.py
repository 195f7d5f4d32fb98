"""The shop's worker process: ``river work shop_worker:make_client`` (run from this directory).

Sets Django up first, so jobs can use the ORM, then builds a working client.
"""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_project.settings")
django.setup()

from django.conf import settings  # noqa: E402  (after django.setup())
from shop.jobs import django_connections, workers  # noqa: E402

import river_sync  # noqa: E402


def make_client(database_url: str | None = None) -> river_sync.Client:
    return river_sync.Client(
        database_url or settings.DATABASE_URL,
        queues={"default": river_sync.QueueConfig(max_workers=5)},
        workers=workers,
        middleware=[django_connections],
    )
