"""Go's utf8 decoding rules: one U+FFFD per byte that starts no valid sequence."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from river_protocol.golang.utf8 import decode_last_rune, decode_rune, encode_rune


def test_decode_rune() -> None:
    assert decode_rune(b"a") == (0x61, 1)
    assert decode_rune("é!".encode()) == (0xE9, 2)
    assert decode_rune(b"x\xf0\x9f\x98\x80", 1) == (0x1F600, 4)
    assert decode_rune(b"\xff") == (0xFFFD, 1)
    assert decode_rune(b"\xed\xa0\x80") == (0xFFFD, 1)  # a surrogate's encoding is invalid
    assert decode_rune(b"") == (0xFFFD, 0)


def test_decode_last_rune() -> None:
    assert decode_last_rune("aé".encode()) == (0xE9, 2)
    assert decode_last_rune(b"a\x80") == (0xFFFD, 1)
    assert decode_last_rune(b"\xe2\x82") == (0xFFFD, 1)
    assert decode_last_rune(b"") == (0xFFFD, 0)


def test_encode_rune_replaces_what_utf8_cannot_hold() -> None:
    assert encode_rune(0x41) == b"A"
    assert encode_rune(0xD800) == "\ufffd".encode()
    assert encode_rune(0x110000) == "\ufffd".encode()
    assert encode_rune(-1) == "\ufffd".encode()


@given(st.text())
def test_valid_text_decodes_rune_by_rune(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    i = 0
    for ch in text:
        r, size = decode_rune(data, i)
        if 0xD800 <= ord(ch) <= 0xDFFF:
            assert (r, size) == (0xFFFD, 1)
            i += 3
            continue
        assert (r, size) == (ord(ch), len(ch.encode()))
        assert encode_rune(r) == ch.encode()
        i += size
