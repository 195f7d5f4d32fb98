"""River's maintenance_values.json ``snooze_counters``: the ``snoozes`` count a snooze writes.

Runs the real outcome path: the metadata is decoded the way the drivers decode
a row, and the count is read back from the completer's metadata update.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from conformance.raw_json import raw_value
from river_protocol.job import JobRow
from river_protocol.metadata_keys import SNOOZES
from river_protocol.outcomes import Snooze, outcome_to_update
from river_protocol.states import JobState

NAME = "upstream_snooze"
FILENAME = "maintenance_values.json"
SOURCE = "upstream"

_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for index, case in enumerate(fixture["snooze_counters"]):
        # Decoded from its own text: 1e3 and 2**53+1 must reach the reader as written.
        metadata = json.loads(raw_value(options["fixture_bytes"], "snooze_counters", index, "metadata"))
        out.append({**case, "id": case["name"], "metadata": metadata})
    return out


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    job = JobRow(id=1, kind="snoozer", encoded_args=b"{}", state=JobState.RUNNING, attempt=1,
                 metadata=case["metadata"])
    update = outcome_to_update(job, Snooze(timedelta(seconds=30)), now=_NOW, started_at=_NOW)
    got = json.loads(update.metadata_updates)[SNOOZES]
    want = case["expected_snoozes"]
    return None if got == want else f"snoozes: got {got!r}, want {want}"
