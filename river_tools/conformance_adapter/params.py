"""The requests' parameters, decoded strictly into dataclasses.

Each dataclass mirrors one params type of River's conformance protocol, its
field names being the JSON member names. Decoding follows Go's
``encoding/json`` with unknown fields disallowed, as River's own adapter
decodes: a member no field names, or a value of the wrong JSON type, is
``InvalidParams`` (-32602); ``null`` and a missing member both leave the
field's default, River's "zero value takes the default".

Numbers arrive as ``int`` (integer literals) or ``Decimal`` (the rest, kept
exact): an integer field refuses a ``Decimal`` as Go refuses ``1.5`` or
``1e2`` for an ``int``. JSON values kept whole (metadata) stay decoded with
exact numbers and are encoded again by ``jsonrpc.dumps``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar, Union

from river_protocol.golang.gotime import parse_time
from river_tools.conformance_adapter.jsonrpc import InvalidParams

T = TypeVar("T")


class JSONValue:
    """Marks a field that holds any JSON value (River's ``json.RawMessage``)."""


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode(cls: type[T], value: Any, path: str = "params") -> T:
    """``value`` (decoded JSON) as a ``cls`` instance; ``InvalidParams`` names what is wrong."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise InvalidParams(f"{path}: expected an object, got {_json_type(value)}")
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, member in value.items():
        if key not in names:
            raise InvalidParams(f"{path}: unknown field {key!r}")
        if member is None:
            continue
        kwargs[key] = _convert(member, hints[key], f"{path}.{key}")
    return cls(**kwargs)


def _optional_inner(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return hint


def _convert(value: Any, hint: Any, path: str) -> Any:
    hint = _optional_inner(hint)
    if hint is JSONValue:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise _mismatch(value, "a boolean", path)
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _mismatch(value, "an integer", path)
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidParams(f"{path}: {value} overflows a 64-bit integer")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise _mismatch(value, "a string", path)
        return value
    if hint is datetime:
        if not isinstance(value, str):
            raise _mismatch(value, "an RFC 3339 time string", path)
        try:
            return parse_time(value)
        except ValueError as exc:
            raise InvalidParams(f"{path}: {value!r} is not an RFC 3339 time: {exc}") from None
    origin = typing.get_origin(hint)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise _mismatch(value, "an array", path)
        (item,) = typing.get_args(hint)[:1]
        return tuple(_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return decode(hint, value, path)
    raise TypeError(f"no decoder for {hint!r} at {path}")  # a bug in the dataclasses below


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | Decimal):
        return f"the number {value}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _mismatch(value: Any, expected: str, path: str) -> InvalidParams:
    return InvalidParams(f"{path}: expected {expected}, got {_json_type(value)}")


# ---------------------------------------------------------------- the protocol's params


@dataclass(frozen=True)
class Empty:
    """Params of ``handshake`` and ``stats``: none."""


@dataclass(frozen=True)
class UniqueParams:
    by_args: bool = False
    by_period_ms: int = 0
    by_queue: bool = False
    by_state: tuple[str, ...] = ()
    exclude_kind: bool = False


@dataclass(frozen=True)
class InsertOptsParams:
    max_attempts: int = 0
    metadata: JSONValue | None = None
    pending: bool = False
    priority: int = 0
    queue: str = ""
    scheduled_at: datetime | None = None
    tags: tuple[str, ...] | None = None
    unique: UniqueParams | None = None


@dataclass(frozen=True)
class InsertJobParams:
    """One job: the echo args' members beside its options."""

    behavior: str = ""
    duration_ms: int = 0
    message: str = ""
    opts: InsertOptsParams | None = None


@dataclass(frozen=True)
class InsertParams:
    jobs: tuple[InsertJobParams, ...] = ()
    schema: str = ""
    tx: str = ""


@dataclass(frozen=True)
class JobParams:
    id: int = 0
    schema: str = ""
    tx: str = ""


@dataclass(frozen=True)
class ListParams:
    after: str = ""
    direction: str = ""
    ids: tuple[int, ...] = ()
    kinds: tuple[str, ...] = ()
    limit: int = 0
    metadata: JSONValue | None = None
    order_by: str = ""
    priorities: tuple[int, ...] = ()
    queues: tuple[str, ...] = ()
    schema: str = ""
    states: tuple[str, ...] = ()
    tags_all: tuple[str, ...] = ()
    tx: str = ""


@dataclass(frozen=True)
class MigrateParams:
    direction: str = ""
    schema: str = ""
    target_version: int | None = None


@dataclass(frozen=True)
class QueueParams:
    action: str = ""
    metadata: JSONValue | None = None
    name: str = ""
    schema: str = ""
    tx: str = ""


@dataclass(frozen=True)
class ReleaseParams:
    name: str = ""


@dataclass(frozen=True)
class RequestResignParams:
    schema: str = ""
    tx: str = ""


@dataclass(frozen=True)
class TuningParams:
    elect_interval_ms: int = 0
    rescuer_interval_ms: int = 0
    scheduler_interval_ms: int = 0


@dataclass(frozen=True)
class StartParams:
    claim_barrier: str = ""
    client_id: str = ""
    error_handler_cancel: bool = False
    fetch_only_known_kinds: bool = False
    fetch_poll_interval_ms: int = 0
    job_timeout_ms: int = 0
    leader_election_disabled: bool = False
    max_workers: int = 0
    periodic_run_on_start: bool = False
    periodic_unique: bool = False
    poll_only: bool = False
    queues: tuple[str, ...] = ()
    rescue_after_ms: int = 0
    retry_delay_ms: int = 0
    schema: str = ""
    tuning: TuningParams | None = None
    worker_kinds: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class StopParams:
    cancel: bool = False


@dataclass(frozen=True)
class TxParams:
    tx: str = ""


@dataclass(frozen=True)
class TxEndParams:
    commit: bool = False
    tx: str = ""
