"""Which driver errors count as "the database cannot be reached"."""

from __future__ import annotations

import psycopg
import psycopg.errors as pg_errors
import pytest
import sqlalchemy.exc
from psycopg_pool import PoolTimeout

from river_db.unavailable import unavailable_as_typed, unavailable_error
from river_protocol.errors import DatabaseUnavailableError, RiverError


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("connection failed: Connection refused"),  # no SQLSTATE: client side
        pg_errors.AdminShutdown("terminating connection due to administrator command"),
        pg_errors.CrashShutdown("crash"),
        pg_errors.CannotConnectNow("the database system is starting up"),
        pg_errors.ConnectionFailure("connection failure"),  # class 08
        PoolTimeout("couldn't get a connection after 30.00 sec"),
        sqlalchemy.exc.OperationalError("SELECT 1", {}, psycopg.OperationalError("server closed")),
    ],
)
def test_outages_become_the_typed_error(error: Exception) -> None:
    typed = unavailable_error(error)
    assert isinstance(typed, DatabaseUnavailableError)
    assert isinstance(typed, RiverError) and isinstance(typed, ConnectionError)
    assert str(typed).startswith("the database is unavailable")
    with pytest.raises(DatabaseUnavailableError) as caught, unavailable_as_typed():
        raise error
    assert caught.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [
        pg_errors.QueryCanceled("canceling statement due to statement timeout"),
        pg_errors.LockNotAvailable("could not obtain lock"),
        pg_errors.UniqueViolation("duplicate key"),
        psycopg.InterfaceError("bad use"),
        TimeoutError("timed out waiting for a Postgres connection"),  # every connection busy
        ValueError("not a database error"),
    ],
)
def test_other_errors_pass_unchanged(error: Exception) -> None:
    assert unavailable_error(error) is None
    with pytest.raises(type(error)) as caught, unavailable_as_typed():
        raise error
    assert caught.value is error


def test_the_typed_error_itself_passes_through() -> None:
    error = DatabaseUnavailableError("the database is unavailable: down")
    assert unavailable_error(error) is error
    with pytest.raises(DatabaseUnavailableError) as caught, unavailable_as_typed():
        raise error
    assert caught.value is error and caught.value.__cause__ is None
