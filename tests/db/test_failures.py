"""Which failures the machines retry: ``river_protocol.transient`` on real Postgres errors."""

from __future__ import annotations

import psycopg
import pytest

from river_db.failures import intent_failed, sqlstate_of
from river_db.unavailable import unavailable_as_typed
from river_protocol.errors import DatabaseUnavailableError, RiverError
from river_protocol.intents import CountJobs
from river_protocol.transient import transient_sqlstate


def _raised(conn: psycopg.Connection, code: str) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(f"DO $$ BEGIN RAISE EXCEPTION 'fault' USING ERRCODE = '{code}'; END $$")
    return caught.value


@pytest.mark.parametrize(("code", "transient"), [
    ("40001", True),   # serialization_failure
    ("40P01", True),   # deadlock_detected
    ("26000", True),   # invalid_sql_statement_name: a pooler moved the session
    ("42P05", True),   # duplicate_prepared_statement
    ("55P03", True),   # lock_not_available
    ("57014", True),   # query_canceled (statement_timeout)
    ("53300", True),   # too_many_connections
    ("08006", True),   # connection_failure
    ("22P05", False),  # untranslatable_character: the same statement fails again
    ("23505", False),  # unique_violation
    ("42P01", False),  # undefined_table
])
def test_real_errors_by_sqlstate(scratch_pg_url: str, code: str, transient: bool) -> None:
    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        error = _raised(conn, code)
    assert sqlstate_of(error) == code
    event = intent_failed(CountJobs(), error, closed=False)
    assert event.transient is transient and not event.fatal


def test_the_cause_is_found_through_wrappers(scratch_pg_url: str) -> None:
    import sqlalchemy.exc

    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        error = _raised(conn, "22012")
    wrapped = sqlalchemy.exc.DBAPIError("stmt", None, error)
    assert sqlstate_of(wrapped) == "22012"
    try:
        try:
            raise error
        except psycopg.Error as inner:
            raise RiverError("wrapped") from inner
    except RiverError as outer:
        assert sqlstate_of(outer) == "22012"
        assert not intent_failed(CountJobs(), outer, closed=False).transient


def test_outages_and_unknown_errors_are_transient_a_closed_handle_fatal() -> None:
    with pytest.raises(DatabaseUnavailableError) as caught, unavailable_as_typed():
        psycopg.connect("postgresql://postgres@127.0.0.1:1/none", connect_timeout=2)
    outage = intent_failed(CountJobs(), caught.value, closed=False)
    assert outage.transient and not outage.fatal
    assert intent_failed(CountJobs(), RuntimeError("odd"), closed=False).transient
    assert intent_failed(CountJobs(), TimeoutError("pool"), closed=False).transient
    assert intent_failed(CountJobs(), RuntimeError("x"), closed=True).fatal
    assert intent_failed(CountJobs(), RiverError("the database handle is closed"), closed=False).fatal


def test_transient_sqlstate_rule() -> None:
    assert transient_sqlstate(None)
    assert transient_sqlstate("08P01")  # PgBouncer's own errors (query_wait_timeout, ...)
    assert not transient_sqlstate("XX000")
