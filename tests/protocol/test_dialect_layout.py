"""How the dialects are put together: shared rules in ``common``, one module per statement family."""

from __future__ import annotations

import ast
import importlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

import river_protocol.dialects
from river_protocol.dialects import common
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.postgres import fragments as pg
from river_protocol.dialects.rows import Binder
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.dialects.sqlite import fragments as sq
from river_protocol.errors import ValidationError
from river_protocol.intents import ListJobs
from river_protocol.job import JobRow
from river_protocol.states import JobState

DIALECTS = (PostgresDialect, SQLiteDialect)
PACKAGE_DIR = Path(river_protocol.dialects.__file__).parent


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
def test_each_intent_is_planned_by_one_module_of_its_own_dialect(dialect: type) -> None:
    package = f"river_protocol.dialects.{dialect.name}."
    owners: dict[type, str] = {}
    for module_name in dialect.planner_modules:
        assert module_name.startswith(package)
        for intent, planner in importlib.import_module(module_name).PLANNERS.items():
            assert intent not in owners, f"{intent.__name__} planned in {owners[intent]} and {module_name}"
            owners[intent] = module_name
            assert planner.__module__ == module_name
            assert dialect.planners()[intent] is planner
    # Driver tests register planners of their own at import; every real intent is covered here.
    real = {intent for intent in dialect.planners() if intent.__module__.startswith("river_protocol.")}
    assert real == set(owners)


@pytest.mark.parametrize(("dialect", "other"), [("postgres", "sqlite"), ("sqlite", "postgres")])
def test_neither_dialect_imports_the_other(dialect: str, other: str) -> None:
    for path in sorted((PACKAGE_DIR / dialect).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith(f"river_protocol.dialects.{other}"), path.name


def test_validate_schema_on_both_dialects() -> None:
    longest = "s" * common.MAX_SCHEMA_LENGTH
    assert common.validate_schema(longest) == longest
    for bad in ("s" * (common.MAX_SCHEMA_LENGTH + 1), "1abc", "a-b", 'a"b', "a.b"):
        with pytest.raises(ValidationError, match="invalid schema name"):
            common.validate_schema(bad)
        for dialect in DIALECTS:
            with pytest.raises(ValidationError, match="invalid schema name"):
                dialect(bad)
    assert PostgresDialect("river").prefix == SQLiteDialect("river").prefix == '"river".'
    assert PostgresDialect().prefix == SQLiteDialect().prefix == ""


def test_index_identifier_quotes_only_plain_names() -> None:
    assert common.index_identifier("river_job_kind") == '"river_job_kind"'
    for bad in ("", "a b", 'x"; DROP TABLE river_job; --', "9lives"):
        with pytest.raises(ValidationError, match="invalid index name"):
            common.index_identifier(bad)


def test_json_text_and_finalized_states() -> None:
    assert common.json_text('{"é":1}'.encode()) == '{"é":1}'
    assert common.FINALIZED_SQL == "('cancelled', 'completed', 'discarded')"


def _row(job_id: int) -> JobRow:
    return JobRow(id=job_id, kind="k", encoded_args=b"{}", state=JobState.AVAILABLE)


def test_results_from_rows_keep_input_order_and_skip_flags() -> None:
    results = common.results_from_rows([(_row(10), False), (_row(11), True)])
    assert [(r.job.id, r.unique_skipped_as_duplicate) for r in results] == [(10, False), (11, True)]


def test_order_and_cursor() -> None:
    b = Binder("?")
    stamp = datetime(2026, 1, 2, tzinfo=UTC)
    intent = ListJobs(order_by="finalized_at", descending=True, after=(stamp, 7))
    order, where = common.order_and_cursor(b, intent, lambda b, v: b.p(v))
    assert order == "finalized_at IS NULL, finalized_at DESC, id DESC"
    assert where == ["(finalized_at < ? OR (finalized_at = ? AND id < ?) OR finalized_at IS NULL)"]
    assert b.params == [stamp, stamp, 7]
    order, where = common.order_and_cursor(Binder("?"), ListJobs(after=(None, 3)), lambda b, v: b.p(v))
    assert (order, where) == ("id ASC", ["id > ?"])
    with pytest.raises(ValidationError, match="cannot order jobs by 'kind'"):
        common.order_and_cursor(Binder("?"), ListJobs(order_by="kind"), lambda b, v: b.p(v))


def test_postgres_fragments() -> None:
    b = pg.binder()
    assert pg.now_sql(b, None) == "now()" and b.params == []
    stamp = datetime(2026, 1, 2, tzinfo=UTC)
    assert pg.now_sql(b, stamp) == "%s::timestamptz" and b.params == [stamp]
    b = pg.binder()
    channel = pg.channel_sql(PostgresDialect("river"), b, "river_insert")
    assert channel == "concat(coalesce(%s::text, current_schema()), '.', %s::text)"
    assert b.params == ["river", "river_insert"]
    assert pg.JOB_COLUMNS.startswith("id, kind, args::text, state::text")
    assert pg.job_rows([]) == []


def test_sqlite_fragments() -> None:
    b = sq.binder()
    assert b.p(1) == "?"
    assert sq.sqlite_time(None) is None
    # River 0.44.1 writes exactly three fractional digits.
    assert sq.sqlite_time(datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)) == "2026-01-02 03:04:05.600"
    assert sq.json_list(("a", 1)) == '["a", 1]'
    # NULL and the one-byte JSONB of {} and [] first, then the general path.
    assert sq.JOB_COLUMNS.startswith(
        "id, kind, CASE WHEN args IS NULL THEN NULL WHEN args = x'0c' THEN '{}' WHEN args = x'0b' THEN '[]'"
        " WHEN json_valid(args, 10) THEN json(args) ELSE args END, state")
    assert sq.job_rows([]) == []
    assert sq.in_bitmask("o").startswith(f"CASE o.state WHEN '{JobState.AVAILABLE.value}'")
