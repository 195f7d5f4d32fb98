"""docs/reference/cli.md has a section per command of ``river``, each with an example and its exit codes.

The commands are read from the parser itself, so a new command (or a ``jobs``/``queues``
subcommand) fails here until the reference documents it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from river_tools.cli.main import build_parser

REFERENCE = Path(__file__).resolve().parents[2] / "docs/reference/cli.md"
GROUPS = ("jobs", "queues", "workflows")  # commands whose subcommands each get a section


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands() -> list[str]:
    """``migrate-up``, ..., ``jobs list``, ``queues pause``, ...: every command a user types."""
    names = []
    for name, sub in _subcommands(build_parser()).items():
        names += [f"{name} {child}" for child in _subcommands(sub)] if name in GROUPS else [name]
    return names


def sections(markdown: str) -> dict[str, str]:
    """The text under each ``## river NAME`` / ``### river NAME`` heading, by NAME."""
    parts = re.split(r"^#{2,3} river (.+)$", markdown, flags=re.MULTILINE)
    pairs = zip(parts[1::2], parts[2::2], strict=True)
    return {name.strip(): body.split("\n## ", 1)[0] for name, body in pairs}


def test_commands_reads_groups_and_their_subcommands() -> None:
    names = commands()
    assert {"migrate-up", "work", "jobs list", "jobs import", "queues pause"} <= set(names)
    assert "jobs" not in names


def test_sections_splits_on_river_headings() -> None:
    text = "# T\n## Jobs\nintro\n### river jobs get\nA\n## river work\nB\n### more\nC\n"
    assert sections(text) == {"jobs get": "\nA\n", "work": "\nB\n### more\nC\n"}


def test_every_command_has_a_section_with_an_example_and_exit_codes() -> None:
    documented = sections(REFERENCE.read_text(encoding="utf-8"))
    for name in commands():
        assert name in documented, f"docs/reference/cli.md has no `## river {name}` section"
        body = documented[name]
        example = re.search(r"```sh\n(.*?)```", body, flags=re.DOTALL)
        assert example and f"river {name}" in example.group(1), f"river {name}: no ```sh example"
        assert "Exit codes" in body, f"river {name}: its exit codes are not named"
    assert set(documented) <= set(commands())  # no section for a command that is gone
