"""Settings of the example shop: one database shared by Django's and River's tables.

``DATABASE_URL`` (default ``postgresql://localhost/river_django``) names it. On PostgreSQL,
Django 5 talks through psycopg 3, the same driver River uses; on SQLite (``sqlite:///path``)
through ``river_db.django_sqlite``, Django's SQLite backend on sqlean-py's SQLite, new enough
for River's schema. Either way a job inserted with ``tx=django.db.connection`` inside
``transaction.atomic()`` commits or rolls back with the model rows.
"""

import os
from urllib.parse import unquote, urlsplit

DATABASE_URL = os.environ.get("DATABASE_URL", "postgresql://localhost/river_django")


def _database(url: str) -> dict[str, object]:
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return {"ENGINE": "river_db.django_sqlite", "NAME": unquote(parts.netloc + parts.path)}
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"DATABASE_URL must be a postgresql:// or sqlite:/// URL, got {url!r}")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
INSTALLED_APPS = ["shop"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "shop_project.urls"
DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
