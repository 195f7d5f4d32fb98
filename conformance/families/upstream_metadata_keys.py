"""River's protocol_values.json ``metadata_keys``: the metadata names River reserves."""

from __future__ import annotations

from typing import Any

from river_protocol import metadata_keys

NAME = "upstream_metadata_keys"
FILENAME = "protocol_values.json"
SOURCE = "upstream"

_OURS = {
    "output": metadata_keys.OUTPUT,
    "periodic_job_id": metadata_keys.PERIODIC_JOB_ID,
    "rescue_count": metadata_keys.RESCUE_COUNT,
    "resumable_cursor": metadata_keys.RESUMABLE_CURSOR,
    "resumable_step": metadata_keys.RESUMABLE_STEP,
    "unique_nonce": metadata_keys.UNIQUE_NONCE,
}


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": name, "name": name, "key": key} for name, key in sorted(fixture["metadata_keys"].items())]


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    ours = _OURS.get(case["name"])
    if ours is None:
        return f"no reserved key named {case['name']!r} (River's is {case['key']!r})"
    if ours not in metadata_keys.RESERVED:
        return f"{ours!r} is not in metadata_keys.RESERVED"
    return None if ours == case["key"] else f"key: got {ours!r}, want {case['key']!r}"
