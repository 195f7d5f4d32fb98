"""River's protocol_values.json ``job_states``: every state, in River's order, and its unique bit."""

from __future__ import annotations

from typing import Any

from river_protocol.states import JobState
from river_protocol.unique import STATE_BITS, states_to_bitmask

NAME = "upstream_job_states"
FILENAME = "protocol_values.json"
SOURCE = "upstream"


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [{**row, "id": row["state"]} for row in fixture["job_states"]]
    order = [row["state"] for row in fixture["job_states"]]
    return [*rows, {"id": "<all states, in order>", "states": order}]


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    if "states" in case:
        ours = [state.value for state in JobState]
        return None if ours == case["states"] else f"states: got {ours}, want {case['states']}"
    try:
        state = JobState(case["state"])
    except ValueError:
        return f"unknown state {case['state']!r}"
    problems = []
    if STATE_BITS[state] != case["unique_bit"]:
        problems.append(f"unique bit: got {STATE_BITS[state]}, want {case['unique_bit']}")
    if states_to_bitmask([state]) != case["unique_bit"]:
        problems.append(f"states_to_bitmask: got {states_to_bitmask([state])}, want {case['unique_bit']}")
    return "; ".join(problems) or None
