"""docs/state-diagrams.md is generated from the tables and must not drift from them."""

from __future__ import annotations

import re
from pathlib import Path

from river_protocol import diagrams, states
from river_protocol.machines.base import key_name
from river_protocol.states import TRANSITIONS, Actor

DOC = Path(__file__).resolve().parents[2] / "docs/state-diagrams.md"
ARROW = re.compile(r"^    (\S+) --> (\S+): (.+)$")


def arrows(text: str) -> set[tuple[str, str, str]]:
    found = set()
    for line in text.splitlines()[1:]:
        match = ARROW.match(line)
        if match is None:
            continue
        source, dest, labels = match.groups()
        found.update((source, dest, label) for label in labels.split(", "))
    return found


def test_committed_diagrams_equal_the_generated_ones() -> None:
    stale = f"docs/state-diagrams.md differs from the tables; regenerate it: {diagrams.REGENERATE}"
    assert DOC.read_text() == diagrams.document(), stale


def test_job_diagram_has_exactly_the_transitions_of_the_table() -> None:
    text = states.mermaid()
    assert text.startswith("stateDiagram-v2\n")
    expected = {
        ("[*]" if current is None else current.value, "[*]" if target is None else target.value, actor.value)
        for (current, actor), targets in TRANSITIONS.items()
        for target in targets
    }
    assert arrows(text) == expected
    assert "    running --> completed: completer\n" in text
    assert "    running --> cancelled: completer, rescuer\n" in text  # actors in Actor order
    assert [a.value for a in Actor].index("completer") < [a.value for a in Actor].index("rescuer")


def test_machine_diagrams_draw_every_state_change_of_their_tables() -> None:
    for _, machine in diagrams.MACHINES:
        expected = {
            (state.value, target.value, key_name(key))
            for (state, key), row in machine.TABLE.items()
            for target in row.targets
            if target is not state
        }
        text = diagrams.machine_diagram(machine)
        assert text.startswith(f"stateDiagram-v2\n    [*] --> {machine.INITIAL.value}\n")
        assert arrows(text) == expected, machine.__name__


def test_document_holds_every_diagram_once() -> None:
    doc = diagrams.document()
    assert doc.count("```mermaid\n") == 1 + len(diagrams.MACHINES)
    assert states.mermaid() in doc
    for title, machine in diagrams.MACHINES:
        assert f"### {title} (`{machine.__module__}.{machine.__name__}`)" in doc
        assert diagrams.machine_diagram(machine) in doc
