"""Run River's migrations against a database (the counterpart of Go's ``rivermigrate``).

Each version runs in its own transaction: the script, then its river_migration row. That
matters on Postgres, where version 6 uses the enum label version 4 adds, which is only
usable once version 4 has committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from river_db.connect import dialect_of_connection, open_connection
from river_db.executor import Executor
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import MigrationError, RiverError
from river_protocol.intents import ApplyMigration, CheckMigration, GetMigrations
from river_protocol.migrations import (
    LINE_MAIN,
    Migration,
    check_line,
    migration,
    migrations_for,
    plan_migration,
    render,
    unapplied,
)
from river_protocol.migrations.bundle import check_direction


@dataclass(frozen=True, slots=True)
class MigrateVersion:
    version: int
    name: str
    duration: float  # seconds; 0.0 on a dry run
    sql: str  # the rendered script that ran (or would run)


@dataclass(frozen=True, slots=True)
class MigrateResult:
    direction: str
    dry_run: bool
    versions: list[MigrateVersion] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ValidateResult:
    ok: bool
    unapplied: list[int]

    @property
    def messages(self) -> list[str]:
        return [] if self.ok else [f"Unapplied migrations: {self.unapplied}"]


def _dialect(name: str, schema: str | None) -> PostgresDialect | SQLiteDialect:
    return PostgresDialect(schema=schema) if name == "postgres" else SQLiteDialect(schema=schema)


class Migrator:
    """Migrates ``database`` (a URL, a SQLite path, or an open autocommit connection).

    A connection opened from a URL is owned by the migrator: close it with ``close()`` or use
    the migrator as a context manager. A connection passed in is left open.
    """

    def __init__(self, database: Any, *, schema: str | None = None, line: str = LINE_MAIN) -> None:
        check_line(line)
        self.line = line
        if isinstance(database, str):
            self.conn, dialect_name = open_connection(database)
            self._owns_conn = True
        else:
            self.conn, dialect_name = database, dialect_of_connection(database)
            self._owns_conn = False
        try:
            self.dialect = _dialect(dialect_name, schema)
        except BaseException:
            self.close()
            raise
        self.dialect_name = dialect_name
        self._executor = Executor(self.conn, self.dialect)

    # --- lifecycle

    def close(self) -> None:
        if self._owns_conn:
            self.conn.close()
            self._owns_conn = False

    def __enter__(self) -> Migrator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- the bundle

    def all_versions(self) -> list[Migration]:
        return migrations_for(self.dialect_name, self.line)

    def get_sql(self, version: int, direction: str) -> str:
        """The script of ``version`` in ``direction``, rendered for this migrator's schema."""
        return render(migration(self.dialect_name, version, self.line).sql(direction), self.dialect.prefix)

    # --- the database

    def get_versions(self) -> list[int]:
        """Versions of this line applied in the database, ascending ([] without river_migration)."""
        versions: list[int] = self._executor.run(GetMigrations(line=self.line))
        return sorted(versions)

    def validate(self, target_version: int | None = None) -> ValidateResult:
        missing = unapplied(
            self.get_versions(), target_version, available=[m.version for m in self.all_versions()]
        )
        return ValidateResult(ok=not missing, unapplied=missing)

    def migrate_up(
        self, target_version: int | None = None, max_steps: int | None = None, dry_run: bool = False
    ) -> MigrateResult:
        return self.migrate("up", target_version=target_version, max_steps=max_steps, dry_run=dry_run)

    def migrate_down(
        self, target_version: int | None = None, max_steps: int | None = None, dry_run: bool = False
    ) -> MigrateResult:
        return self.migrate("down", target_version=target_version, max_steps=max_steps, dry_run=dry_run)

    def migrate(
        self,
        direction: str,
        *,
        target_version: int | None = None,
        max_steps: int | None = None,
        dry_run: bool = False,
    ) -> MigrateResult:
        check_direction(direction)
        bundle = {m.version: m for m in self.all_versions()}
        steps = plan_migration(
            self.get_versions(), direction, target_version, max_steps, available=list(bundle)
        )
        result = MigrateResult(direction=direction, dry_run=dry_run)
        for version in steps:
            sql = render(bundle[version].sql(direction), self.dialect.prefix)
            started = time.monotonic()
            if dry_run:
                # The refusals a real run meets before a script (River Pro's schema beside
                # SQLite's 8), raised here as that run would raise them.
                self._executor.run(CheckMigration(self.line, version, direction))
            else:
                self._apply(version, direction, sql)
            duration = 0.0 if dry_run else time.monotonic() - started
            result.versions.append(MigrateVersion(version, bundle[version].name, duration, sql))
        return result

    def _apply(self, version: int, direction: str, sql: str) -> None:
        try:
            self._executor.run(ApplyMigration(self.line, version, direction, sql))
        except RiverError:
            raise
        except Exception as exc:  # the driver's own error types (psycopg, sqlite3)
            raise MigrationError(
                f"error applying version {version:03d} [{direction.upper()}]: {exc}"
            ) from exc
