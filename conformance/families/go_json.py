"""Go ``encoding/json`` output: build the Python value a descriptor stands for, encode, compare bytes."""

from __future__ import annotations

import struct
from datetime import UTC, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from river_protocol.errors import EncodingError
from river_protocol.golang.encoding_json import Float32, GoString, RawJSON, encode
from river_protocol.golang.gotime import NS_PER_SECOND, GoTime

NAME = "go_json"
FILENAME = "go_json.json"


def _location(desc: dict[str, Any]) -> tzinfo:
    name = desc["location"]
    if name == "UTC":
        return UTC
    if name == "":
        return timezone(timedelta(seconds=desc["utc_offset_seconds"]))
    return ZoneInfo(name)


def build(desc: dict[str, Any]) -> Any:
    """The Python value standing for one language-neutral Go value descriptor."""
    kind = desc["type"]
    if kind == "float64":
        return struct.unpack(">d", bytes.fromhex(desc["bits"]))[0]
    if kind == "float32":
        return Float32(struct.unpack(">f", bytes.fromhex(desc["bits"]))[0])
    if kind in ("int64", "int", "uint64"):
        return int(desc["value"])
    if kind == "bool":
        return bool(desc["value"])
    if kind == "null":
        return None
    if kind == "string":
        raw = bytes.fromhex(desc["utf8_bytes_hex"])
        return raw.decode("utf-8") if desc.get("valid_utf8", True) else GoString(raw)
    if kind == "bytes":
        return None if desc["nil"] else bytes.fromhex(desc["hex"])
    if kind == "time":
        unix_ns = desc["unix_seconds"] * NS_PER_SECOND + desc["nanos"]
        return GoTime(unix_ns, _location(desc))
    if kind == "slice_any":
        return None if desc["nil"] else [build(item) for item in desc["items"]]
    if kind in ("map_string_any", "map_int_string"):
        if desc.get("nil"):
            return None
        return {build(k): build(v) for k, v in desc["entries"]}
    if kind == "raw_message":
        return RawJSON(bytes.fromhex(desc["bytes_hex"]))
    raise ValueError(f"unknown descriptor type {kind!r}")


def error_kind(message: str) -> str:
    """The part of a Go error that names what failed, without the parser's wording of why."""
    if message.startswith("json: error calling MarshalJSON for type "):
        type_name = message.removeprefix("json: error calling MarshalJSON for type ").split(":", 1)[0]
        return f"json: error calling MarshalJSON for type {type_name}:"
    return message


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    value = build(case["input"])
    try:
        got = encode(value)
    except EncodingError as exc:
        if case["error"] is None:
            return f"unexpected EncodingError: {exc}"
        kind = error_kind(case["error"])
        if not str(exc).startswith(kind):
            return f"error kind differs\n  want {kind!r}...\n  got  {str(exc)!r}"
        return None
    if case["error"] is not None:
        return f"expected error {case['error']!r}, got {got!r}"
    want = bytes.fromhex(case["output_hex"])
    if got != want:
        return f"input {case['input']}\n  want {want!r}\n  got  {got!r}"
    return None
