"""How a failed intent is reported to its machine, the same for both drivers' runners."""

from __future__ import annotations

from typing import Any

from river_db.unavailable import psycopg_cause
from river_protocol.errors import DatabaseUnavailableError, RiverError
from river_protocol.machines.base import IntentFailed
from river_protocol.transient import transient_sqlstate


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg error (SQLAlchemy's wrapper or our outage error around it
    included), else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        cause = psycopg_cause(current)
        if cause is not None:
            return getattr(cause, "sqlstate", None)
        current = current.__cause__
    return None


def intent_failed(intent: Any, exc: Exception, *, closed: bool) -> IntentFailed:
    """The event for ``intent`` failing with ``exc``; ``closed``: the database handle was closed.

    Fatal (nothing will ever run it again): the handle is closed, or the error says so
    (a RiverError naming something closed; an outage's text may say "closed" too, but
    retrying is the point there). Transient or not: ``river_protocol.transient``.
    """
    fatal = closed or (
        isinstance(exc, RiverError) and not isinstance(exc, DatabaseUnavailableError) and "closed" in str(exc)
    )
    transient = isinstance(exc, DatabaseUnavailableError) or transient_sqlstate(sqlstate_of(exc))
    return IntentFailed(intent, exc, fatal=fatal, transient=transient)
