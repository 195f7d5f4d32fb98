"""Which LISTEN/UNLISTEN statements a Postgres listener runs, and in what order; both clients' notifiers.

The order matters outside the process: River's conformance harness, and any operator tool that
does the same, finds a listener in ``pg_stat_activity`` as a connection whose last statement
(the ``query`` column) is a ``LISTEN``. So whatever a listener changes, and whenever it pings,
the last statement it leaves on its connection is a ``LISTEN``:

- UNLISTENs run before LISTENs, and a change that only UNLISTENs (the start-up probe's channel
  going away, ``river_db.listen_probe``) ends by repeating a LISTEN the connection already
  holds, which Postgres treats as a no-op;
- the keep-alive ping is such a repeated LISTEN too: like ``SELECT 1`` it proves the connection
  still carries a request, and it leaves the connection looking like the listener it is.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

_PING_WITHOUT_TOPICS = "SELECT 1"


@dataclass(frozen=True, slots=True)
class ListenStep:
    """One statement of a reconcile: ``verb`` is ``"LISTEN"`` or ``"UNLISTEN"``."""

    verb: str
    topic: str

    def sql(self, prefix: str) -> str:
        return f"{self.verb} {channel_identifier(prefix, self.topic)}"


def channel_identifier(prefix: str, topic: str) -> str:
    """``<prefix><topic>`` as a quoted Postgres identifier (a channel name keeps its dot and case)."""
    return '"' + (prefix + topic).replace('"', '""') + '"'


def reconcile_steps(listened: Set[str], wanted: Set[str]) -> list[ListenStep]:
    """The statements that turn the channels ``listened`` into ``wanted``, ending on a LISTEN
    whenever anything is still listened to afterwards."""
    steps = [ListenStep("UNLISTEN", topic) for topic in sorted(listened - wanted)]
    steps += [ListenStep("LISTEN", topic) for topic in sorted(wanted - listened)]
    if steps and steps[-1].verb == "UNLISTEN" and wanted:
        steps.append(ListenStep("LISTEN", min(wanted)))
    return steps


def ping_sql(prefix: str, listened: Set[str]) -> str:
    """The keep-alive statement: a repeated LISTEN of a channel held, or ``SELECT 1`` with none."""
    if not listened:
        return _PING_WITHOUT_TOPICS
    return ListenStep("LISTEN", min(listened)).sql(prefix)
