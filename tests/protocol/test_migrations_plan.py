"""The pure migration planner, the bundled scripts and the SQLite statement splitter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_protocol.dialects.base import drive
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import MigrationError, RiverProSchemaError, ValidationError
from river_protocol.intents import ApplyMigration, CheckMigration, GetMigrations, Statement
from river_protocol.migrations import (
    MAIN_VERSIONS,
    SCHEMA_PLACEHOLDER,
    check_line,
    migration,
    migrations_for,
    plan_migration,
    render,
    split_statements,
    unapplied,
    versions_for,
)
from river_protocol.migrations.pro_guard import RIVER_PRO_MARKERS

ALL8 = set(MAIN_VERSIONS)

# ---------------------------------------------------------------- up


def test_up_applies_every_unapplied_version_ascending() -> None:
    assert plan_migration(set(), "up") == [1, 2, 3, 4, 5, 6, 7, 8]
    assert plan_migration({1, 2, 3}, "up") == [4, 5, 6, 7, 8]
    assert plan_migration({1, 3}, "up") == [2, 4, 5, 6, 7, 8]
    assert plan_migration(ALL8, "up") == []


def test_up_max_steps_limits_the_count() -> None:
    assert plan_migration({1}, "up", max_steps=2) == [2, 3]
    assert plan_migration({1, 2, 3, 4, 5, 6}, "up", max_steps=5) == [7, 8]


def test_up_target_is_inclusive() -> None:
    assert plan_migration(set(), "up", target_version=4) == [1, 2, 3, 4]
    assert plan_migration({1, 2}, "up", target_version=3) == [3]


def test_up_target_already_applied_means_nothing_to_do() -> None:
    # Go would keep going past an applied target; we deliberately stop.
    assert plan_migration({1, 2, 3}, "up", target_version=2) == []


def test_up_target_and_max_steps_combine() -> None:
    assert plan_migration(set(), "up", target_version=5, max_steps=2) == [1, 2]


def test_up_target_minus_one_means_all() -> None:
    assert plan_migration({1}, "up", target_version=-1) == [2, 3, 4, 5, 6, 7, 8]


def test_a_database_at_7_goes_up_to_8_and_back() -> None:
    # River Go v0.43 to v0.47 leave databases at 7; this River adds 8 and can take it away.
    assert plan_migration(set(range(1, 8)), "up") == [8]
    assert plan_migration(ALL8, "down", target_version=7) == [8]
    assert plan_migration(ALL8, "down") == [8]


@pytest.mark.parametrize("target", [0, 9, 100, -2])
def test_unknown_target_is_an_error(target: int) -> None:
    for direction in ("up", "down"):
        with pytest.raises(MigrationError, match=f"version {target} is not a valid"):
            plan_migration(ALL8, direction, target_version=target)


def test_negative_max_steps_applies_nothing() -> None:
    assert plan_migration(set(), "up", max_steps=-1) == []
    assert plan_migration(ALL8, "down", max_steps=-1) == []
    assert plan_migration(ALL8, "down", target_version=-1, max_steps=-1) == []


# ---------------------------------------------------------------- down


def test_down_defaults_to_one_step() -> None:
    assert plan_migration(ALL8, "down") == [8]
    assert plan_migration({1, 2, 3}, "down") == [3]
    assert plan_migration(set(), "down") == []


def test_down_max_steps() -> None:
    assert plan_migration(ALL8, "down", max_steps=3) == [8, 7, 6]
    assert plan_migration({1, 2}, "down", max_steps=5) == [2, 1]


def test_down_target_stops_before_it() -> None:
    assert plan_migration(ALL8, "down", target_version=4) == [8, 7, 6, 5]
    assert plan_migration(ALL8, "down", target_version=8) == []


def test_down_target_must_be_applied() -> None:
    with pytest.raises(MigrationError, match="not applied"):
        plan_migration({1, 2, 3}, "down", target_version=5)


def test_down_target_minus_one_removes_everything() -> None:
    assert plan_migration(ALL8, "down", target_version=-1) == [8, 7, 6, 5, 4, 3, 2, 1]
    assert plan_migration(ALL8, "down", target_version=-1, max_steps=2) == [8, 7]


def test_versions_unknown_to_the_bundle_are_ignored() -> None:
    assert plan_migration({1, 2, 9}, "down") == [2]
    assert plan_migration({1, 2, 9}, "up", max_steps=1) == [3]


def test_available_versions_can_be_given() -> None:
    assert plan_migration({1}, "up", available=[1, 2, 3]) == [2, 3]
    with pytest.raises(MigrationError):
        plan_migration({1}, "up", target_version=4, available=[1, 2, 3])


def test_bad_direction() -> None:
    with pytest.raises(ValidationError, match="direction"):
        plan_migration(set(), "sideways")


@given(st.sets(st.sampled_from(MAIN_VERSIONS)), st.sampled_from(MAIN_VERSIONS))
def test_up_to_target_then_down_to_target(applied: set[int], target: int) -> None:
    up = plan_migration(applied, "up", target_version=target)
    assert up == sorted(up) and not set(up) & applied
    after = applied | set(up)
    if target not in applied:
        assert set(range(1, target + 1)) <= after
    down = plan_migration(after, "down", target_version=target)
    assert down == sorted(down, reverse=True)
    assert after - set(down) == {v for v in after if v <= target}


# ---------------------------------------------------------------- validation


def test_unapplied_lists_missing_versions() -> None:
    assert unapplied(ALL8) == []
    assert unapplied({1, 2, 4}) == [3, 5, 6, 7, 8]
    assert unapplied(set(range(1, 8))) == [8]  # a validation (River's) wants every version
    assert unapplied({1, 2}, target_version=4) == [3, 4]
    with pytest.raises(MigrationError):
        unapplied(set(), target_version=9)


# ---------------------------------------------------------------- bundle


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
def test_bundle_has_versions_one_to_eight_with_names(dialect: str) -> None:
    migrations = migrations_for(dialect)
    assert [m.version for m in migrations] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert versions_for(dialect) == MAIN_VERSIONS
    assert migrations[0].name == "create river migration"
    assert migrations[6].name == "notification outbox sqlite jsonb and sql cleanup"
    assert migrations[7].name == "job id autoincrement"
    for m in migrations:
        assert m.up_sql.strip() and m.down_sql.strip()
        assert m.sql("up") == m.up_sql and m.sql("down") == m.down_sql


def test_postgres_scripts_are_safe_for_psycopg_and_templated() -> None:
    for m in migrations_for("postgres"):
        for sql in (m.up_sql, m.down_sql):
            assert "%" not in sql  # psycopg would read it as a placeholder
            # Version 8 is River's no-op on Postgres: comments only, nothing to qualify.
            assert SCHEMA_PLACEHOLDER in sql or (m.version == 8 and split_statements(sql) == [])


def test_render_replaces_every_placeholder_even_in_literals() -> None:
    v5 = migration("postgres", 5).up_sql
    rendered = render(v5, '"custom".')
    assert SCHEMA_PLACEHOLDER not in rendered
    assert "to_regclass('\"custom\".river_migration')" in rendered
    assert "river_migration" in render(v5, "") and SCHEMA_PLACEHOLDER not in render(v5, "")


def test_unknown_dialect_line_or_version() -> None:
    with pytest.raises(ValidationError, match="unknown dialect"):
        migrations_for("mysql")
    with pytest.raises(MigrationError, match="did you mean 'main'"):
        check_line("mian")
    with pytest.raises(MigrationError, match="does not exist"):
        migrations_for("sqlite", line="workflow")
    with pytest.raises(MigrationError, match=r"available versions: \[1, 2, 3, 4, 5, 6, 7, 8\]"):
        migration("sqlite", 9)
    with pytest.raises(ValidationError):
        migration("sqlite", 1).sql("sideways")


# ---------------------------------------------------------------- statement splitting


def test_split_on_top_level_semicolons_only() -> None:
    script = """
    -- leading comment; with a semicolon
    CREATE TABLE a (x text DEFAULT ';', "y;" int, [z;] int, `w;` int); /* c; */
    INSERT INTO a (x) VALUES ('it''s; fine');
    SELECT 1
    """
    assert split_statements(script) == [
        "-- leading comment; with a semicolon\n    "
        "CREATE TABLE a (x text DEFAULT ';', \"y;\" int, [z;] int, `w;` int)",
        "/* c; */\n    INSERT INTO a (x) VALUES ('it''s; fine')",
        "SELECT 1",
    ]


def test_split_drops_comment_only_pieces() -> None:
    assert split_statements("-- nothing here;\n/* nor; here */ ;  ;") == []
    assert split_statements(migration("sqlite", 3).up_sql) == []


def test_split_keeps_trigger_bodies_whole() -> None:
    script = (
        "CREATE TEMP TRIGGER t AFTER INSERT ON a BEGIN UPDATE a SET x = 'end;'; DELETE FROM b; END;"
        "SELECT 2;"
    )
    assert split_statements(script) == [
        "CREATE TEMP TRIGGER t AFTER INSERT ON a BEGIN UPDATE a SET x = 'end;'; DELETE FROM b; END",
        "SELECT 2",
    ]


def test_split_sqlite_v7_has_one_statement_per_ddl() -> None:
    statements = split_statements(render(migration("sqlite", 7).up_sql, ""))
    assert "CREATE TABLE river_notification" in statements[0]
    assert sum(s.count("CREATE TABLE") for s in statements) == 3
    assert all(not s.endswith(";") for s in statements)


# ---------------------------------------------------------------- planners


def _run(plan, answers):  # type: ignore[no-untyped-def]
    seen: list[Statement] = []

    def execute(step):  # type: ignore[no-untyped-def]
        seen.append(step)
        return answers.pop(0) if answers else []

    return drive(plan, execute), seen


def test_get_migrations_without_table_is_empty() -> None:
    dialect = PostgresDialect()
    result, seen = _run(dialect.plan(GetMigrations()), [[(False, False)]])
    assert result == [] and len(seen) == 1
    assert seen[0].params == ("river_migration", "river_migration")
    with pytest.raises(MigrationError, match="non-main"):
        _run(dialect.plan(GetMigrations(line="other")), [[(False, False)]])


def test_get_migrations_pre_v5_table_reads_all_rows_as_main() -> None:
    dialect = SQLiteDialect()
    result, seen = _run(dialect.plan(GetMigrations()), [[(1, 0)], [(1,), (2,), (3,)]])
    assert result == [1, 2, 3]
    assert "line" not in seen[1].sql.split("FROM")[1]
    with pytest.raises(MigrationError, match="line"):
        _run(dialect.plan(GetMigrations(line="other")), [[(1, 0)]])


def test_get_migrations_filters_by_line_with_schema() -> None:
    dialect = PostgresDialect(schema="custom")
    result, seen = _run(dialect.plan(GetMigrations(line="main")), [[(True, True)], [(1,), (2,)]])
    assert result == [1, 2]
    assert seen[0].params == ('"custom".river_migration', '"custom".river_migration')
    assert 'FROM "custom".river_migration WHERE line = %s' in seen[1].sql
    assert seen[1].params == ("main",)


@pytest.mark.parametrize(
    ("direction", "version", "line", "expected"),
    [
        ("up", 1, "main", ("INSERT INTO river_migration (version) VALUES (?)", (1,))),
        ("up", 4, "main", ("INSERT INTO river_migration (version) VALUES (?)", (4,))),
        ("up", 5, "main", ("INSERT INTO river_migration (line, version) VALUES (?, ?)", ("main", 5))),
        ("down", 1, "main", None),
        ("down", 5, "main", ("DELETE FROM river_migration WHERE version = ?", (5,))),
        ("down", 6, "main", ("DELETE FROM river_migration WHERE line = ? AND version = ?", ("main", 6))),
        ("down", 2, "other", ("DELETE FROM river_migration WHERE line = ? AND version = ?", ("other", 2))),
    ],
)
def test_apply_migration_bookkeeping(
    direction: str, version: int, line: str, expected: tuple[str, tuple[int, ...]] | None
) -> None:
    intent = ApplyMigration(line, version, direction, "CREATE TABLE x (a int); DROP TABLE x;")
    assert ApplyMigration.transactional
    _, seen = _run(SQLiteDialect().plan(intent), [])
    assert [s.sql for s in seen[:2]] == ["CREATE TABLE x (a int)", "DROP TABLE x"]
    book = seen[2:]
    if expected is None:
        assert book == []
    else:
        assert [(s.sql, s.params) for s in book] == [expected]


def test_apply_migration_postgres_runs_script_as_one_statement_with_schema() -> None:
    intent = ApplyMigration("main", 7, "up", "SELECT 1; SELECT 2;")
    _, seen = _run(PostgresDialect(schema="s").plan(intent), [])
    assert seen[0].sql == "SELECT 1; SELECT 2;" and seen[0].params == () and not seen[0].fetch
    assert seen[1].sql == 'INSERT INTO "s".river_migration (line, version) VALUES (%s, %s)'


def test_apply_migration_rejects_bad_input() -> None:
    with pytest.raises(ValidationError):
        _run(SQLiteDialect().plan(ApplyMigration("main", 1, "sideways", "")), [])
    with pytest.raises(MigrationError):
        _run(SQLiteDialect().plan(ApplyMigration("main", 0, "up", "")), [])


# ---------------------------------------------------------------- version 8 and River Pro


@pytest.mark.parametrize("direction", ["up", "down"])
def test_sqlite_v8_looks_for_river_pro_first_and_runs_when_there_is_none(direction: str) -> None:
    sql = render(migration("sqlite", 8).sql(direction), '"other".')
    _, seen = _run(SQLiteDialect(schema="other").plan(ApplyMigration("main", 8, direction, sql)), [[]])
    assert seen[0].sql == ('SELECT name FROM "other".sqlite_master WHERE name IN (?, ?, ?) ORDER BY name')
    assert seen[0].params == RIVER_PRO_MARKERS and seen[0].fetch
    assert any('CREATE TABLE "other".river_job (' in s.sql for s in seen[1:])
    assert seen[-1].params == ("main", 8)


@pytest.mark.parametrize("direction", ["up", "down"])
def test_sqlite_v8_is_refused_while_river_pro_is_installed(direction: str) -> None:
    intent = ApplyMigration("main", 8, direction, migration("sqlite", 8).sql(direction))
    with pytest.raises(RiverProSchemaError) as caught:
        _run(SQLiteDialect().plan(intent), [[("river_job_sequence",), ("river_workflow",)]])
    error = caught.value
    assert isinstance(error, MigrationError)
    assert (error.version, error.direction) == (8, direction)
    assert error.objects == ("river_job_sequence", "river_workflow")
    assert str(error).startswith(f"migration 008 [{direction}] refused: River Pro's schema is installed "
                                 "(river_job_sequence, river_workflow)")
    assert "rebuilds river_job" in str(error)
    assert ("stays at version 7" if direction == "up" else "stays at version 8") in str(error)


def test_only_sqlite_v8_of_the_main_line_looks_for_river_pro() -> None:
    for line, version in (("main", 7), ("python", 8)):
        intent = ApplyMigration(line, version, "up", "SELECT 1;")
        _, seen = _run(SQLiteDialect().plan(intent), [])
        assert "sqlite_master" not in seen[0].sql
    # Postgres's version 8 is comments only: nothing but its bookkeeping runs.
    intent = ApplyMigration("main", 8, "up", migration("postgres", 8).up_sql)
    _, seen = _run(PostgresDialect().plan(intent), [])
    assert [s.sql for s in seen] == ["INSERT INTO river_migration (line, version) VALUES (%s, %s)"]


@pytest.mark.parametrize("direction", ["up", "down"])
def test_a_dry_run_check_of_sqlite_v8_raises_the_refusal_the_run_would(direction: str) -> None:
    check = CheckMigration("main", 8, direction)
    assert not CheckMigration.transactional
    found = [("river_job_sequence",), ("river_workflow",)]
    with pytest.raises(RiverProSchemaError) as dry:
        _run(SQLiteDialect(schema="other").plan(check), [list(found)])
    intent = ApplyMigration("main", 8, direction, migration("sqlite", 8).sql(direction))
    with pytest.raises(RiverProSchemaError) as real:
        _run(SQLiteDialect(schema="other").plan(intent), [list(found)])
    assert str(dry.value) == str(real.value) and "in attached schema 'other'" in str(dry.value)
    assert (dry.value.version, dry.value.direction, dry.value.objects) == (
        real.value.version, real.value.direction, real.value.objects)
    # Without River Pro's objects the check passes, having read the schema and written nothing.
    result, seen = _run(SQLiteDialect(schema="other").plan(check), [[]])
    assert result is None and [s.sql for s in seen] == [
        'SELECT name FROM "other".sqlite_master WHERE name IN (?, ?, ?) ORDER BY name']


def test_a_dry_run_check_sends_nothing_where_no_version_is_refused() -> None:
    for dialect, line, version in ((SQLiteDialect(), "main", 7), (SQLiteDialect(), "python", 8),
                                   (PostgresDialect(), "main", 8)):
        result, seen = _run(dialect.plan(CheckMigration(line, version, "up")), [])
        assert result is None and seen == []


def test_the_sqlite_v8_scripts_carry_the_same_river_pro_check() -> None:
    # For anyone running `river migrate-get` output by hand: the scripts refuse by themselves.
    for direction in ("up", "down"):
        sql = migration("sqlite", 8).sql(direction)
        assert all(f"'{name}'" in sql for name in RIVER_PRO_MARKERS)
        assert "RAISE(ABORT" in sql
