"""Per-operation cost of the hot pure paths of river_protocol."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from river_protocol.args import arg_field
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.rows import job_row_from_pg
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.golang import encoding_json
from river_protocol.intents import ClaimJobs, SetStateIfRunning, SetStateUpdate
from river_protocol.job import JobRow
from river_protocol.machines.base import Tick
from river_protocol.machines.completer import Completer, CompletionReason, Submit, Submits
from river_protocol.outcomes import Completed, outcome_to_update
from river_protocol.states import JobState

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@dataclass
class SendEmail:
    kind: ClassVar[str] = "send_email"
    customer_id: int = arg_field(json="customer_id", unique=True)
    to: str = arg_field(json="to")
    subject: str = arg_field(json="subject")
    amount: float = arg_field(json="amount")
    tags: list[str] = arg_field(json="tags", default_factory=list)
    note: str = arg_field(json="note", omitempty=True, default="")


def per_op(fn: Callable[[], object], *, min_seconds: float = 0.3) -> float:
    """Seconds per call, from enough calls to run at least ``min_seconds``."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / n
        n *= 4 if elapsed < min_seconds / 8 else 2


def _unique_key() -> Callable[[], object] | None:
    try:
        from river_protocol.unique import UniqueOpts, unique_key
    except ImportError:
        return None
    encoded = encoding_json.encode_args(SendEmail(42, "a@example.com", "Hi", 19.99, ["x"]))
    opts = UniqueOpts(by_args=True, by_period=timedelta(hours=1))
    return lambda: unique_key("send_email", encoded, ["customer_id"], opts, NOW, "default")


def run() -> list[tuple[str, float]]:
    args = SendEmail(42, "a@example.com", "Welcome <3 & more", 19.99, ["vip", "eu"])
    results: list[tuple[str, float]] = []
    results.append(("encode args (6-field dataclass)", per_op(lambda: encoding_json.encode_args(args))))
    uk = _unique_key()
    if uk is not None:
        results.append(("unique key (by args + period)", per_op(uk)))
    claim = ClaimJobs(queue="default", limit=100, client_id="bench", now=NOW)
    updates = tuple(
        SetStateUpdate(id=i, state=JobState.COMPLETED, finalized_at=NOW) for i in range(100)
    )
    complete = SetStateIfRunning(updates=updates)
    for dialect in (PostgresDialect(), SQLiteDialect()):
        results.append((f"render claim ({dialect.name})", per_op(lambda d=dialect: next(d.plan(claim)))))
        results.append((
            f"render complete x100 ({dialect.name}, first statement), per job",
            per_op(lambda d=dialect: next(d.plan(complete))) / 100,
        ))

    def completer_round() -> None:
        completer = Completer(random.Random(1))
        for update in updates:
            completer.handle(Submit(update, CompletionReason.COMPLETED), NOW)
        completer.handle(Tick(), NOW)

    results.append(("completer: submit event, per job", per_op(completer_round) / 101))

    def completer_batch_round() -> None:
        completer = Completer(random.Random(1))
        completer.handle(Submits(tuple(Submit(u, CompletionReason.COMPLETED) for u in updates)), NOW)
        completer.handle(Tick(), NOW)

    # What the drivers hand over: a run of queued submits as one event (take_event).
    results.append(("completer: 100 submits as one event, per job", per_op(completer_batch_round) / 100))
    job = JobRow(id=1, kind="send_email", encoded_args=encoding_json.encode_args(args),
                 state=JobState.RUNNING, attempt=1, attempted_at=NOW, created_at=NOW, scheduled_at=NOW)
    results.append(("plain completion (outcome_to_update)",
                    per_op(lambda: outcome_to_update(job, Completed(), now=NOW, started_at=NOW))))
    results.append(("decode args (6-field dataclass)",
                    per_op(lambda: encoding_json.decode_args(SendEmail, job.encoded_args))))
    row = (1, "send_email", job.encoded_args.decode(), "running", "default", 1, 1, 25, NOW, ["client"],
           NOW, None, NOW, None, "{}", [], None, None)
    results.append(("read a claimed Postgres row (job_row_from_pg)", per_op(lambda: job_row_from_pg(row))))
    return results


def main() -> None:
    print("pure paths (river_protocol), per operation:")
    for name, seconds in run():
        print(f"  {name:<45} {seconds * 1e6:10.2f} µs")
