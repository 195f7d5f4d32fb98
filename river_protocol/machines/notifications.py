"""Payloads of River's three notification topics (docs/protocol.md §12.1).

Builders write what Go writes (key order and omitted empty fields included);
parsers are lenient the way Go's ``json.Unmarshal`` is: unknown fields and
unknown actions are ignored, and a payload that isn't usable gives ``None``
instead of an error, because a bad notification must never stop a listener.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from river_protocol.constants import ALL_QUEUES
from river_protocol.errors import ValidationError

TOPIC_INSERT = "river_insert"
TOPIC_CONTROL = "river_control"
TOPIC_LEADERSHIP = "river_leadership"
TOPICS = (TOPIC_INSERT, TOPIC_CONTROL, TOPIC_LEADERSHIP)
# Ours, not River's (a ``river_py_`` name): workflows whose tasks just ended, announced on
# Postgres by the client that recorded the ends, so waits in other processes wake at once.
TOPIC_FINISHED = "river_py_finished"
# Postgres refuses a NOTIFY payload of 8,000 bytes or more.
PAYLOAD_LIMIT_BYTES = 7_900

ACTION_CANCEL = "cancel"
ACTION_PAUSE = "pause"
ACTION_RESUME = "resume"
ACTION_METADATA_CHANGED = "metadata_changed"
CONTROL_ACTIONS = frozenset({ACTION_CANCEL, ACTION_PAUSE, ACTION_RESUME, ACTION_METADATA_CHANGED})

ACTION_RESIGNED = "resigned"
ACTION_REQUEST_RESIGN = "request_resign"
LEADERSHIP_ACTIONS = frozenset({ACTION_RESIGNED, ACTION_REQUEST_RESIGN})

_CHANNEL_LIMIT_BYTES = 63


_GO_ESCAPES = (
    ("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"),
)


def _dump(value: Any) -> str:
    # Go's json.Marshal: compact separators, non-ASCII kept, HTML characters escaped.
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_ESCAPES:
        text = text.replace(char, escaped)
    return text


# ---------------------------------------------------------------- payload values


@dataclass(frozen=True, slots=True)
class InsertPayload:
    queue: str


@dataclass(frozen=True, slots=True)
class ControlPayload:
    action: str
    queue: str
    job_id: int = 0
    metadata: bytes | None = None  # raw JSON object, only for metadata_changed

    def applies_to(self, queue: str) -> bool:
        """Whether a producer of ``queue`` must act (cancel never matches ``*``, §12.3)."""
        if self.action == ACTION_CANCEL:
            return self.queue == queue
        return self.queue in (queue, ALL_QUEUES)


@dataclass(frozen=True, slots=True)
class LeadershipPayload:
    action: str
    leader_id: str


# ---------------------------------------------------------------- builders


def build_insert(queue: str) -> str:
    return _dump({"queue": queue})


def build_cancel(job_id: int, queue: str) -> str:
    return _dump({"action": ACTION_CANCEL, "job_id": int(job_id), "queue": queue})


def build_pause(queue: str) -> str:
    return _dump({"action": ACTION_PAUSE, "queue": queue})


def build_resume(queue: str) -> str:
    return _dump({"action": ACTION_RESUME, "queue": queue})


def build_metadata_changed(queue: str, metadata: bytes | str) -> str:
    raw = metadata.decode() if isinstance(metadata, bytes) else metadata
    try:
        value = json.loads(raw)
    except ValueError:
        raise ValidationError(f"queue metadata is not valid JSON: {raw[:80]!r}") from None
    if not isinstance(value, dict):
        raise ValidationError(f"queue metadata must be a JSON object, got {type(value).__name__}")
    # Go omits an empty RawMessage only when it has no bytes; "{}" is kept.
    return '{"action":"metadata_changed","metadata":' + _dump(value) + ',"queue":' + _dump(queue) + "}"


def build_control(payload: ControlPayload) -> str:
    out: dict[str, Any] = {"action": payload.action}
    if payload.job_id:
        out["job_id"] = payload.job_id
    if payload.metadata:
        return build_metadata_changed(payload.queue, payload.metadata)
    out["queue"] = payload.queue
    return _dump(out)


def build_resigned(leader_id: str) -> str:
    return _dump({"action": ACTION_RESIGNED, "leader_id": leader_id})


def build_request_resign() -> str:
    return _dump({"action": ACTION_REQUEST_RESIGN, "leader_id": ""})


# ---------------------------------------------------------------- parsers


def _object(payload: str | bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _string(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key, "")
    return value if isinstance(value, str) else None


def parse_insert(payload: str | bytes) -> InsertPayload | None:
    obj = _object(payload)
    if obj is None:
        return None
    queue = _string(obj, "queue")
    return None if queue is None else InsertPayload(queue)


def parse_control(payload: str | bytes) -> ControlPayload | None:
    """A control message, or None when malformed or of an action this version doesn't know."""
    obj = _object(payload)
    if obj is None:
        return None
    action, queue = _string(obj, "action"), _string(obj, "queue")
    if action not in CONTROL_ACTIONS or queue is None:
        return None
    job_id = obj.get("job_id", 0)
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        if not (isinstance(job_id, float) and job_id.is_integer()):
            return None
        job_id = int(job_id)
    metadata = obj.get("metadata")
    raw_metadata = None if metadata is None else _dump(metadata).encode()
    return ControlPayload(action=action, queue=queue, job_id=job_id, metadata=raw_metadata)


def parse_leadership(payload: str | bytes) -> LeadershipPayload | None:
    obj = _object(payload)
    if obj is None:
        return None
    action, leader_id = _string(obj, "action"), _string(obj, "leader_id")
    if action not in LEADERSHIP_ACTIONS or leader_id is None:
        return None
    return LeadershipPayload(action=action, leader_id=leader_id)


# ---------------------------------------------------------------- Postgres channel names


def channel_name(schema: str, topic: str) -> str:
    """``<schema>.<topic>``; LISTEN needs it double-quoted because of the dot."""
    if not schema:
        raise ValidationError("channel name needs a schema (use current_schema() when none is configured)")
    name = f"{schema}.{topic}"
    if len(name.encode()) > _CHANNEL_LIMIT_BYTES:
        raise ValidationError(f"channel name {name!r} is longer than {_CHANNEL_LIMIT_BYTES} bytes")
    return name


def quoted_channel(schema: str, topic: str) -> str:
    return '"' + channel_name(schema, topic).replace('"', '""') + '"'


def topic_of_channel(channel: str, schema: str | None = None) -> str:
    """The bare topic of an incoming channel: strips ``<schema>.`` (the given one, or any)."""
    if schema is not None:
        prefix = schema + "."
        return channel[len(prefix):] if channel.startswith(prefix) else channel
    return channel.rsplit(".", 1)[-1]


# ---------------------------------------------------------------- river_py_finished (ours)


def build_finished(workflow_ids: tuple[str, ...]) -> tuple[str, ...]:
    """Payloads naming ``workflow_ids``: JSON lists, as many as keep each under Postgres's limit."""
    payloads: list[str] = []
    chunk: list[str] = []
    for wid in dict.fromkeys(workflow_ids):
        if chunk and len(_dump([*chunk, wid]).encode()) > PAYLOAD_LIMIT_BYTES:
            payloads.append(_dump(chunk))
            chunk = []
        chunk.append(wid)
    if chunk:
        payloads.append(_dump(chunk))
    return tuple(payloads)


def parse_finished(payload: str) -> tuple[str, ...]:
    """The workflow ids of a ``river_py_finished`` payload; nothing for an unusable one."""
    try:
        value = json.loads(payload)
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))
