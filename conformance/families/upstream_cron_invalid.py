"""River's maintenance_values.json ``cron_invalid``: expressions River's cron parser rejects."""

from __future__ import annotations

from typing import Any

from river_protocol.cron import parse_cron
from river_protocol.errors import CronParseError

NAME = "upstream_cron_invalid"
FILENAME = "maintenance_values.json"
SOURCE = "upstream"


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": repr(expression), "expression": expression} for expression in fixture["cron_invalid"]]


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    try:
        schedule = parse_cron(case["expression"])
    except CronParseError:
        return None
    return f"accepted as {schedule!r}"
