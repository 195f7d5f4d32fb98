"""decode_args on bytes (what a claim hands over) takes a shortcut; it must give what the general path gives.

A ``bytearray`` never takes the shortcut (it is not exactly ``bytes``), so comparing the two
compares the shortcut with the general decoding, invalid UTF-8 included; valid UTF-8 must also
decode as its ``str`` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import decode_args


@dataclass
class Email:
    to: str = ""
    count: int = 0
    tags: list[str] = field(default_factory=list)
    extra: Any = None


TYPES: tuple[Any, ...] = (dict, dict[str, Any], Any, list, Email, int, str)


def _outcome(args_type: Any, data: bytes | bytearray | str) -> tuple[str, Any]:
    try:
        return ("ok", decode_args(args_type, data))  # type: ignore[arg-type]  # bytearray: the general path
    except ValidationError as exc:
        return (type(exc).__qualname__, str(exc))


def _same_everywhere(data: bytes) -> None:
    for args_type in TYPES:
        fast = _outcome(args_type, data)
        assert fast == _outcome(args_type, bytearray(data)), (args_type, data)
        try:
            text = data.decode()
        except UnicodeDecodeError:
            continue
        assert fast == _outcome(args_type, text), (args_type, data)


@pytest.mark.parametrize("data", [
    b'{"to": "a@example.com", "count": 3, "tags": ["x"]}',
    b'{"TO": "folded", "Count": 1}',
    b"{}", b"null", b"[1, 2]", b"3", b'"s"',
    b' {"to": "leading and trailing whitespace"} \n',
    b'{"to": "caf\xc3\xa9 \\u00e9 \\ud83d\\ude00"}',
    b'{"to": "lone \\ud800 escape"}',
    b'{"to": "invalid utf-8 \xff\xfe"}',
    b'{"extra": {"deep": [null, true, 1.5e3]}}',
])
def test_valid_json_decodes_the_same_from_bytes_bytearray_and_str(data: bytes) -> None:
    _same_everywhere(data)


@pytest.mark.parametrize("data", [
    b"", b"   ", b"{", b'{"to": }', b"{} {}", b"{}x", b"nul", b"\xff", b"[" * 100_000,
    b"1" * 5000, b'{"count": "three"}', b'{"to": 3}',
])
def test_invalid_json_fails_with_the_same_typed_error(data: bytes) -> None:
    _same_everywhere(data)
    assert _outcome(dict, data)[0] == "ValidationError" or _outcome(Email, data)[0] == "ValidationError"


def test_a_lone_surrogate_escape_is_replaced_on_the_shortcut_too() -> None:
    assert decode_args(dict, b'{"a": "x\\udc00y"}') == {"a": "x\ufffdy"}


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values, st.booleans(), st.sampled_from(["", " ", "\n"]))
def test_any_json_value_decodes_the_same_from_bytes_bytearray_and_str(
    value: Any, ascii_only: bool, pad: str
) -> None:
    # ensure_ascii=False keeps lone surrogates raw: surrogatepass turns them into invalid UTF-8.
    text = pad + json.dumps(value, ensure_ascii=ascii_only) + pad
    _same_everywhere(text.encode("utf-8", "surrogatepass"))
