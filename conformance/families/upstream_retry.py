"""River's protocol_values.json ``retry_cases``: exact delays of the seeded default policy.

The seed does not drive Go's ``math/rand``: River's default policy draws from
Go's unseedable global source, so the goldens come from the seedable jitter
River's ports share (a SHA-256 of seed, job id, error count and ``now``;
``river_protocol.retry.seeded_delay_ns``). Each case also checks the part that
holds whatever the draw: the delay lies in our unseeded policy's window.
"""

from __future__ import annotations

from typing import Any

from conformance.families.retry import parse_gotime
from river_protocol.job import AttemptError, JobRow
from river_protocol.retry import MAX_DURATION_NS, DefaultRetryPolicy, seeded_delay_ns
from river_protocol.states import JobState

NAME = "upstream_retry"
FILENAME = "protocol_values.json"
SOURCE = "upstream"

_LAST_DRAW = 1.0 - 2.0**-53  # the largest float below 1


def cases(fixture: dict[str, Any], options: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {**case, "id": f"error_count={case['error_count']} seed={case['seed']}"}
        for case in fixture["retry_cases"]
    ]


def _job(case: dict[str, Any]) -> JobRow:
    now = parse_gotime(case["now"]).to_datetime()
    # error_count counts the failure being retried, so the row holds one error fewer.
    previous = AttemptError(at=now, attempt=1, error="previous failure")
    errors = (previous,) * (case["error_count"] - 1)
    return JobRow(id=case["job_id"], kind="fixture_retry", encoded_args=b"{}", state=JobState.RUNNING,
                  attempt=case["error_count"], errors=errors)


def check(case: dict[str, Any], fixture: dict[str, Any], options: dict[str, Any]) -> str | None:
    problems = []
    now = parse_gotime(case["now"])
    job = _job(case)
    want = case["expected_delay_ns"]
    exact = seeded_delay_ns(case["seed"], job.id, len(job.errors), now)
    if exact != want:
        problems.append(f"seeded delay: got {exact} ns, want {want} ns")
    through_policy = DefaultRetryPolicy(seed=case["seed"]).delay_ns(job, 0.0, now)
    if through_policy != want:
        problems.append(f"DefaultRetryPolicy(seed=...): got {through_policy} ns, want {want} ns")
    unseeded = DefaultRetryPolicy()
    low, high = unseeded.delay_ns(job, 0.0), unseeded.delay_ns(job, _LAST_DRAW)
    if not (low <= want <= high or want == high == MAX_DURATION_NS):
        problems.append(f"outside the unseeded window [{low}, {high}] ns")
    return "; ".join(problems) or None
