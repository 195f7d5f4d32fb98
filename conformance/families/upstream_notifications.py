"""River's protocol_values.json ``notifications`` and ``topics``: payloads byte for byte.

Each payload is built by our builder from the golden's values and compared
with the golden's compact text (Go's field order), then parsed back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conformance.raw_json import compact, raw_value
from river_protocol.machines import notifications as n

NAME = "upstream_notifications"
FILENAME = "protocol_values.json"
SOURCE = "upstream"

_TOPICS = {"control": n.TOPIC_CONTROL, "insert": n.TOPIC_INSERT, "leadership": n.TOPIC_LEADERSHIP}

# name -> (topic, builder from the payload's values and its raw metadata)
_BUILDERS: dict[str, tuple[str, Callable[[dict[str, Any], bytes], str]]] = {
    "cancel": (n.TOPIC_CONTROL, lambda p, _: n.build_cancel(p["job_id"], p["queue"])),
    "insert": (n.TOPIC_INSERT, lambda p, _: n.build_insert(p["queue"])),
    "metadata_changed": (n.TOPIC_CONTROL, lambda p, meta: n.build_metadata_changed(p["queue"], meta)),
    "pause": (n.TOPIC_CONTROL, lambda p, _: n.build_pause(p["queue"])),
    "resume": (n.TOPIC_CONTROL, lambda p, _: n.build_resume(p["queue"])),
    "request_resign": (n.TOPIC_LEADERSHIP, lambda p, _: n.build_request_resign()),
    "resigned": (n.TOPIC_LEADERSHIP, lambda p, _: n.build_resigned(p["leader_id"])),
}


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    raw = options["fixture_bytes"]
    out: list[dict[str, Any]] = [
        {"id": f"topic/{name}", "topic_name": name, "topic": topic}
        for name, topic in sorted(fixture["topics"].items())
    ]
    for index, item in enumerate(fixture["notifications"]):
        payload = compact(raw_value(raw, "notifications", index, "payload"))
        metadata = compact(raw_value(payload, "metadata")) if "metadata" in item["payload"] else b""
        out.append({**item, "id": item["name"], "raw_payload": payload, "raw_metadata": metadata})
    return out


def _parsed_back(topic: str, payload: str, item: dict[str, Any]) -> str | None:
    values = item["payload"]
    if topic == n.TOPIC_INSERT:
        insert = n.parse_insert(payload)
        if insert is None or insert.queue != values["queue"]:
            return f"parse_insert gave {insert!r}"
        return None
    if topic == n.TOPIC_CONTROL:
        control = n.parse_control(payload)
        if control is None or control.action != values["action"] or control.queue != values["queue"]:
            return f"parse_control gave {control!r}"
        if control.job_id != values.get("job_id", 0):
            return f"parse_control job_id {control.job_id!r}"
        return None
    leadership = n.parse_leadership(payload)
    want = (values["action"], values["leader_id"])
    if leadership is None or (leadership.action, leadership.leader_id) != want:
        return f"parse_leadership gave {leadership!r}"
    return None


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    if "topic_name" in case:
        ours = _TOPICS.get(case["topic_name"])
        if ours != case["topic"]:
            return f"topic {case['topic_name']}: got {ours!r}, want {case['topic']!r}"
        return None
    entry = _BUILDERS.get(case["name"])
    if entry is None:
        return f"no builder for notification {case['name']!r}"
    topic, build = entry
    problems = []
    if topic != case["topic"]:
        problems.append(f"topic: got {topic!r}, want {case['topic']!r}")
    built = build(case["payload"], case["raw_metadata"])
    if built.encode() != case["raw_payload"]:
        problems.append(f"payload: got {built!r}, want {case['raw_payload'].decode()!r}")
    back = _parsed_back(topic, built, case)
    if back is not None:
        problems.append(back)
    return "; ".join(problems) or None
