"""Go's ``unicode/utf8`` decoding, as gjson and match use it to step through Go strings.

Go strings are bytes that need not be valid UTF-8; Go's decoder yields U+FFFD
for each byte it cannot place, and the libraries above advance by that one byte.
"""

from __future__ import annotations


def encode_rune(r: int) -> bytes:
    """Go's ``utf8.AppendRune`` into empty bytes: surrogates and out-of-range runes become U+FFFD."""
    if 0xD800 <= r <= 0xDFFF or r > 0x10FFFF or r < 0:
        r = 0xFFFD
    return chr(r).encode()


def decode_rune(s: bytes, i: int = 0) -> tuple[int, int]:
    """Go's ``utf8.DecodeRune`` on ``s[i:]``: (rune, size); invalid -> (0xFFFD, 1); empty -> (0xFFFD, 0)."""
    if i >= len(s):
        return 0xFFFD, 0
    if s[i] < 0x80:
        return s[i], 1
    for k in (2, 3, 4):
        chunk = s[i : i + k]
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(text) == 1:
            return ord(text), k
    return 0xFFFD, 1


def decode_last_rune(s: bytes) -> tuple[int, int]:
    """Go's ``utf8.DecodeLastRune``: the (rune, size) ending ``s``, with ``decode_rune``'s conventions."""
    end = len(s)
    if end == 0:
        return 0xFFFD, 0
    if s[-1] < 0x80:
        return s[-1], 1
    lim = max(end - 4, 0)
    start = end - 1
    while start >= lim:
        if s[start] & 0xC0 != 0x80:
            break
        start -= 1
    start = max(start, 0)
    r, size = decode_rune(s[start:end])
    if start + size != end:
        return 0xFFFD, 1
    return r, size
