"""SQLite job columns answer NULL and the one-byte JSONB of {} and [] without json_valid()/json().

The fast path (``SQLITE_JSON``) must say what the general path (``SQLITE_JSON_GENERAL``) says for
every value a column can hold: JSONB, JSON text, malformed bytes or text, numbers, NULL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_db.sqlite import connect_sqlite
from river_protocol.dialects.rows import SQLITE_JSON, SQLITE_JSON_GENERAL, sqlite_job_columns

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def conn() -> Iterator[Any]:
    c = connect_sqlite(":memory:")
    yield c
    c.close()


def _both(conn: Any, value: Any) -> tuple[Any, Any]:
    fast, general = SQLITE_JSON.format("v"), SQLITE_JSON_GENERAL.format("v")
    # Compared as hex: json() of a malformed blob may hand back text that is not UTF-8.
    row = conn.execute(f"SELECT hex({fast}), hex({general}), typeof({fast}), typeof({general})"
                       " FROM (SELECT ? AS v)", (value,)).fetchone()
    return (row[0], row[2]), (row[1], row[3])


def test_the_fast_cases_give_what_json_gives(conn: Any) -> None:
    assert _both(conn, None) == (("", "null"), ("", "null"))
    assert _both(conn, b"\x0c") == ((b"{}".hex().upper(), "text"),) * 2
    assert _both(conn, b"\x0b") == ((b"[]".hex().upper(), "text"),) * 2
    # The bytes JSONB writes for the empty object and array are the ones the fast path knows.
    assert conn.execute("SELECT jsonb('{}'), jsonb('[]')").fetchone() == (b"\x0c", b"\x0b")


def test_every_one_byte_blob_reads_as_the_general_path_reads_it(conn: Any) -> None:
    # The fast path's neighbours, each taken: a wrong byte in it would show here, not by chance.
    for byte in range(256):
        value = bytes([byte])
        assert _both(conn, value)[0] == _both(conn, value)[1], value


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(
    st.none(),
    st.binary(max_size=1),  # every one-byte blob, the fast path's neighbours
    st.binary(max_size=12),
    st.text(max_size=12),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    _json.map(lambda v: ("text", json.dumps(v))),
    _json.map(lambda v: ("jsonb", json.dumps(v))),
))
def test_the_fast_path_agrees_with_the_general_path(conn: Any, value: Any) -> None:
    if isinstance(value, tuple):  # JSON, stored as text or converted to JSONB as River writes it
        how, text = value
        value = conn.execute("SELECT jsonb(?)", (text,)).fetchone()[0] if how == "jsonb" else text
    fast, general = _both(conn, value)
    assert fast == general


def test_job_columns_read_json_through_the_fast_path() -> None:
    columns = sqlite_job_columns("j")
    for field in ("args", "attempted_by", "errors", "metadata", "tags"):
        assert SQLITE_JSON.format(f"j.{field}") in columns
