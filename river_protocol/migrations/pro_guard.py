"""Which migrations refuse to run beside River Pro's schema, and the refusal (River's rule).

River's SQLite version 8 rebuilds ``river_job`` (renamed aside, recreated, rows copied, the old
table dropped). Whatever River Pro attached to the old table goes with it, so River refuses
that version, up and down, while any of River Pro's marker objects exists in the schema. The
names below are River Pro's and are only looked for here: this project never creates them.
Postgres's version 8 changes nothing, so it has no such check.

The check is made by the migration's plan, in the migration's own transaction, before the
script runs, so the refusal is a typed error and leaves the database as it was. A dry run
(``CheckMigration``) makes the same check alone, so it reports the refusal the run would meet. The script
carries the same check in SQL for anyone who runs it by hand (``river migrate-get``).
"""

from __future__ import annotations

from river_protocol.errors import RiverProSchemaError
from river_protocol.intents import ApplyMigration, CheckMigration, Statement
from river_protocol.migrations.bundle import LINE_MAIN

# River Pro's marker objects, as River's version 8 looks for them.
RIVER_PRO_MARKERS: tuple[str, ...] = ("river_job_sequence", "river_job_workflow_scheduling", "river_workflow")

# (dialect, line, version) of the migrations that rebuild river_job.
_REBUILDS_JOB_TABLE = frozenset({("sqlite", LINE_MAIN, 8)})


def rebuilds_job_table(dialect: str, intent: ApplyMigration | CheckMigration) -> bool:
    return (dialect, intent.line, intent.version) in _REBUILDS_JOB_TABLE


def markers_query(prefix: str) -> Statement:
    """The River Pro markers present in the SQLite schema behind ``prefix``, one row each."""
    marks = ", ".join("?" for _ in RIVER_PRO_MARKERS)
    return Statement(
        f"SELECT name FROM {prefix}sqlite_master WHERE name IN ({marks}) ORDER BY name",
        RIVER_PRO_MARKERS,
    )


def refusal(
    intent: ApplyMigration | CheckMigration, found: tuple[str, ...], schema: str | None
) -> RiverProSchemaError | None:
    """The error refusing ``intent`` when River Pro markers were ``found``; None when none were."""
    if not found:
        return None
    where = f" in attached schema {schema!r}" if schema else ""
    kept = "at version 7" if intent.direction == "up" else "at version 8"
    return RiverProSchemaError(
        f"migration {intent.version:03d} [{intent.direction}] refused: River Pro's schema is installed"
        f"{where} ({', '.join(found)}), and this migration rebuilds river_job, which would drop "
        f"River Pro's parts on it (River refuses it the same way). Nothing was changed: the "
        f"database stays {kept}, where this project's clients work as well",
        version=intent.version, direction=intent.direction, objects=found,
    )


__all__ = ["RIVER_PRO_MARKERS", "markers_query", "rebuilds_job_table", "refusal"]
