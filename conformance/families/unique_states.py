"""unique_states.json: the state bitmask, its inverse, defaults and ByState validation."""

from __future__ import annotations

from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.unique import (
    DEFAULT_UNIQUE_STATES,
    DEFAULT_UNIQUE_STATES_BITMASK,
    REQUIRED_UNIQUE_STATES,
    UniqueOpts,
    bitmask_to_states,
    states_to_bitmask,
    validate_by_state,
)

NAME = "unique_states"
FILENAME = "unique_states.json"


def _opts_bitmask(states: list[str] | None) -> int:
    """``UniqueOpts.StateBitmask`` for a raw list that may hold unknown names (Go ignores them)."""
    if not states:
        return UniqueOpts(by_state=None if states is None else ()).state_bitmask()
    return states_to_bitmask(states)


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    problems: list[str] = []

    def expect(what: str, got: Any, want: Any) -> None:
        if got != want:
            problems.append(f"{what}: got {got!r}, want {want!r}")

    if case["id"] == "odd/nil":
        # The file's constants are checked once, alongside the nil-list case.
        expect("default_states", [s.value for s in DEFAULT_UNIQUE_STATES], fixture["default_states"])
        expect("default_bitmask", DEFAULT_UNIQUE_STATES_BITMASK, fixture["default_bitmask"])
        expect("required_states", [s.value for s in REQUIRED_UNIQUE_STATES], fixture["required_states"])
        for name, bits in fixture["state_bits"].items():
            expect(f"state_bits[{name}]", states_to_bitmask([name]), bits["byte_value"])

    states: list[str] | None = case["states"]
    mask = states_to_bitmask(states or [])
    expect("bitmask", mask, case["bitmask"])
    expect("bitmask_bits", f"{mask:08b}", case["bitmask_bits"])
    expect("bitmask_to_states", [s.value for s in bitmask_to_states(mask)], case["bitmask_to_states"])
    # Every byte value appears as some subset's mask; check the file's full table there.
    if case["id"].startswith("subset/"):
        entry = fixture["bitmask_to_states_all"][mask]
        expect("bitmask_to_states_all", [s.value for s in bitmask_to_states(mask)], entry["states"])
    expect("opts_state_bitmask", _opts_bitmask(states), case["opts_state_bitmask"])
    if "driver_read_back_unique_states" in case:
        expect(
            "driver_read_back_unique_states",
            [s.value for s in bitmask_to_states(int(case["postgres_bit8_text"], 2))],
            case["driver_read_back_unique_states"],
        )
    error: str | None = None
    try:
        validate_by_state(states)
    except ValidationError as exc:
        error = str(exc)
    expect("validate_error_as_by_state", error, case["validate_error_as_by_state"])
    # Building UniqueOpts must refuse exactly the lists with unknown states.
    try:
        UniqueOpts(by_state=tuple(states) if states is not None else None)  # type: ignore[arg-type]
        built_error: str | None = None
    except ValidationError as exc:
        built_error = str(exc)
    if built_error is not None and built_error != error:
        problems.append(f"UniqueOpts construction error {built_error!r} differs from {error!r}")
    return "; ".join(problems) or None
