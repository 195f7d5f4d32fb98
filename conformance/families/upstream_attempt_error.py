"""River's protocol_values.json ``attempt_error``: one ``errors[]`` element, byte for byte."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from conformance.families.retry import parse_gotime
from conformance.raw_json import compact, raw_value
from river_protocol.golang.gotime import format_rfc3339nano
from river_protocol.job import AttemptError, encode_attempt_error

NAME = "upstream_attempt_error"
FILENAME = "protocol_values.json"
SOURCE = "upstream"


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    raw = compact(raw_value(options["fixture_bytes"], "attempt_error"))
    value = fixture["attempt_error"]
    return [{"id": "encode", "value": value, "raw": raw}, {"id": "decode", "value": value, "raw": raw}]


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    value = case["value"]
    if case["id"] == "encode":
        at = parse_gotime(value["at"])
        got = encode_attempt_error(at, value["attempt"], value["error"], value["trace"])
        return None if got == case["raw"] else f"encoded: got {got!r}, want {case['raw']!r}"
    decoded = AttemptError.from_json(value)
    want_at = datetime.fromisoformat(value["at"])
    problems = [
        f"{what}: got {got!r}, want {want!r}"
        for what, got, want in (
            ("at", format_rfc3339nano(decoded.at), format_rfc3339nano(want_at)),
            ("attempt", decoded.attempt, value["attempt"]),
            ("error", decoded.error, value["error"]),
            ("trace", decoded.trace, value["trace"]),
        )
        if got != want
    ]
    return "; ".join(problems) or None
