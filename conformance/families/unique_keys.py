"""unique_keys.json: unique-key strings and hashes, and the client's insert-param resolution."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from river_protocol.args import arg_field
from river_protocol.errors import UniqueKeyError, ValidationError
from river_protocol.golang.gotime import GoTime, format_rfc3339nano, parse_time
from river_protocol.options import InsertOpts, resolve_insert_params
from river_protocol.unique import UniqueOpts, build_unique_key_string, unique_fields_of

NAME = "unique_keys"
FILENAME = "unique_keys.json"


@dataclasses.dataclass
class FxClientArgs:
    """Mirror of the fixture's ``fxClientArgs`` (``name`` is the unique field)."""

    kind: ClassVar[str] = "fx_client"
    name: str = arg_field(json="name", unique=True, default="")
    seq: int = arg_field(json="seq", default=0)


@dataclasses.dataclass
class FxClientArgsWithOpts:
    """Mirror of ``fxClientArgsWithOpts`` (no unique marks: all keys count)."""

    kind: ClassVar[str] = "fx_client_with_opts"
    name: str = arg_field(json="name", default="")


_CLIENT_ARGS = {"fxClientArgs": FxClientArgs, "fxClientArgsWithOpts": FxClientArgsWithOpts}


def _zone(location: str, offset_seconds: int) -> tzinfo:
    if location == "UTC":
        return UTC
    try:
        return ZoneInfo(location)
    except (ZoneInfoNotFoundError, ValueError):
        # Go fixed zones (time.FixedZone) carry a made-up name and one offset.
        return timezone(timedelta(seconds=offset_seconds))


def _instant_ns(text: str) -> int:
    """Unix nanoseconds of an RFC 3339 UTC instant, any year (``unix_nanos`` overflows
    int64 outside 1678..2262, so the fixture's extreme cases need this)."""
    whole, _, frac = text.rstrip("Z").partition(".")
    wall = datetime.fromisoformat(whole).replace(tzinfo=UTC)
    delta = wall - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + int(frac.ljust(9, "0") or 0)


def _clock(value: dict[str, Any]) -> GoTime:
    zone = _zone(value["location"], int(value["utc_offset_seconds"]))
    return GoTime(_instant_ns(value["instant_utc"]), zone)


def _unique_opts(raw: dict[str, Any] | None) -> UniqueOpts | None:
    if raw is None:
        return None
    ns = int(raw["by_period_ns"])
    if ns % 1000:
        raise AssertionError(f"period {ns} ns is not a whole number of microseconds")
    by_state = raw["by_state"]
    return UniqueOpts(
        by_args=bool(raw["by_args"]),
        by_period=timedelta(microseconds=ns // 1000) if ns else None,
        by_queue=bool(raw["by_queue"]),
        # Raw names on purpose: UniqueOpts rejects unknown ones with River's message.
        by_state=None if by_state is None else tuple(by_state),
        exclude_kind=bool(raw["exclude_kind"]),
    )


def _insert_opts(raw: dict[str, Any] | None) -> InsertOpts | None:
    if raw is None:
        return None
    scheduled = raw.get("scheduled_at")
    return InsertOpts(
        queue=raw.get("queue") or "",
        pending=bool(raw.get("pending", False)),
        scheduled_at=parse_time(scheduled) if scheduled else None,
        unique_opts=_unique_opts(raw.get("unique_opts")),
    )


def _encoded_args(case: dict[str, Any]) -> bytes:
    if case.get("encoded_args_hex") is not None:
        return bytes.fromhex(case["encoded_args_hex"])
    return str(case["encoded_args"]).encode()


def _check_client_insert(case: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    args_type = _CLIENT_ARGS[case["args_type"]]
    now = _clock(case["time_now"])
    try:
        params = resolve_insert_params(
            case["kind"],
            _encoded_args(case),
            insert_opts=_insert_opts(case.get("insert_opts")),
            args_opts=_insert_opts(case.get("args_insert_opts")),
            unique_fields=unique_fields_of(args_type),
            now=now,
        )
    except (ValidationError, UniqueKeyError) as exc:
        if not case.get("error"):
            return [f"unexpected error {exc}"]
        if str(exc) != case["error"]:
            problems.append(f"error text: got {str(exc)!r}, want {case['error']!r}")
        return problems
    if case.get("error"):
        return [f"expected error {case['error']!r}, got none"]

    def expect(what: str, got: Any, want: Any) -> None:
        if got != want:
            problems.append(f"{what}: got {got!r}, want {want!r}")

    expect("queue", params.queue, case["queue"])
    expect("state", params.state.value, case["state"])
    scheduled = format_rfc3339nano(params.scheduled_at) if params.scheduled_at else None
    want_scheduled = case["params_scheduled_at"]
    if want_scheduled is not None:
        want_scheduled = format_rfc3339nano(parse_time(want_scheduled))
    expect("params_scheduled_at", scheduled, want_scheduled)
    expect("unique_key_sha256_hex", params.unique_key.hex() if params.unique_key else None,
           case["unique_key_sha256_hex"])
    expect("unique_states", params.unique_states or 0, case["unique_states"])
    return problems


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    if case["group"] == "client_insert":
        return "; ".join(_check_client_insert(case)) or None

    problems: list[str] = []

    def expect(what: str, got: Any, want: Any) -> None:
        if got != want:
            problems.append(f"{what}: got {got!r}, want {want!r}")

    opts = _unique_opts(case["opts"])
    assert opts is not None
    expect("unique_states", opts.state_bitmask(), case["unique_states"])
    clock = case["scheduled_at"] if case.get("time_used") == "scheduled_at" else case["time_now"]
    try:
        key_string = build_unique_key_string(
            case["kind"], _encoded_args(case), case["unique_fields"], opts, _clock(clock), case["queue"]
        )
    except UniqueKeyError as exc:
        if case.get("error") is None:
            problems.append(f"unexpected error {exc}")
        else:
            expect("error", str(exc), case["error"])
        return "; ".join(problems) or None
    if case.get("error") is not None:
        problems.append(f"expected error {case['error']!r}, got key string {key_string!r}")
        return "; ".join(problems)
    if case.get("key_string_hex") is not None:
        want = bytes.fromhex(case["key_string_hex"])
    else:
        want = str(case["key_string"]).encode()
    expect("key_string", key_string, want)
    expect("key_sha256_hex", hashlib.sha256(key_string).hexdigest(), case["key_sha256_hex"])
    return "; ".join(problems) or None

