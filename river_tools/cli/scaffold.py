"""``river new-worker NAME``: scaffold a worker module and its test.

The module holds an args dataclass (its ``kind`` names the job kind River stores) and a worker
function registered on a ``Workers`` registry. The test uses the library's own helpers, through
public imports only: ``river_sync.testing.work_once`` runs one attempt with no database, and the
pytest plugin's ``river_inline_client`` (its ``river_workers`` fixture overridden with the
module's registry) inserts into a migrated SQLite database and works the job at once.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any

from river_protocol.errors import ValidationError
from river_protocol.options import validate_kind, validate_queue_name
from river_tools.cli.main import EXIT_OK, CommandFailed, UsageError

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
# Names a worker module must not take though they may not be importable from here: the
# repository's own top-level directories, and pytest's conftest. Every importable module
# (the standard library, each river_* package, anything installed) is refused as well.
_RESERVED = frozenset({"conformance", "tests", "conftest"})


def register(sub: Any) -> None:
    p = sub.add_parser(
        "new-worker", help="Scaffold a worker module and its test",
        description="Write NAME.py (an args dataclass and a worker function registered on a "
        "Workers registry) and test_NAME.py (pytest tests using river_sync.testing's work_once and "
        "the river plugin's river_inline_client). Existing files are never overwritten.",
    )
    p.add_argument("name", metavar="NAME",
                   help="module name in snake_case, e.g. send_email (also the job kind)")
    p.add_argument("--dir", default=".", metavar="DIR", help="directory to write into (default: current)")
    p.add_argument("--queue", metavar="QUEUE", help="queue the args type inserts into by default")
    p.add_argument("--kind", metavar="KIND", help="job kind (default: NAME)")
    p.set_defaults(func=cmd_new_worker)


def check_name(name: str) -> None:
    """Raise ``UsageError`` unless ``name`` can be a new module next to the user's code."""
    if not _NAME_RE.match(name) or keyword.iskeyword(name):
        raise UsageError(
            f"invalid worker name {name!r}: use a snake_case Python module name like send_email"
        )
    if name.startswith("test"):
        raise UsageError(
            f"invalid worker name {name!r}: names starting with 'test' would be collected as tests"
        )
    if name in sys.stdlib_module_names or name in _RESERVED or importlib.util.find_spec(name) is not None:
        raise UsageError(f"worker name {name!r} would shadow the module of the same name; "
                         f"choose another, e.g. {name}_worker")


def _py_str(text: str) -> str:
    # Double-quoted like the rest of the generated code; kinds and queue names are validated,
    # so JSON string syntax is also valid Python.
    return json.dumps(text, ensure_ascii=False)


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part) + "Args"


def render_module(name: str, kind: str, queue: str | None) -> str:
    cls = class_name(name)
    lines = [
        f'"""The ``{kind}`` job: its args and its worker.',
        "",
        "Give the registry to your client: ``Client(database, workers=workers, queues=...)``, and",
        f"insert jobs with ``client.insert({cls}(message=...))``.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass",
        "from typing import ClassVar",
        "",
        f"from river_sync import {'InsertOpts, ' if queue else ''}WorkContext, Workers, arg_field",
        "",
        "workers = Workers()",
        "",
        "",
        "@dataclass(frozen=True)",
        f"class {cls}:",
        f"    kind: ClassVar[str] = {_py_str(kind)}",
        "",
        "    # The job's fields, stored as JSON. arg_field sets the JSON name, and unique=True makes",
        "    # a field part of the unique key when inserting with unique options.",
        '    message: str = arg_field(json="message")',
    ]
    if queue:
        lines += [
            "",
            "    def insert_opts(self) -> InsertOpts:",
            f"        return InsertOpts(queue={_py_str(queue)})",
        ]
    lines += [
        "",
        "",
        f"@workers.job({cls})",
        f"def work(ctx: WorkContext, args: {cls}) -> None:",
        '    """Return to complete the job; raise to fail this attempt (River retries it later).',
        "",
        "    Long-running work should check ``ctx.cancelled`` (or call ``ctx.raise_if_cancelled()``)",
        "    so a cancelled or timed-out job stops promptly.",
        '    """',
        "    ctx.raise_if_cancelled()",
        '    ctx.record_output({"echo": args.message})',
        "",
    ]
    return "\n".join(lines)


def render_test(name: str, kind: str) -> str:
    cls = class_name(name)
    return "\n".join([
        f'"""Tests for the ``{kind}`` worker, with River\'s test helpers and pytest plugin."""',
        "",
        "from __future__ import annotations",
        "",
        "import pytest",
        f"from {name} import {cls}, workers",
        "",
        "from river_sync import JobState, Workers",
        "from river_sync.testing import InlineClient, require_inserted, work_once",
        "",
        "",
        "@pytest.fixture",
        "def river_workers() -> Workers:",
        '    """The registry the plugin\'s client fixtures (river_inline_client, river_client) use."""',
        "    return workers",
        "",
        "",
        "def test_worker_is_registered_for_its_kind() -> None:",
        f"    assert {cls}.kind == {_py_str(kind)}",
        f"    assert {_py_str(kind)} in workers",
        "",
        "",
        "def test_one_attempt_completes_and_records_its_output() -> None:",
        "    # One run of the worker, no database: the outcome and the row as River would store it.",
        f'    result = work_once(workers, {cls}(message="hello"))',
        "    assert result.error is None, result.trace",
        "    assert result.state is JobState.COMPLETED",
        '    assert result.output == {"echo": "hello"}',
        "",
        "",
        "def test_inserted_job_is_worked(river_inline_client: InlineClient, river_sqlite_url: str) -> None:",
        "    # An empty, migrated SQLite database per test; each insert runs its worker at once.",
        f'    result = river_inline_client.insert({cls}(message="hi"))',
        "    assert result.job.state is JobState.COMPLETED",
        f'    job = require_inserted(river_sqlite_url, {cls}, args={cls}(message="hi"))  # read back',
        "    assert job.id == result.job.id",
        "",
    ])


def cmd_new_worker(args: argparse.Namespace) -> int:
    check_name(args.name)
    kind = args.kind or args.name
    try:
        validate_kind(kind)
        if args.queue:
            validate_queue_name(args.queue)
    except ValidationError as exc:
        raise UsageError(str(exc)) from None
    directory = Path(args.dir)
    module, test = directory / f"{args.name}.py", directory / f"test_{args.name}.py"
    existing = [str(p) for p in (module, test) if p.exists()]
    if existing:
        raise CommandFailed(
            f"refusing to overwrite {', '.join(existing)}; remove it or pick another NAME or --dir"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # "x" mode: never clobber a file that appeared since the check.
        with open(module, "x", encoding="utf-8") as fh:
            fh.write(render_module(args.name, kind, args.queue))
        with open(test, "x", encoding="utf-8") as fh:
            fh.write(render_test(args.name, kind))
    except OSError as exc:
        raise CommandFailed(f"cannot write into {directory}: {exc}") from exc
    print(f"created {module}")
    print(f"created {test}")
    print(f"next: fill in {class_name(args.name)} and work() in {module}, then run `pytest {test}`")
    return EXIT_OK
