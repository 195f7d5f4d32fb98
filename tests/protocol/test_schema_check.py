"""Whether a schema is one a client can work with, from the applied versions alone."""

from __future__ import annotations

import pytest

from river_protocol.errors import DatabaseNotMigratedError, RiverError
from river_protocol.schema_check import (
    CLIENT_NEEDS_VERSION,
    migrate_command,
    required_versions,
    schema_problem,
)


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_a_database_at_7_or_8_is_fine(dialect: str) -> None:
    # 7 is River v0.43's schema, where Go v0.43 to v0.47 fleets stay; 8 only changes how SQLite
    # numbers new jobs, so a client needs 7 and takes 8 as well.
    assert CLIENT_NEEDS_VERSION == 7
    assert required_versions(dialect) == (1, 2, 3, 4, 5, 6, 7)
    assert schema_problem(dialect, [1, 2, 3, 4, 5, 6, 7], database_url="x") is None
    assert schema_problem(dialect, [1, 2, 3, 4, 5, 6, 7, 8], database_url="x") is None
    # A newer River's versions beyond ours are ignored, as River ignores them.
    assert schema_problem(dialect, [1, 2, 3, 4, 5, 6, 7, 8, 9], database_url="x") is None


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_a_database_never_migrated_names_every_table_and_the_fix(dialect: str) -> None:
    problem = schema_problem(dialect, [], database_url="postgresql://app@db/app")
    assert isinstance(problem, DatabaseNotMigratedError) and isinstance(problem, RiverError)
    assert problem.missing_tables == ("river_job", "river_leader", "river_migration", "river_notification",
                                      "river_queue")
    assert problem.applied_versions == () and problem.missing_versions == (1, 2, 3, 4, 5, 6, 7)
    assert problem.required_version == 7
    assert str(problem) == (
        "River's tables are missing: the database was never migrated (missing tables: river_job, "
        "river_leader, river_migration, river_notification, river_queue); migrations 1, 2, 3, 4, 5, 6, 7 "
        "are not applied. Run `river migrate-up --database-url postgresql://app@db/app`"
    )


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_an_older_schema_names_its_versions_and_what_it_lacks(dialect: str) -> None:
    problem = schema_problem(dialect, [6, 1, 2, 3, 4, 5], database_url=None, schema="jobs")
    assert problem is not None
    assert problem.missing_tables == ("river_notification",)
    assert (problem.applied_versions, problem.missing_versions) == ((1, 2, 3, 4, 5, 6), (7,))
    assert ("the database's River schema in schema 'jobs' is older than this client needs: version 6 is "
            "applied, version 7 is needed") in str(problem)
    fix = "migration 7 is not applied. Run `river migrate-up --database-url URL --schema jobs`"
    assert fix in str(problem)


def test_tables_a_later_version_drops_or_renames_are_not_reported_missing() -> None:
    # SQLite's version 5 creates river_client, which version 7 drops: a database at 4 lacks
    # river_notification only, and river_leader (rebuilt by 4) is there.
    problem = schema_problem("sqlite", [1, 2, 3, 4], database_url="sqlite://a.db")
    assert problem is not None and problem.missing_tables == ("river_notification",)
    assert problem.missing_versions == (5, 6, 7)


def test_migrate_command() -> None:
    assert migrate_command("sqlite://a.db", None) == "river migrate-up --database-url sqlite://a.db"
    assert migrate_command(None, "s") == "river migrate-up --database-url URL --schema s"
    assert migrate_command("sqlite://a.db", "s", "python") == (
        "river migrate-up --database-url sqlite://a.db --schema s --line python")
