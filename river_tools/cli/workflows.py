"""``river workflows ...``: list workflows, show one task by task, cancel one, retry its failed
part, and say which client sweeps them (``river workflows sweeper``).

The same statements as ``client.workflows`` (``river_protocol.workflow``). A cancel reaches
running tasks as ``river jobs cancel`` does: on Postgres their clients are notified; on SQLite
the attempt runs on and, if it fails, is cancelled instead of retried. Tasks a retry puts back
in ``pending`` are promoted by a running client (the workflow sweeper sweeps every second).
"""

from __future__ import annotations

import argparse
from typing import Any

from river_protocol.errors import JobNotFoundError
from river_protocol.intents import ListWorkflowTasks
from river_protocol.job import JobRow
from river_protocol.sweeper_status import sweeper_status, sweeper_status_intents
from river_protocol.workflow import (
    WorkflowSummary,
    WorkflowView,
    cancel_workflow_intent,
    list_workflows_intent,
    retry_workflow_intent,
    task_info,
    validate_workflow_id,
    workflow_view,
)
from river_tools.cli.jobs import now_utc, open_executor
from river_tools.cli.main import EXIT_FAILURE, EXIT_OK, CommandFailed, add_database_flags
from river_tools.cli.output import job_to_json, print_json, print_table, rfc3339


def register(sub: Any) -> None:
    workflows = sub.add_parser("workflows", help="List, show, cancel and retry workflows",
                               description="Inspect workflows (jobs inserted with insert_workflow) and "
                               "cancel or retry them.")
    wsub = workflows.add_subparsers(dest="workflows_command", metavar="COMMAND", required=True)

    p = wsub.add_parser("list", help="List workflows, newest first, with task counts by state",
                        description="List workflows, newest first, with their tasks counted by state.")
    add_database_flags(p)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.add_argument("--limit", type=int, default=100, help="at most this many workflows (default 100)")
    p.set_defaults(func=cmd_list)

    p = wsub.add_parser("sweeper", help="Show which client sweeps workflows (the sweeper's lease)",
                        description="Show the workflow sweeper's lease: which client holds it, when it "
                        "took it and when it lapses unless renewed (the database's clock), and River's "
                        "leader. Exit 1 when the python migration line is not applied.")
    add_database_flags(p)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(func=cmd_sweeper)

    for action, summary, handler in (
        ("get", "Show a workflow with each task's state", cmd_get),
        ("cancel", "Cancel a workflow's unfinished tasks (running ones get a remote cancel)", cmd_cancel),
        ("retry", "Retry a workflow's failed tasks and the dependents they cancelled", cmd_retry),
    ):
        p = wsub.add_parser(action, help=summary, description=f"{summary}.")
        add_database_flags(p)
        p.add_argument("--json", action="store_true", help="machine-readable JSON output")
        p.add_argument("id", metavar="WORKFLOW_ID", help="the workflow id (see `river workflows list`)")
        p.set_defaults(func=handler)


def _summary_json(s: WorkflowSummary) -> dict[str, Any]:
    return {"id": s.id, "name": s.name, "state": s.state, "created_at": rfc3339(s.created_at),
            "tasks": s.total, "counts": {state.value: n for state, n in sorted(
                s.counts.items(), key=lambda kv: kv[0].value)}}


def _counts_text(s: WorkflowSummary) -> str:
    ordered = sorted(s.counts.items(), key=lambda kv: kv[0].value)
    return ", ".join(f"{n} {state.value}" for state, n in ordered)


def cmd_list(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        rows: list[WorkflowSummary] = ex.run(list_workflows_intent(args.limit))
    if args.json:
        print_json([_summary_json(s) for s in rows])
        return EXIT_OK
    if not rows:
        print("no workflows")
        return EXIT_OK
    print_table(["id", "name", "state", "tasks", "by state", "created"],
                [[s.id, s.name, s.state, s.total, _counts_text(s), s.created_at] for s in rows])
    return EXIT_OK


def cmd_sweeper(args: argparse.Namespace) -> int:
    with open_executor(args) as ex:
        lease, leader = [ex.run(intent) for intent in sweeper_status_intents()]
    status = sweeper_status(lease, leader)
    if args.json:
        print_json({"line_applied": status.line_applied, "held": status.held, "holder": status.holder,
                    "held_since": rfc3339(status.held_since), "expires_at": rfc3339(status.expires_at),
                    "read_at": rfc3339(status.read_at), "river_leader": status.river_leader})
    else:
        print(status.describe())
    # Nothing to show without the line is a setup to fix, not a state to read: say so by the code.
    return EXIT_OK if status.line_applied else EXIT_FAILURE


def _view(args: argparse.Namespace) -> WorkflowView:
    workflow_id = validate_workflow_id(args.id)
    with open_executor(args) as ex:
        rows: list[JobRow] = ex.run(ListWorkflowTasks(workflow_id))
    try:
        return workflow_view(workflow_id, rows)
    except JobNotFoundError:
        raise CommandFailed(f"workflow {workflow_id} not found; see `river workflows list`") from None


def _print_view(args: argparse.Namespace, view: WorkflowView) -> None:
    summary = view.summary
    if args.json:
        print_json({**_summary_json(summary),
                    "task_rows": {name: job_to_json(job) for name, job in view.tasks.items()}})
        return
    print(f"workflow {view.id} ({view.name or 'unnamed'}): {summary.state}, {_counts_text(summary)}")
    print_table(["task", "job id", "kind", "state", "attempt", "deps", "finalized"],
                [[name, j.id, j.kind, j.state.value, j.attempt, ", ".join(_deps(j)), j.finalized_at]
                 for name, j in view.tasks.items()])


def _deps(job: JobRow) -> tuple[str, ...]:
    """The task's deps as the promoter reads them (``task_info``: malformed metadata has none)."""
    info = task_info(job.metadata)
    return info.deps if info is not None else ()


def cmd_get(args: argparse.Namespace) -> int:
    _print_view(args, _view(args))
    return EXIT_OK


def _change(args: argparse.Namespace, intent: Any, verb: str) -> int:
    with open_executor(args) as ex, ex.transaction():
        changed: list[JobRow] = ex.run(intent)
    if args.json:
        print_json({"id": args.id, "action": args.workflows_command,
                    "jobs": [job_to_json(j) for j in changed]})
        return EXIT_OK
    if not changed:
        print(f"workflow {args.id}: nothing to {args.workflows_command}")
        return EXIT_OK
    print(f"workflow {args.id}: {len(changed)} task{'s' if len(changed) != 1 else ''} {verb}")
    print_table(["job id", "kind", "state"], [[j.id, j.kind, j.state.value] for j in changed])
    return EXIT_OK


def cmd_cancel(args: argparse.Namespace) -> int:
    _view(args)  # a clear error for an unknown id
    return _change(args, cancel_workflow_intent(args.id, now_utc()), "cancelled (running ones asked to stop)")


def cmd_retry(args: argparse.Namespace) -> int:
    _view(args)
    return _change(args, retry_workflow_intent(args.id, now_utc()), "retried")
