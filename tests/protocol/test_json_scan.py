"""``encoding_json._json_decode``: the C scanner's fast path gives what ``JSONDecoder().decode``
(what it replaced: ``json.loads`` of a str, less its BOM check) gives, or the same error, for any
text (whitespace around the value and extra data go the general way)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from river_protocol.golang.encoding_json import _json_decode

_decode = json.JSONDecoder().decode

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
padding = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


def _outcome(fn: Any, text: str) -> Any:
    try:
        return ("value", fn(text))
    except json.JSONDecodeError as exc:
        return ("error", exc.msg, exc.pos)


@given(values, padding, padding)
def test_agrees_with_the_decoder_on_json_texts(value: Any, before: str, after: str) -> None:
    text = before + json.dumps(value) + after
    assert _outcome(_json_decode, text) == _outcome(_decode, text)


@given(st.text(max_size=20))
def test_agrees_with_the_decoder_on_any_text(text: str) -> None:
    assert repr(_outcome(_json_decode, text)) == repr(_outcome(_decode, text))


@pytest.mark.parametrize("text", ['{"a":1}x', "", "nul", '{"a":1} 2', "[1,", "\ufeff{}"])
def test_bad_texts_raise_as_the_decoder_does(text: str) -> None:
    assert _outcome(_json_decode, text)[0] == "error"
    assert _outcome(_json_decode, text) == _outcome(_decode, text)
