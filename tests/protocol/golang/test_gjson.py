"""gjson paths as River's unique-key builder reads args with them."""

from __future__ import annotations

import pytest

from river_protocol.errors import UniqueKeyError
from river_protocol.golang import gjson


def test_get_paths() -> None:
    doc = b'{"a":{"b":[1,{"c":"x"}]},"k.e":2,"w*":3,"n":null}'
    assert gjson.get(doc, "a.b.1.c").string() == b"x"
    assert gjson.get(doc, "a.b.#").raw == b"2"
    assert gjson.get(doc, "k\\.e").raw == b"2"
    assert gjson.get(doc, "w?").raw == b"3"
    assert gjson.get(doc, "n").exists()
    assert not gjson.get(doc, "missing").exists()
    assert gjson.get(doc, "@this").raw == doc
    assert gjson.get(doc, "a.b.#.c").raw == b'["x"]'
    assert gjson.get(doc, 'a.b.#(c=="x").c').string() == b"x"


def test_keys_modifier_reads_as_unescaped_strings() -> None:
    def keys(doc: bytes) -> list[bytes]:
        return [k.string() for k in gjson.get(doc, "@keys").array()]

    assert keys(b'{"b":1,"\\u0061":2}') == [b"b", b"a"]
    # An array's members have no keys: gjson reports one null per member.
    assert keys(b"[1,2]") == [b"", b""]


def test_index_locates_raw_inside_the_document() -> None:
    doc = b'{"a": {"b": 7}}'
    found = gjson.get(doc, "a.b")
    assert doc[found.index : found.index + len(found.raw)] == b"7"
    assert gjson.get(doc, "missing").index == 0


def test_wildcard_and_match_queries() -> None:
    doc = b'{"items":[{"n":"apple"},{"n":"banana"},{"n":"apricot"}]}'
    assert gjson.get(doc, 'items.#(n%"ap*")#.n').raw == b'["apple","apricot"]'
    assert gjson.get(doc, 'items.#(n!%"ap*")#.n').raw == b'["banana"]'
    assert gjson.get(b'{"xy":1,"xz":2}', "x?").raw == b"1"


def test_valid_is_strict_json() -> None:
    assert gjson.valid(b'{"a":[1,2.5e3,true,null,"\\u00e9"]}')
    assert not gjson.valid(b"{'a':1}")
    assert not gjson.valid(b'{"a":01}')
    assert not gjson.valid(b"[1,]")


def test_parse_types() -> None:
    assert gjson.parse(b"12").type == gjson.NUMBER
    assert gjson.parse(b'"s"').string() == b"s"
    assert gjson.parse(b"[1]").is_array()
    assert gjson.parse(b"{}").is_object()


def test_pretty_modifier_is_refused() -> None:
    with pytest.raises(UniqueKeyError, match="@pretty"):
        gjson.get(b"{}", "@pretty")
