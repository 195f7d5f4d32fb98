"""Which driver errors mean "the database cannot be reached", as one typed error.

psycopg reports an outage in several shapes: a refused or failed connect (no
SQLSTATE), a dead pooled connection (``AdminShutdown``, "server closed the
connection unexpectedly", "the connection is lost"), a connection exception
(SQLSTATE class 08), a psycopg_pool ``PoolTimeout``; SQLAlchemy wraps each of
them. Both drivers run their statements through ``unavailable_as_typed`` so a
caller sees ``DatabaseUnavailableError`` for all of them, whichever driver and
pool it uses. Other operational errors (a cancelled query, a lock not
available) name a problem of the statement, not of the server, and pass as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from river_protocol.errors import DatabaseUnavailableError

# Shutting down (admin, crash) or not yet accepting connections: the server, not the statement.
_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})


def psycopg_cause(exc: BaseException) -> BaseException | None:
    psycopg = sys.modules.get("psycopg")  # never imported for SQLite alone: then it can't be its error
    if psycopg is None:
        return None
    error_type: type[BaseException] = psycopg.Error
    if isinstance(exc, error_type):
        return exc
    orig = getattr(exc, "orig", None)  # sqlalchemy.exc.DBAPIError around the driver's error
    if type(exc).__module__.startswith("sqlalchemy") and isinstance(orig, error_type):
        return orig
    return None


def unavailable_error(exc: BaseException) -> DatabaseUnavailableError | None:
    """The typed error for ``exc`` when it means Postgres cannot be reached, else None."""
    if isinstance(exc, DatabaseUnavailableError):
        return exc
    cause = psycopg_cause(exc)
    if cause is None:
        return None
    pool = sys.modules.get("psycopg_pool")
    if pool is not None and isinstance(cause, pool.PoolTimeout):
        return DatabaseUnavailableError(f"the database is unavailable: no pooled connection ({cause})")
    psycopg = sys.modules["psycopg"]
    if not isinstance(cause, psycopg.OperationalError):
        return None
    state = cause.sqlstate
    if state is None or state.startswith("08") or state in _SERVER_GONE:
        return DatabaseUnavailableError(f"the database is unavailable: {cause}")
    return None


@contextmanager
def unavailable_as_typed() -> Iterator[None]:
    """Raise ``DatabaseUnavailableError`` (the original chained) for an outage inside the block."""
    try:
        yield
    except Exception as exc:
        typed = unavailable_error(exc)
        if typed is None or typed is exc:
            raise
        raise typed from exc
