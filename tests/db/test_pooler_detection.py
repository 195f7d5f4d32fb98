"""Prepared statements only where they cannot break: River's own direct connections."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from river_db.connect import OWN_PREPARES, behind_pooler, connect_dedicated, open_connection, open_pg
from river_db.executor import execute_step
from river_protocol.intents import Statement

pytestmark = pytest.mark.postgres



def test_a_direct_connection_is_not_behind_a_pooler(scratch_pg_url: str) -> None:
    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        assert not behind_pooler(conn)


def test_pgbouncer_is_detected_in_both_pool_modes(scratch_pg_url: str, pgbouncer: Any,
                                                   pgbouncer_session: Any) -> None:
    for bouncer in (pgbouncer, pgbouncer_session):
        with psycopg.connect(bouncer.url(scratch_pg_url), autocommit=True) as conn:
            assert behind_pooler(conn)


def test_own_connections_prepare_only_when_direct(scratch_pg_url: str, pgbouncer: Any) -> None:
    direct = open_pg(scratch_pg_url, {}, None)
    pooled = open_pg(pgbouncer.url(scratch_pg_url), {}, None)
    try:
        assert getattr(direct, OWN_PREPARES) and direct.prepare_threshold is not None
        assert not getattr(pooled, OWN_PREPARES, False) and pooled.prepare_threshold is None
        for _ in range(8):  # past psycopg's threshold of 5
            assert execute_step(direct, Statement("SELECT %s::int", (1,))) == [(1,)]
        assert direct.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'SELECT $1::int%'"
        ).fetchone() == (1,)
    finally:
        direct.close()
        pooled.close()


def test_a_callers_connection_is_never_prepared_by_river(scratch_pg_url: str) -> None:
    with psycopg.connect(scratch_pg_url, autocommit=True) as conn:
        assert conn.prepare_threshold == 5  # the caller's setting, left alone
        for _ in range(8):
            execute_step(conn, Statement("SELECT %s::int", (2,)))
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone() == (0,)
        assert conn.prepare_threshold == 5


def test_command_and_listener_connections_never_prepare(scratch_pg_url: str, pgbouncer: Any) -> None:
    url = pgbouncer.url(scratch_pg_url)
    conn, dialect = open_connection(url)
    listener = connect_dedicated(url)
    try:
        assert dialect == "postgres"
        assert conn.prepare_threshold is None and listener.prepare_threshold is None
    finally:
        conn.close()
        listener.close()


def test_a_lost_prepared_statement_turns_preparing_off(scratch_pg_url: str) -> None:
    conn = open_pg(scratch_pg_url, {}, None)
    try:
        for _ in range(6):
            execute_step(conn, Statement("SELECT %s::int", (3,)))
        # What a move to another server connection looks like; libpq directly, so psycopg
        # does not see it and still believes its statement prepared.
        conn.pgconn.exec_(b"DEALLOCATE ALL")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            execute_step(conn, Statement("SELECT %s::int", (3,)))
        assert conn.prepare_threshold is None and not getattr(conn, OWN_PREPARES)
        assert execute_step(conn, Statement("SELECT %s::int", (3,))) == [(3,)]
    finally:
        conn.close()


def test_the_utc_session_survives_transaction_pooling(scratch_pg_url: str, pgbouncer: Any) -> None:
    """River's one session setting (TimeZone) is tracked per client by PgBouncer: another
    client's zone on the same server connections never shows through."""
    from river_db.connect import with_utc_session

    url = pgbouncer.url(scratch_pg_url)
    ours = open_pg(url, {}, with_utc_session(None))
    other = psycopg.connect(url, autocommit=True)
    try:
        other.execute("SET TimeZone TO 'America/New_York'")
        for _ in range(20):
            assert other.execute("SHOW TimeZone").fetchone() == ("America/New_York",)
            assert execute_step(ours, Statement("SHOW TimeZone")) == [("UTC",)]
    finally:
        ours.close()
        other.close()


def test_a_private_pgbouncer_starts_on_its_own_port_and_stops(scratch_pg_url: str) -> None:
    import socket

    from tests.conftest import pg_base_url
    from tests.pgbouncer import PgBouncer

    bouncer = PgBouncer(pg_base_url(), pool_mode="session", pool_size=2)
    try:
        with psycopg.connect(bouncer.url(scratch_pg_url), autocommit=True) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (scratch_pg_url.rsplit("/", 1)[1],)
            assert behind_pooler(conn)
    finally:
        bouncer.stop()
    assert not bouncer.dir.exists()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", bouncer.port), timeout=1):
        pass
