"""Scratch databases for the benchmarks: made for one run, dropped at its end.

A module of its own, below every runner (``sync_driver``, ``sync_peers``, ``fresh_state``, ...),
so none of them imports another to get it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def pg_admin_url() -> str:
    return (os.environ.get("RIVER_BENCH_DATABASE_URL") or os.environ.get("RIVER_TEST_DATABASE_URL")
            or DEFAULT_PG_URL)


class Scratch:
    """Databases made for this run; ``drop(url)`` drops one, ``close()`` the rest."""

    CREATE_RETRIES = 20  # a template being read (e.g. by an autovacuum worker) refuses a copy a moment

    def __init__(self) -> None:
        self._pg: list[str] = []
        self._dirs: list[str] = []

    @staticmethod
    def admin(sql: str) -> None:
        import psycopg

        with psycopg.connect(pg_admin_url(), autocommit=True, connect_timeout=5) as admin:
            admin.execute(sql)

    def postgres(self, tag: str, *, template: str = "template0") -> str:
        """A new database, a copy of the database named ``template``; returns its URL."""
        import psycopg

        name = f"river_bench_{tag}_{uuid.uuid4().hex[:8]}"
        for attempt in range(self.CREATE_RETRIES):
            try:
                self.admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
                break
            except psycopg.errors.ObjectInUse:
                if attempt == self.CREATE_RETRIES - 1:
                    raise
                time.sleep(0.25)
        self._pg.append(name)
        parts = urlsplit(pg_admin_url())
        return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))

    def sqlite(self, tag: str) -> str:
        directory = tempfile.mkdtemp(prefix=f"river_bench_{tag}_")
        self._dirs.append(directory)
        return f"sqlite:///{directory}/river.sqlite3"

    def drop(self, url: str) -> None:
        """Drop one database (or SQLite file's directory) this made."""
        if url.startswith("sqlite:"):
            directory = os.path.dirname(url.removeprefix("sqlite:///"))
            if directory in self._dirs:
                self._dirs.remove(directory)
                shutil.rmtree(directory, ignore_errors=True)
            return
        name = urlsplit(url).path.lstrip("/")
        if name in self._pg:
            self._pg.remove(name)
            self.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        if self._pg:
            import psycopg

            with psycopg.connect(pg_admin_url(), autocommit=True, connect_timeout=5) as admin:
                for name in self._pg:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for directory in self._dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self._pg, self._dirs = [], []
