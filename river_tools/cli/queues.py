"""``river queues ...``: list queues, pause and resume them, change their flow-control limits.

Pause and resume change ``river_queue`` and announce the change on ``river_control`` in the
same transaction, as River's client does, so running clients react within moments (Postgres
LISTEN/NOTIFY, or the SQLite notification outbox) and never see a notification for a change
that didn't commit.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from river_db.executor import Executor
from river_protocol.errors import MigrationError, QueueNotFoundError, ValidationError
from river_protocol.flow_control import QueueLimits
from river_protocol.flow_intents import GetFlowStatus, QueueFlowStatus, update_limits_intent
from river_protocol.intents import CountJobs, ListQueues, Notify, PauseQueue, QueueRow, ResumeQueue
from river_protocol.machines.notifications import TOPIC_CONTROL, build_pause, build_resume
from river_protocol.states import JobState
from river_tools.cli.jobs import open_executor
from river_tools.cli.main import EXIT_OK, CommandFailed, add_database_flags
from river_tools.cli.output import print_json, print_table, rfc3339
from river_tools.cli.queue_limits import (
    UNSET,
    describe_busiest,
    describe_limits,
    flow_json,
    merge,
    parse_limit,
)

ALL = "*"
PAGE = 100


def register(sub: Any) -> None:
    queues = sub.add_parser("queues", help="List, pause and resume queues",
                            description="Inspect River queues and pause or resume them.")
    qsub = queues.add_subparsers(dest="queues_command", metavar="COMMAND", required=True)

    p = qsub.add_parser("list", help="List queues with their pause state and job counts",
                        description="List the queues registered in river_queue (a queue appears once "
                        "a client has worked it), with available and running job counts.")
    add_database_flags(p)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(func=cmd_list)

    for action, summary in (("pause", "Stop clients from fetching new jobs from a queue"),
                            ("resume", "Let clients fetch jobs from a paused queue again")):
        p = qsub.add_parser(action, help=summary,
                            description=f"{summary}. NAME `*` means every queue (quote it in a shell).")
        add_database_flags(p)
        p.add_argument("--json", action="store_true", help="machine-readable JSON output")
        p.add_argument("name", metavar="NAME", help="queue name, or * for all queues")
        p.set_defaults(func=cmd_pause_resume, action=action)

    p = qsub.add_parser(
        "set-limit", help="Change a queue's flow-control limits on every client",
        description="Change the limits of a queue with flow control (docs/guides/flow-control.md): "
        "every client's next claim obeys them. Unnamed limits keep their values; `none` removes "
        "one. Needs the python migration line (`river migrate-up --line python`).")
    add_database_flags(p)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.add_argument("name", metavar="NAME", help="queue name")
    p.add_argument("--global-limit", type=parse_limit, default=UNSET,
                   help="running at once across every client, or none")
    p.add_argument("--local-limit", type=parse_limit, default=UNSET,
                   help="running at once in each client, or none")
    p.add_argument("--rate", metavar="N/PERIOD", help="starts per window, e.g. 100/60s or 5/250ms, or none")
    p.set_defaults(func=cmd_set_limit)


def all_queues(ex: Executor) -> list[QueueRow]:
    rows: list[QueueRow] = []
    after: str | None = None
    while True:
        page: list[QueueRow] = ex.run(ListQueues(limit=PAGE, after_name=after))
        rows.extend(page)
        if len(page) < PAGE:
            return rows
        after = page[-1].name


def cmd_list(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        queues = all_queues(ex)
        counts: dict[tuple[JobState, str, str], int] = ex.run(CountJobs())
        flow: dict[str, QueueFlowStatus] = {s.queue: s for s in ex.run(GetFlowStatus(top=3))}
    per_queue: dict[str, Counter[JobState]] = {}
    for (state, queue, _kind), n in counts.items():
        per_queue.setdefault(queue, Counter())[state] += n
    if args.json:
        print_json([
            {
                "name": q.name,
                "paused": q.paused_at is not None,
                "paused_at": rfc3339(q.paused_at),
                "created_at": rfc3339(q.created_at),
                "updated_at": rfc3339(q.updated_at),
                "metadata": q.metadata,
                "available": per_queue.get(q.name, Counter())[JobState.AVAILABLE],
                "running": per_queue.get(q.name, Counter())[JobState.RUNNING],
            } | ({"flow_control": flow_json(flow[q.name])} if q.name in flow else {})
            for q in queues
        ])
        return EXIT_OK
    if not queues:
        print("no queues yet (a queue is registered when a client starts working it)")
        return EXIT_OK
    rows = [[q.name, "paused" if q.paused_at else "active", q.paused_at,
             per_queue.get(q.name, Counter())[JobState.AVAILABLE],
             per_queue.get(q.name, Counter())[JobState.RUNNING], q.updated_at] for q in queues]
    headers = ["name", "status", "paused since", "available", "running", "updated"]
    if flow:
        headers += ["limits", "busiest partitions"]
        for q, r in zip(queues, rows, strict=True):
            status = flow.get(q.name)
            r += [describe_limits(status), describe_busiest(status)] if status else ["-", "-"]
    print_table(headers, rows)
    return EXIT_OK


def cmd_set_limit(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        current = {s.queue: s.limits for s in ex.run(GetFlowStatus(top=0))}.get(args.name, QueueLimits())
        try:
            limits = merge(current, global_limit=args.global_limit, local_limit=args.local_limit,
                           rate=args.rate)
            ex.run(update_limits_intent(args.name, limits))
        except (MigrationError, ValidationError, argparse.ArgumentTypeError) as exc:
            raise CommandFailed(str(exc)) from None
    if args.json:
        print_json({"queue": args.name, "global_limit": limits.global_limit,
                    "local_limit": limits.local_limit, "rate_allowed": limits.rate_allowed,
                    "rate_period_ms": limits.rate_period_ms})
    else:
        print(f"queue {args.name}: {describe_limits(limits)}")
    return EXIT_OK


def cmd_pause_resume(args: argparse.Namespace) -> int:
    pause = args.action == "pause"
    intent = PauseQueue(args.name) if pause else ResumeQueue(args.name)
    payload = build_pause(args.name) if pause else build_resume(args.name)
    with open_executor(args) as ex:
        try:
            with ex.transaction():
                changed: int = ex.run(intent)
                ex.run(Notify(TOPIC_CONTROL, (payload,)))
        except QueueNotFoundError:
            raise CommandFailed(f"queue {args.name!r} not found; see `river queues list` for known queues "
                                f"(or use '*' for all)") from None
    verb = "paused" if pause else "resumed"
    if args.json:
        print_json({"action": args.action, "queue": args.name, "queues_affected": changed})
    elif args.name == ALL:
        print(f"{verb} all queues ({changed} queue{'s' if changed != 1 else ''})")
    else:
        print(f"{verb} queue {args.name}")
    return EXIT_OK
