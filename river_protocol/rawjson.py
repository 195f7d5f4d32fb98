"""JSON read as text: exact value bytes, object members and compaction.

Unique keys hash args byte for byte (number spelling, string escapes, member
order), so neither a parsed object nor a re-encoding may stand in for them.
These helpers walk already well-formed JSON text and hand back slices of it.
"""

from __future__ import annotations

from river_protocol.errors import UniqueKeyError
from river_protocol.golang import gjson

_WHITESPACE = b" \t\r\n"


def _malformed(data: bytes, at: int) -> UniqueKeyError:
    return UniqueKeyError(f"malformed JSON at byte {at}: {data[at:at + 20]!r}")


def skip_whitespace(data: bytes, at: int) -> int:
    while at < len(data) and data[at] in _WHITESPACE:
        at += 1
    return at


def _string_end(data: bytes, at: int) -> int:
    at += 1
    while at < len(data):
        byte = data[at]
        if byte == 0x5C:  # backslash: the next byte is escaped, whatever it is
            at += 2
            continue
        if byte == 0x22:
            return at + 1
        at += 1
    raise _malformed(data, at)


def value_end(data: bytes, at: int) -> int:
    """The offset just past the JSON value that starts at ``at``."""
    if at >= len(data):
        raise _malformed(data, at)
    first = data[at]
    if first == 0x22:
        return _string_end(data, at)
    if first in b"{[":
        close = 0x7D if first == 0x7B else 0x5D
        at = skip_whitespace(data, at + 1)
        if at < len(data) and data[at] == close:
            return at + 1
        while True:
            if first == 0x7B:
                if at >= len(data) or data[at] != 0x22:
                    raise _malformed(data, at)
                at = skip_whitespace(data, _string_end(data, at))
                if at >= len(data) or data[at] != 0x3A:
                    raise _malformed(data, at)
                at = skip_whitespace(data, at + 1)
            at = skip_whitespace(data, value_end(data, at))
            if at < len(data) and data[at] == 0x2C:
                at = skip_whitespace(data, at + 1)
                continue
            if at < len(data) and data[at] == close:
                return at + 1
            raise _malformed(data, at)
    end = at
    while end < len(data) and data[end] not in b" \t\r\n,]}:":
        end += 1
    if end == at:
        raise _malformed(data, at)
    return end


def object_members(data: bytes) -> list[tuple[bytes, bytes]] | None:
    """``(unescaped key, raw value)`` per member in source order, or None if ``data`` is no object."""
    at = skip_whitespace(data, 0)
    if at >= len(data) or data[at] != 0x7B:
        return None
    members: list[tuple[bytes, bytes]] = []
    at = skip_whitespace(data, at + 1)
    if at < len(data) and data[at] == 0x7D:
        return members
    while True:
        if at >= len(data) or data[at] != 0x22:
            raise _malformed(data, at)
        key_end = _string_end(data, at)
        key = gjson._unescape(data[at + 1 : key_end - 1])
        at = skip_whitespace(data, key_end)
        if at >= len(data) or data[at] != 0x3A:
            raise _malformed(data, at)
        start = skip_whitespace(data, at + 1)
        end = value_end(data, start)
        members.append((key, data[start:end]))
        at = skip_whitespace(data, end)
        if at < len(data) and data[at] == 0x2C:
            at = skip_whitespace(data, at + 1)
            continue
        if at < len(data) and data[at] == 0x7D:
            return members
        raise _malformed(data, at)


def compact(data: bytes) -> bytes:
    """``data`` without insignificant whitespace, as Go's ``json.Compact`` writes it."""
    out = bytearray()
    at = 0
    while at < len(data):
        byte = data[at]
        if byte == 0x22:
            end = _string_end(data, at)
            out += data[at:end]
            at = end
            continue
        if byte not in _WHITESPACE:
            out.append(byte)
        at += 1
    return bytes(out)
