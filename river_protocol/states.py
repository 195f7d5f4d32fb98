"""Job states and River's state diagram, in one table.

The table lists every transition River's components make (docs/protocol.md §4).
Nothing else decides whether a state change is legal: the completer's
outcome mapping (``outcomes``), its database model and the rescuer check
every change they make against it at run time, and the lifecycle property
test checks the model's. ``mermaid`` draws it (docs/state-diagrams.md).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from river_protocol.errors import ProtocolError, ValidationError


class JobState(enum.StrEnum):
    AVAILABLE = "available"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    DISCARDED = "discarded"
    PENDING = "pending"
    RETRYABLE = "retryable"
    RUNNING = "running"
    SCHEDULED = "scheduled"

    @property
    def finalized(self) -> bool:
        return self in FINALIZED_STATES

    @classmethod
    def parse(cls, value: str | JobState) -> JobState:
        try:
            return cls(value)
        except ValueError:
            raise ValidationError(
                f"invalid job state {value!r}; expected one of {', '.join(s.value for s in cls)}"
            ) from None


ALL_STATES: tuple[JobState, ...] = tuple(JobState)
FINALIZED_STATES = frozenset({JobState.CANCELLED, JobState.COMPLETED, JobState.DISCARDED})


class Actor(enum.StrEnum):
    """Who moves a job: each component may only make its own transitions."""

    INSERT = "insert"
    PRODUCER = "producer"
    COMPLETER = "completer"
    RESCUER = "rescuer"
    SCHEDULER = "scheduler"
    CANCEL_API = "cancel_api"
    RETRY_API = "retry_api"
    DELETE_API = "delete_api"
    JOB_CLEANER = "job_cleaner"


S = JobState
_NON_FINAL_NON_RUNNING = frozenset({S.AVAILABLE, S.PENDING, S.RETRYABLE, S.SCHEDULED})
_NON_RUNNING = frozenset(ALL_STATES) - {S.RUNNING}

# (from state or None for a new row, actor) -> states it may move to.
# DELETED is modelled as None in the target set.
TRANSITIONS: dict[tuple[JobState | None, Actor], frozenset[JobState | None]] = {
    (None, Actor.INSERT): frozenset({S.AVAILABLE, S.SCHEDULED, S.PENDING}),
    (S.AVAILABLE, Actor.PRODUCER): frozenset({S.RUNNING}),
    (S.RUNNING, Actor.COMPLETER): frozenset(
        {S.COMPLETED, S.AVAILABLE, S.RETRYABLE, S.SCHEDULED, S.DISCARDED, S.CANCELLED}
    ),
    (S.RUNNING, Actor.RESCUER): frozenset({S.RETRYABLE, S.DISCARDED, S.CANCELLED}),
    (S.RETRYABLE, Actor.SCHEDULER): frozenset({S.AVAILABLE, S.DISCARDED}),
    (S.SCHEDULED, Actor.SCHEDULER): frozenset({S.AVAILABLE, S.DISCARDED}),
    **{(s, Actor.CANCEL_API): frozenset({S.CANCELLED}) for s in _NON_FINAL_NON_RUNNING},
    **{(s, Actor.RETRY_API): frozenset({S.AVAILABLE}) for s in _NON_RUNNING},
    **{(s, Actor.DELETE_API): frozenset({None}) for s in _NON_RUNNING},
    **{(s, Actor.JOB_CLEANER): frozenset({None}) for s in FINALIZED_STATES},
}


def check_transition(current: JobState | None, actor: Actor, target: JobState | None) -> None:
    """Raise ``ProtocolError`` unless River lets ``actor`` move a job from ``current`` to ``target``."""
    allowed = TRANSITIONS.get((current, actor))
    if allowed is None or target not in allowed:
        cur = current.value if current else "(new)"
        tgt = target.value if target else "(deleted)"
        raise ProtocolError(f"illegal transition {cur} -> {tgt} by {actor.value}")


# The diagram's reading order: a job's life from insert to deletion.
_LIFE_ORDER: tuple[JobState | None, ...] = (
    None, S.PENDING, S.SCHEDULED, S.AVAILABLE, S.RUNNING, S.RETRYABLE, S.COMPLETED, S.CANCELLED, S.DISCARDED,
)


def mermaid() -> str:
    """``TRANSITIONS`` as a Mermaid ``stateDiagram-v2``: one arrow per (from, to), labelled by actors.

    ``[*]`` is a new row as a source and a deleted row as a target. Arrows are sorted (the
    table is built from sets, whose order changes between processes), so the text is stable.
    """
    actors: dict[tuple[JobState | None, JobState | None], set[Actor]] = {}
    for (current, actor), targets in TRANSITIONS.items():
        for target in targets:
            actors.setdefault((current, target), set()).add(actor)
    rank = {state: i for i, state in enumerate(_LIFE_ORDER)}
    actor_rank = {actor: i for i, actor in enumerate(Actor)}

    def edge_order(edge: tuple[JobState | None, JobState | None]) -> tuple[int, int]:
        return rank[edge[0]], len(rank) if edge[1] is None else rank[edge[1]]

    lines = ["stateDiagram-v2"]
    for current, target in sorted(actors, key=edge_order):
        names = ", ".join(a.value for a in sorted(actors[(current, target)], key=actor_rank.__getitem__))
        source = "[*]" if current is None else current.value
        dest = "[*]" if target is None else target.value
        lines.append(f"    {source} --> {dest}: {names}")
    return "\n".join(lines) + "\n"


def parse_states(values: Iterable[str | JobState]) -> tuple[JobState, ...]:
    return tuple(JobState.parse(v) for v in values)
