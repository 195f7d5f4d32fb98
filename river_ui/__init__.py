"""River UI for Python: a web dashboard for River's tables on PostgreSQL and SQLite.

``create_app(database_url=..., auth=...)`` is an ASGI app (Starlette) to serve alone
(``river ui``) or to mount under a prefix in FastAPI, Starlette or Django; the
``ui`` extra installs what it needs: ``pip install 'river-python[ui]'``.
"""

from __future__ import annotations

from river_ui.app import Page, create_app
from river_ui.security import BasicAuth, ConfigurationError

__all__ = ["BasicAuth", "ConfigurationError", "Page", "create_app"]
