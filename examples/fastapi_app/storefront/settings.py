"""Where the shop's database is: ``DATABASE_URL``.

One Postgres database holds the shop's tables and River's.
"""

from __future__ import annotations

import os

DEFAULT_DATABASE_URL = "postgresql://localhost/shop"


def database_url() -> str:
    """``DATABASE_URL``: ``postgresql://...`` (``postgresql+asyncpg://...`` is accepted too)."""
    return os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
