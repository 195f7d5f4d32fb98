"""Dump a migrated database in the normalized shape of the schema catalog fixtures.

See conformance/README "Schema catalogs": SQLite is read through sqlite_master and PRAGMAs,
Postgres through pg_catalog, printing definitions with the server's own deparsers so that a
catalog compares equal only when the objects really are the same.
"""

from __future__ import annotations

from typing import Any

Catalog = dict[str, Any]

# ---------------------------------------------------------------- SQLite

_QUOTES = {"'": "'", '"': '"', "`": "`", "[": "]"}


def normalize_sql(sql: str | None) -> str | None:
    """Comments removed, whitespace runs outside quotes collapsed to one space, no space after
    ``(`` or before ``)`` / ``,``, trimmed (the fixture's ``sql_normalization``)."""
    if sql is None:
        return None
    out: list[str] = []
    pending_space = False
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch.isspace():
            pending_space = True
            i += 1
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            pending_space = True
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            pending_space = True
            continue
        if pending_space and out and out[-1] != "(" and ch not in "),":
            out.append(" ")
        pending_space = False
        if ch in _QUOTES:
            end = sql.find(_QUOTES[ch], i + 1)
            end = n if end < 0 else end + 1
            out.append(sql[i:end])
            i = end
            continue
        out.append(ch)
        i += 1
    return "".join(out).strip()


def _rows(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        cur.close()


def dump_sqlite(conn: Any, schema: str | None = None) -> Catalog:
    """The ``catalog`` object of schema_sqlite.json for ``schema`` (an attached name, default main)."""
    db = schema or "main"
    master = [
        {"type": t, "name": name, "tbl_name": tbl, "sql": normalize_sql(sql)}
        for t, name, tbl, sql in _rows(
            conn, f'SELECT type, name, tbl_name, sql FROM "{db}".sqlite_master ORDER BY type, name'
        )
    ]
    tables: dict[str, Any] = {}
    for row in master:
        if row["type"] != "table" or row["name"].startswith("sqlite_"):
            continue
        name = row["name"]
        tables[name] = {
            "table_info": [
                {"cid": cid, "name": col, "type": typ, "notnull": nn, "dflt_value": dflt, "pk": pk}
                for cid, col, typ, nn, dflt, pk in _rows(conn, f'PRAGMA "{db}".table_info("{name}")')
            ],
            "index_list": sorted(
                (
                    {"name": idx, "unique": uniq, "origin": origin, "partial": partial}
                    for _seq, idx, uniq, origin, partial in _rows(conn, f'PRAGMA "{db}".index_list("{name}")')
                ),
                key=lambda r: r["name"],
            ),
            "foreign_keys": [
                {"id": fid, "seq": seq, "table": ref, "from": src, "to": dst,
                 "on_update": upd, "on_delete": dele, "match": match}
                for fid, seq, ref, src, dst, upd, dele, match
                in _rows(conn, f'PRAGMA "{db}".foreign_key_list("{name}")')
            ],
        }
    return {
        "sqlite_master": master,
        "tables": tables,
        "river_migration_rows": _migration_rows(conn, f'"{db}".', "river_migration" in tables,
                                                tables.get("river_migration", {}).get("table_info", [])),
    }


def _migration_rows(
    conn: Any, prefix: str, exists: bool, columns: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    if not exists:
        return []
    if any(c["name"] == "line" for c in columns):
        rows = _rows(conn, f"SELECT line, version FROM {prefix}river_migration ORDER BY line, version")
    else:
        # Before version 5 there is no line column: every row belongs to main.
        versions = _rows(conn, f"SELECT version FROM {prefix}river_migration ORDER BY version")
        rows = [("main", v) for (v,) in versions]
    return [{"line": line, "version": int(version)} for line, version in rows]


def sqlite_summary(catalog: Catalog) -> dict[str, list[str]]:
    """The ``schema_versions`` entry: tables and explicitly created index names."""
    master = catalog["sqlite_master"]
    return {
        "tables": sorted(
            r["name"] for r in master if r["type"] == "table" and not r["name"].startswith("sqlite_")
        ),
        "indexes": sorted(r["name"] for r in master if r["type"] == "index" and r["sql"] is not None),
    }


def sqlite_keyed(catalog: Catalog) -> dict[str, Any]:
    """``catalog`` with lists turned into name-keyed maps, for path-wise differences."""
    return {
        "sqlite_master": _by_name(catalog["sqlite_master"]),
        "tables": {
            name: {
                "table_info": {c["name"]: c for c in t["table_info"]},
                "index_list": {i["name"]: i for i in t["index_list"]},
                "foreign_keys": {f"{f['id']}.{f['seq']}": f for f in t["foreign_keys"]},
            }
            for name, t in catalog["tables"].items()
        },
        "river_migration_rows": [(r["line"], r["version"]) for r in catalog["river_migration_rows"]],
    }


# ---------------------------------------------------------------- Postgres

_TABLES = """
SELECT c.oid, c.relname, c.relpersistence FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'p') ORDER BY c.relname"""
_COLUMNS = """
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid)
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"""
_CONSTRAINTS = """
SELECT conname, contype::text, pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint
WHERE conrelid = %s ORDER BY conname"""
_INDEXES = """
SELECT ic.relname, pg_catalog.pg_get_indexdef(i.indexrelid) FROM pg_catalog.pg_index i
JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid = %s ORDER BY ic.relname"""
_TRIGGERS = """
SELECT tgname, pg_catalog.pg_get_triggerdef(oid) FROM pg_catalog.pg_trigger
WHERE tgrelid = %s AND NOT tgisinternal ORDER BY tgname"""
_FUNCTIONS = """
SELECT p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid), pg_catalog.pg_get_functiondef(p.oid)
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %s AND p.prokind = 'f' ORDER BY 1, 2"""
_ENUMS = """
SELECT t.typname, array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
JOIN pg_catalog.pg_enum e ON e.enumtypid = t.oid
WHERE n.nspname = %s GROUP BY t.typname ORDER BY t.typname"""
_SEQUENCES = """
SELECT c.relname, pg_catalog.format_type(s.seqtypid, NULL), tc.relname || '.' || a.attname
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_sequence s ON s.seqrelid = c.oid
LEFT JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = c.oid
     AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.deptype = 'a'
LEFT JOIN pg_catalog.pg_class tc ON tc.oid = d.refobjid
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE n.nspname = %s AND c.relkind = 'S' ORDER BY c.relname"""


def dump_postgres(conn: Any, schema: str = "public") -> Catalog:
    """The ``catalog`` object of schema_postgres.json for ``schema``. Types print unqualified
    only for schemas on the search_path, so the caller sets it to ``schema`` first."""
    tables: dict[str, Any] = {}
    for oid, name, persistence in _rows(conn, _TABLES, (schema,)):
        tables[name] = {
            "persistence": {"p": "permanent", "u": "unlogged", "t": "temporary"}[persistence],
            "columns": [
                {"name": col, "type": typ, "not_null": nn, "default": dflt}
                for col, typ, nn, dflt in _rows(conn, _COLUMNS, (oid,))
            ],
            "constraints": [
                {"name": cn, "type": ct, "definition": cd} for cn, ct, cd in _rows(conn, _CONSTRAINTS, (oid,))
            ],
            "indexes": [{"name": i, "definition": d} for i, d in _rows(conn, _INDEXES, (oid,))],
            "triggers": [{"name": t, "definition": d} for t, d in _rows(conn, _TRIGGERS, (oid,))],
        }
    prefix = '"' + schema.replace('"', '""') + '".'
    columns = [{"name": c["name"]} for c in tables.get("river_migration", {}).get("columns", [])]
    return {
        "tables": tables,
        "functions": [
            {"name": n, "identity_arguments": a, "definition": d}
            for n, a, d in _rows(conn, _FUNCTIONS, (schema,))
        ],
        "enum_types": [
            {"name": n, "labels_in_sort_order": list(labels)} for n, labels in _rows(conn, _ENUMS, (schema,))
        ],
        "sequences": [
            {"name": n, "data_type": t, "owned_by": o} for n, t, o in _rows(conn, _SEQUENCES, (schema,))
        ],
        "river_migration_rows": _migration_rows(conn, prefix, "river_migration" in tables, columns),
    }


def postgres_summary(catalog: Catalog) -> dict[str, list[str]]:
    """The ``schema_versions`` entry: table, index, function and enum names."""
    return {
        "tables": sorted(catalog["tables"]),
        "indexes": sorted(i["name"] for t in catalog["tables"].values() for i in t["indexes"]),
        "functions": sorted(f["name"] for f in catalog["functions"]),
        "enum_types": sorted(e["name"] for e in catalog["enum_types"]),
    }


def postgres_keyed(catalog: Catalog) -> dict[str, Any]:
    return {
        "tables": {
            name: {
                "persistence": t["persistence"],
                "column_order": [c["name"] for c in t["columns"]],
                "columns": _by_name(t["columns"]),
                "constraints": _by_name(t["constraints"]),
                "indexes": {i["name"]: i["definition"] for i in t["indexes"]},
                "triggers": {i["name"]: i["definition"] for i in t["triggers"]},
            }
            for name, t in catalog["tables"].items()
        },
        "functions": {
            f"{f['name']}({f['identity_arguments']})": f["definition"] for f in catalog["functions"]
        },
        "enum_types": _by_name(catalog["enum_types"]),
        "sequences": _by_name(catalog["sequences"]),
        "river_migration_rows": [(r["line"], r["version"]) for r in catalog["river_migration_rows"]],
    }


# ---------------------------------------------------------------- differences


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["name"]: {k: v for k, v in i.items() if k != "name"} for i in items}


def differences(expected: Any, actual: Any, path: str = "", *, readable: bool = False) -> list[str]:
    """Sorted messages ``changed P: a -> b``, ``extra P`` (only in actual), ``missing P``.

    With ``readable``, long differing strings are shown around their first difference."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found: list[str] = []
        for key in expected.keys() | actual.keys():
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                found.append(f"missing {sub}")
            elif key not in expected:
                found.append(f"extra {sub}")
            else:
                found.extend(differences(expected[key], actual[key], sub, readable=readable))
        return sorted(found)
    if expected == actual:
        return []
    if readable and isinstance(expected, str) and isinstance(actual, str) and len(expected) > 100:
        at = next((i for i, (x, y) in enumerate(zip(expected, actual, strict=False)) if x != y),
                  min(len(expected), len(actual)))
        lo = max(0, at - 40)
        near_expected, near_actual = expected[lo : at + 40], actual[lo : at + 40]
        return [f"changed {path} at offset {at}: ...{near_expected!r}... -> ...{near_actual!r}..."]
    return [f"changed {path}: {expected!r} -> {actual!r}"]


# ---------------------------------------------------------------- runs and checks


class StepwiseRun:
    """A database migrated up one version at a time, then down to 0, dumped after each step.

    ``up[v]`` is the state of a fresh migration to ``v`` (``up[0]`` the empty database),
    ``down[v]`` the state after migrating down from ``v + 1``.
    """

    def __init__(self, migrator: Any, dump: Any, versions: list[int]) -> None:
        self.up: dict[int, Catalog] = {0: dump()}
        self.down: dict[int, Catalog] = {}
        for version in versions:
            migrator.migrate_up(target_version=version)
            self.up[version] = dump()
        for version in reversed(versions):
            migrator.migrate_down()
            self.down[version - 1] = dump()


def describe(problems: list[str], limit: int = 40) -> str | None:
    if not problems:
        return None
    shown = problems[:limit]
    more = f"\n  ... {len(problems) - limit} more" if len(problems) > limit else ""
    return "differences (fixture -> ours):\n  " + "\n  ".join(shown) + more


def stepwise_versions(fixture: Catalog) -> list[int]:
    """The fixture's versions (River v0.43's, 1 to 7) and River's version 8 after them."""
    from conformance.river_v8 import VERSION

    return [*sorted(int(v) for v in fixture["schema_versions"]), VERSION]


def stepwise_cases(fixture: Catalog) -> list[dict[str, Any]]:
    versions = stepwise_versions(fixture)
    return (
        [{"id": "catalog_at_7"}, {"id": "catalog_at_8"}, {"id": "river_migration_rows"}]
        + [{"id": f"up_to_{v}", "version": v} for v in versions]
        + [{"id": f"down_{v}_to_{v - 1}", "version": v} for v in reversed(versions)]
    )


def check_stepwise(
    case: dict[str, Any], fixture: Catalog, run: StepwiseRun, keyed: Any, summary: Any, at_8: Any
) -> str | None:
    """One case of ``stepwise_cases``; ``at_8`` makes River's catalog at 8 from the fixture's
    at 7 (``conformance.river_v8``), which versions 7 and 8 are checked against."""
    expected = {7: fixture["catalog"], 8: at_8(fixture["catalog"])}
    if case["id"] in ("catalog_at_7", "catalog_at_8"):
        version = int(case["id"][-1])
        return describe(differences(keyed(expected[version]), keyed(run.up[version]), readable=True))
    if case["id"] == "river_migration_rows":
        for version, catalog in expected.items():
            want, got = catalog["river_migration_rows"], run.up[version]["river_migration_rows"]
            if want != got:
                return f"river_migration rows at {version}: fixture {want}, ours {got}"
        return None
    version = case["version"]
    if case["id"].startswith("up_to_"):
        want_summary = (summary(expected[version]) if version in expected
                        else fixture["schema_versions"][str(version)])
        got_summary = summary(run.up[version])
        return describe(differences(want_summary, {k: got_summary[k] for k in want_summary}))
    key = f"{version}->{version - 1}"
    # Down from 8 must give back exactly River v0.43's schema at 7: no difference at all.
    want_diff = sorted(fixture["down_migration_differences_from_up_state"].get(key, []))
    got_diff = differences(keyed(run.up[version - 1]), keyed(run.down[version - 1]))
    if want_diff == got_diff:
        return None
    return (
        f"after migrating down {key}, the state should differ from a fresh migration to "
        f"{version - 1} by exactly:\n  " + "\n  ".join(want_diff or ["(nothing)"])
        + "\nbut differs by:\n  " + "\n  ".join(got_diff or ["(nothing)"])
    )
