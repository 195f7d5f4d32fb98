"""Exact source bytes of a value inside a JSON document.

River's unique-key goldens hash args as Go encoded them, and the fixture file
keeps those bytes only as text (escapes, member order, number spelling): a
parsed object would lose them. ``raw_value`` walks the text instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from river_protocol import rawjson


def array_elements(data: bytes) -> Iterator[bytes]:
    """The raw bytes of each element of the JSON array ``data``."""
    at = rawjson.skip_whitespace(data, 0)
    if at >= len(data) or data[at] != 0x5B:
        raise ValueError(f"not a JSON array: {data[:40]!r}")
    at = rawjson.skip_whitespace(data, at + 1)
    if at < len(data) and data[at] == 0x5D:
        return
    while True:
        end = rawjson.value_end(data, at)
        yield data[at:end]
        at = rawjson.skip_whitespace(data, end)
        if at < len(data) and data[at] == 0x2C:
            at = rawjson.skip_whitespace(data, at + 1)
            continue
        if at < len(data) and data[at] == 0x5D:
            return
        raise ValueError(f"malformed JSON array at byte {at}")


def raw_value(document: bytes, *path: str | int) -> bytes:
    """The bytes of the value at ``path`` (member names and array indexes), as written.

    A duplicated member name resolves to its first occurrence, as Go's gjson does.
    """
    current = document.strip()
    for step in path:
        if isinstance(step, int):
            for index, element in enumerate(array_elements(current)):
                if index == step:
                    current = element
                    break
            else:
                raise KeyError(f"array index {step} out of range")
            continue
        members = rawjson.object_members(current)
        if members is None:
            raise KeyError(f"{step!r}: not inside an object")
        wanted = step.encode()
        for key, value in members:
            if key == wanted:
                current = value
                break
        else:
            raise KeyError(f"no member {step!r}")
    return current


def compact(data: bytes) -> bytes:
    return rawjson.compact(data)
