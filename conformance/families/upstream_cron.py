"""River's maintenance_values.json ``cron_cases``: five chained next times per expression.

Each next time is fed back as the next ``from`` (as River's periodic enqueuer
does) and printed in the offset of the reference time, as River's adapter
contract asks of ``cron_next``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from river_protocol.cron import parse_cron
from river_protocol.errors import CronParseError
from river_protocol.golang.gotime import format_rfc3339nano

NAME = "upstream_cron"
FILENAME = "maintenance_values.json"
SOURCE = "upstream"


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**case, "id": case["name"]} for case in fixture["cron_cases"]]


def next_times(expression: str, start: datetime, count: int) -> list[str]:
    """Up to ``count`` successive times after ``start``, in ``start``'s offset; fewer if none match."""
    schedule = parse_cron(expression)
    out: list[str] = []
    current = start
    for _ in range(count):
        following = schedule.next(current)
        if following is None:
            break
        out.append(format_rfc3339nano(following.astimezone(start.tzinfo)))
        current = following
    return out


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    start = datetime.fromisoformat(case["from"])
    try:
        got = next_times(case["expression"], start, len(case["next"]) or 5)
    except CronParseError as exc:
        return f"rejected: {exc}"
    return None if got == case["next"] else f"next: got {got}, want {case['next']}"
