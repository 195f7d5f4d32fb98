"""river_protocol.rawjson: value boundaries, members and compaction over JSON text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_protocol import rawjson
from river_protocol.errors import UniqueKeyError


def test_value_end_covers_nested_values_and_escaped_quotes() -> None:
    text = b'{"a": [1, {"b": "x\\"}"}], "c": 2}'
    assert rawjson.value_end(text, 0) == len(text)
    assert rawjson.value_end(text, 6) == text.index(b"]") + 1


def test_value_end_stops_a_number_at_its_delimiter() -> None:
    assert rawjson.value_end(b"-1.5e+3,", 0) == 7
    assert rawjson.value_end(b"true]", 0) == 4


@pytest.mark.parametrize("text", [b"", b'{"a" 1}', b'{"a":1', b'["x",', b'"open'])
def test_malformed_text_is_a_typed_error(text: bytes) -> None:
    with pytest.raises(UniqueKeyError, match="malformed JSON"):
        rawjson.object_members(text) if text.startswith(b"{") else rawjson.value_end(text, 0)


def test_object_members_keep_raw_values_and_unescape_names() -> None:
    text = b'{ "z" : 1.50 , "\\u0061" :{"k": [ 1 ]}, "z": 2 }'
    assert rawjson.object_members(text) == [(b"z", b"1.50"), (b"a", b'{"k": [ 1 ]}'), (b"z", b"2")]


def test_object_members_of_a_non_object_is_none() -> None:
    assert rawjson.object_members(b"[1]") is None
    assert rawjson.object_members(b' "s"') is None
    assert rawjson.object_members(b"{}") == []


def test_compact_keeps_whitespace_inside_strings_only() -> None:
    assert rawjson.compact(b'{\n  "a b": [ 1, "x \\" y" ],\n  "c": -0\n}') == b'{"a b":[1,"x \\" y"],"c":-0}'


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
))
def test_compact_of_indented_json_is_the_compact_encoding(value: object) -> None:
    indented = json.dumps(value, indent=2, ensure_ascii=False).encode()
    assert rawjson.compact(indented) == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert rawjson.value_end(indented, 0) == len(indented)
