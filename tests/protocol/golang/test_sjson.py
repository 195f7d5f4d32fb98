"""sjson's SetRawBytes as River builds the args part of unique keys with it."""

from __future__ import annotations

import pytest

from river_protocol.errors import UniqueKeyError
from river_protocol.golang import sjson


def test_set_raw_builds_and_replaces() -> None:
    assert sjson.set_raw(b"", "a.b", b"1") == b'{"a":{"b":1}}'
    assert sjson.set_raw(b"", "0", b'"z"') == b'["z"]'
    assert sjson.set_raw(b'{"a":1}', "b", b"2") == b'{"a":1,"b":2}'
    assert sjson.set_raw(b'{"a":1}', "a", b"3") == b'{"a":3}'
    assert sjson.set_raw(b"", "a\\.b", b"1") == b'{"a.b":1}'
    assert sjson.set_raw(b"[1]", "-1", b"2") == b"[1,2]"


def test_complex_path_only_replaces_what_gjson_finds() -> None:
    assert sjson.set_raw(b"{}", "x*", b"1") == b"{}"
    assert sjson.set_raw(b'{"xa":1,"y":2}', "x*", b"9") == b'{"xa":9,"y":2}'


def test_keys_needing_escapes_are_written_as_go_marshals_them() -> None:
    assert sjson.set_raw(b"", b"<\xff>", b"1") == b'{"\\u003c\\ufffd\\u003e":1}'
    assert sjson.set_raw(b"", 'q"', b"1") == b'{"q\\"":1}'


def test_errors_carry_sjson_messages() -> None:
    with pytest.raises(UniqueKeyError, match="path cannot be empty"):
        sjson.set_raw(b"{}", "", b"1")
    with pytest.raises(UniqueKeyError, match="non-numeric key 'b'"):
        sjson.set_raw(b'["z"]', "b", b"1")
