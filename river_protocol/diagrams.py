"""The state diagrams of docs/state-diagrams.md, drawn from the tables themselves.

``document()`` is the whole file; a test compares the committed file with it,
so the pictures cannot drift from the tables the code runs on.
"""

from __future__ import annotations

from river_protocol import states
from river_protocol.leadership import Leadership
from river_protocol.machines.base import Machine, mermaid
from river_protocol.machines.completer import Completer
from river_protocol.machines.elector import Elector
from river_protocol.machines.maintenance import MaintenanceService
from river_protocol.machines.periodic import PeriodicEnqueuer
from river_protocol.machines.producer import Producer

REGENERATE = (
    "python -c \"from river_protocol.diagrams import document; print(document(), end='')\""
    " > docs/state-diagrams.md"
)

MACHINES: tuple[tuple[str, type[Machine]], ...] = (
    ("Producer", Producer),
    ("Completer", Completer),
    ("Elector", Elector),
    ("Leadership", Leadership),
    ("Maintenance service", MaintenanceService),
    ("Periodic enqueuer", PeriodicEnqueuer),
)


def machine_diagram(machine: type[Machine]) -> str:
    """``machine``'s table as Mermaid text from its initial state, state changes only."""
    return mermaid(machine.TABLE, machine.INITIAL, loops=False)


def _fenced(text: str) -> str:
    return "```mermaid\n" + text + "```\n"


def document() -> str:
    parts = [
        "# State diagrams\n",
        "Generated from the tables in `river_protocol` by `river_protocol.diagrams.document()`;"
        " `tests/protocol/test_diagrams.py` fails when this file and the tables differ."
        f" Regenerate with\n\n    {REGENERATE}\n",
        "## Job states\n",
        "`river_protocol.states.TRANSITIONS`: every change of a `river_job` row's state, labelled by"
        " the components allowed to make it. `[*]` is a new row as a source and a deleted row as a"
        " target. The completer's outcome mapping, its database model and the rescuer check each"
        " change against this table at run time.\n",
        _fenced(states.mermaid()),
        "## Machines\n",
        "Each machine's `TABLE` (`river_protocol.machines`). Arrows are labelled by event; results"
        " read `IntentSucceeded(ClaimJobs)`, and `Intent` stands for any statement. A row with"
        " several next states (a conditional, checked at run time) draws one arrow per state;"
        " arrows back to the same state are left out.\n",
    ]
    for title, machine in MACHINES:
        parts.append(f"### {title} (`{machine.__module__}.{machine.__name__}`)\n")
        parts.append(_fenced(machine_diagram(machine)))
    return "\n".join(parts)
