"""River's unique_keys.json: key hashes and state masks under River's newer key rules.

The args of each case are read from the file's text (``raw_json``): Go hashed
the compact form of exactly those bytes. Two cases lost a character on their
way into the file (a U+E000 member name, a trailing U+007F in a string; River's
own Rust tests rebuild both from typed values): for them the hash is checked
against the value River's generator encoded, and the file's text is checked to
differ from it by that character alone.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any, ClassVar

from conformance.families.retry import parse_gotime
from conformance.raw_json import compact, raw_value
from river_protocol.args import arg_field
from river_protocol.errors import UniqueKeyError
from river_protocol.golang.encoding_json import encode_args
from river_protocol.options import InsertOpts, resolve_insert_params
from river_protocol.unique import UniqueKeyRules, UniqueOpts

NAME = "upstream_unique_keys"
FILENAME = "unique_keys.json"
SOURCE = "upstream"


@dataclasses.dataclass
class EscapingArgs:
    """Mirror of the generator's ``escapingArgs`` (field names are its JSON names)."""

    kind: ClassVar[str] = "conformance_all_args"
    angle: str = arg_field(json="a<b>", default="")
    controls: str = arg_field(json="controls", default="")
    html: str = arg_field(json="html", default="")
    keys: dict[str, int] = arg_field(json="keys", default_factory=dict)
    separators: str = arg_field(json="separators", default="")
    unicode: str = arg_field(json="unicode", default="")
    unicode_amp: str = arg_field(json="é&", default="")


def _escaping_args() -> bytes:
    return encode_args(EscapingArgs(
        angle="<angle>",
        controls="\b\f\n\r\t\x00\x01\x1f\x7f",
        html='<a href="x">&amp;</a>',
        keys={"<k>": 1, "a&b": 2, "é": 3, "é<": 4},
        separators="line\u2028paragraph\u2029end",
        unicode="é😀/\\",
        unicode_amp="unicode key",
    ))


# case name -> (the args Go encoded, the character the file lost)
_LOST_CHARACTER = {
    # mapOrderArgs.MarshalJSON returns this literal text.
    "map_order_and_negative_zero": (lambda: '{"2":2,"10":10,"zero":-0,"😀":1,"\ue000":2}'.encode(), "\ue000"),
    "typed_escaping": (_escaping_args, "\x7f"),
}


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for group in ("cases", "typed_only_cases"):
        for index, case in enumerate(fixture[group]):
            args = compact(raw_value(options["fixture_bytes"], group, index, "args"))
            prefix = "" if group == "cases" else "typed_only/"
            out.append({**case, "id": prefix + case["name"], "raw_args": args})
    return out


def _opts(raw: dict[str, Any]) -> UniqueOpts:
    ns = int(raw["by_period_nanos"])
    if ns % 1000:
        raise AssertionError(f"period {ns} ns is not a whole number of microseconds")
    return UniqueOpts(
        by_args=bool(raw["by_args"]),
        by_period=timedelta(microseconds=ns // 1000) if ns else None,
        by_queue=bool(raw["by_queue"]),
        by_state=tuple(raw["by_state"]) if raw.get("by_state") is not None else None,
        exclude_kind=bool(raw["exclude_kind"]),
    )


def key_sha256(case: dict[str, Any], args: bytes, rules: UniqueKeyRules) -> str:
    """The hex key the client's insert path derives for ``case`` with ``args``: the case's clock
    as ``now`` and its ``scheduled_at`` as the job's, so the insert path itself decides where
    a ByPeriod bucket comes from (newer River: scheduled_at when given)."""
    scheduled = case["scheduled_at"]
    params = resolve_insert_params(
        case["kind"], args,
        insert_opts=InsertOpts(queue=case["queue"], unique_opts=_opts(case["options"]),
                               scheduled_at=parse_gotime(scheduled) if scheduled else None),
        args_opts=None, unique_fields=case["selected_unique_paths"] or [],
        now=parse_gotime(case["now"]), unique_key_rules=rules,
    )
    assert params.unique_key is not None
    return params.unique_key.hex()


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    problems: list[str] = []
    mask = _opts(case["options"]).state_bitmask()
    if mask != case["expected_state_mask"]:
        problems.append(f"state mask: got {mask}, want {case['expected_state_mask']}")
    args = case["raw_args"]
    lost = _LOST_CHARACTER.get(case["name"])
    if lost is not None:
        encoded, character = lost[0](), lost[1]
        if encoded.replace(character.encode(), b"") != args:
            problems.append(
                f"file args {args!r} differ from the generator's {encoded!r} by more than {character!r}"
            )
        options["notes"].append(
            f"{case['id']}: the file's args lack {character!r}; hashed the generator's value"
        )
        args = encoded
    try:
        got = key_sha256(case, args, UniqueKeyRules.LATEST)
    except UniqueKeyError as exc:
        problems.append(f"unexpected error {exc}")
    else:
        if got != case["expected_sha256"]:
            problems.append(f"sha256: got {got}, want {case['expected_sha256']}")
    return "; ".join(problems) or None
