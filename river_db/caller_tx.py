"""Executors inside a caller's open transaction (insert-in-transaction and friends).

``executor_for_caller_tx(tx)`` accepts:

- a psycopg 3 ``Connection``: non-autocommit (an idle one starts its implicit
  transaction on our first statement, still owned by the caller) or autocommit
  inside ``with conn.transaction():``;
- a SQLAlchemy ``Connection`` or ORM ``Session``: statements go to the very
  DB-API connection SQLAlchemy uses for that transaction, so they commit or roll
  back together with the caller's Core/ORM work (pending ORM objects are not
  flushed for you; that is not needed for atomicity);
- a ``sqlite3``-style connection (stdlib ``sqlite3`` when it is >= 3.45, or
  ``sqlean``);
- a Django database connection (``django.db.connection`` or
  ``connections[alias]``) inside ``transaction.atomic()``: statements go to its
  psycopg connection, so they commit or roll back with the atomic block (and a
  nested block's savepoint). ``unwrap_django`` does that in the caller's thread,
  where Django's thread-local connection lives.

Requests run directly inside the caller's transaction, without savepoints: when
one fails, the transaction is in an unknown state (on Postgres it is aborted)
and the caller must roll it back. Nothing here commits or rolls back.

``resolve_caller_tx`` (detection and validation, no waiting) is shared with
``river_anyio.caller_tx`` (the async side), which calls it from a worker thread.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from river_db.connect import sqlalchemy_kind
from river_db.executor import Executor
from river_db.sqlite import check_sqlite_version
from river_protocol.dialects.base import Dialect
from river_protocol.dialects.postgres import PostgresDialect
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import ValidationError

_SQLITE_HINT = (
    "Open the connection with a module providing a newer SQLite, e.g. "
    "river_db.sqlite.connect_sqlite(path) or sqlean.connect(path); with SQLAlchemy use "
    "create_engine('sqlite:///path.db', module=sqlean)."
)


def executor_for_caller_tx(tx: Any, *, schema: str | None = None, expect: str | None = None) -> Executor:
    """An executor whose statements run in ``tx``'s open transaction (``in_caller_tx=True``);
    ``expect`` is the client's dialect name, which ``tx`` must share."""
    conn, dialect = resolve_caller_tx(tx, schema, expect=expect)
    return Executor(conn, dialect, in_caller_tx=True)


def resolve_caller_tx(
    tx: Any, schema: str | None, *, check_sqlite: Callable[..., Any] | None = None, expect: str | None = None
) -> tuple[Any, Dialect]:
    """The validated DB-API connection inside ``tx`` and its dialect (may begin the
    caller's transaction). ``check_sqlite(conn, sqlalchemy_owned=...)`` replaces
    ``checked_sqlite`` for a driver with extra needs; ``expect`` as for ``executor_for_caller_tx``."""
    conn, kind = _resolve(tx, check_sqlite or checked_sqlite)
    return conn, caller_dialect(kind, schema, expect=expect)


def caller_dialect(kind: str, schema: str | None, *, expect: str | None) -> Dialect:
    """The dialect (``kind`` 'postgres' or 'sqlite') of a caller's transaction, for ``schema``
    (validated); ``expect`` is the client's dialect name, which the transaction must share."""
    if expect is not None and kind != expect:
        raise ValidationError(f"tx is a {kind} transaction but the client uses {expect}")
    return PostgresDialect(schema) if kind == "postgres" else SQLiteDialect(schema)


def _resolve(tx: Any, check: Callable[..., Any]) -> tuple[Any, str]:
    tx = unwrap_django(tx)
    sa_conn = sqlalchemy_connection(tx)
    if sa_conn is not None:
        kind = sqlalchemy_kind(sa_conn.engine)
        if not sa_conn.in_transaction():
            # Same as SQLAlchemy 2.0's autobegin on first execute: the caller commits it.
            sa_conn.begin()
        driver_conn = sa_conn.connection.driver_connection
        if kind == "postgres":
            return checked_psycopg(driver_conn), kind
        return check(driver_conn, sqlalchemy_owned=True), kind
    if _is_psycopg(tx):
        return checked_psycopg(tx), "postgres"
    if is_sqlite(tx):
        return check(tx, sqlalchemy_owned=False), "sqlite"
    raise ValidationError(
        f"cannot run inside a transaction of type {type(tx).__module__}.{type(tx).__qualname__}: pass a "
        "psycopg Connection, a SQLAlchemy Connection or Session, a sqlite3/sqlean connection, or a "
        "Django connection inside transaction.atomic()"
    )


# ---------------------------------------------------------------- detection


_DJANGO_SQLITE_HINT = (
    "Django's SQLite backend uses the interpreter's sqlite3: set the database's ENGINE to "
    "'river_db.django_sqlite' (Django's backend on sqlean-py's SQLite), or keep Django's and River's "
    "tables on PostgreSQL, or insert from transaction.on_commit() (after the commit, so not atomic); "
    "see the README's Django section."
)


def _is_django(obj: Any) -> bool:
    if type(obj).__module__.startswith("django."):
        return True
    # A custom backend's wrapper lives in the user's module; Django is loaded by then.
    base = sys.modules.get("django.db.backends.base.base")
    return base is not None and isinstance(obj, base.BaseDatabaseWrapper)


def unwrap_django(tx: Any) -> Any:
    """The DB-API connection of a Django connection inside ``transaction.atomic()``; other ``tx`` as is.

    Must run in the thread that uses ``tx``: Django's connections are per thread.
    """
    if not _is_django(tx):
        return tx
    if not hasattr(tx, "in_atomic_block"):
        raise ValidationError(
            f"cannot use Django {type(tx).__qualname__} as a transaction: pass django.db.connection "
            "(or connections[alias]) inside transaction.atomic()"
        )
    if tx.get_autocommit():
        raise ValidationError(
            "the Django connection is in autocommit mode: insert inside `with transaction.atomic():` "
            "so the job commits or rolls back with your model rows"
        )
    if tx.needs_rollback:
        raise ValidationError(
            "the Django atomic block is marked for rollback by an earlier error: nothing more can run in it"
        )
    tx.ensure_connection()
    conn = tx.connection
    if tx.vendor == "sqlite":
        check_sqlite_version(conn, hint=_DJANGO_SQLITE_HINT)
    elif tx.vendor != "postgresql":
        raise ValidationError(f"River runs on PostgreSQL or SQLite, not on Django's {tx.vendor} backend")
    return conn


def _is_psycopg(obj: Any) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    if isinstance(obj, psycopg.AsyncConnection):
        raise ValidationError("an async psycopg connection cannot be used by the threaded driver")
    return isinstance(obj, psycopg.Connection)


def is_sqlite(obj: Any) -> bool:
    import sqlite3

    if isinstance(obj, sqlite3.Connection):
        return True
    try:
        import sqlean  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - sqlean is a dependency
        return False
    return isinstance(obj, sqlean.Connection)


def sqlalchemy_connection(obj: Any) -> Any | None:
    """The SQLAlchemy Connection behind ``obj`` (a Session's current one), or None."""
    module = type(obj).__module__
    if not module.startswith("sqlalchemy"):
        # Subclasses of Session usually live in the user's own modules.
        try:
            from sqlalchemy.orm import Session
        except ImportError:  # pragma: no cover - sqlalchemy is a dependency
            return None
        if not isinstance(obj, Session):
            return None
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session

    if isinstance(obj, Session):
        # Begins the session transaction when needed and returns the connection the
        # ORM flushes through, so our statements share its transaction.
        return obj.connection()
    if isinstance(obj, Connection):
        return obj
    raise ValidationError(
        f"cannot use SQLAlchemy {type(obj).__qualname__} as a transaction: pass a Connection or Session"
    )


# ---------------------------------------------------------------- checks


def checked_psycopg(conn: Any) -> Any:
    from psycopg.pq import TransactionStatus

    if conn.closed:
        raise ValidationError("the psycopg connection is closed")
    status = TransactionStatus(conn.pgconn.transaction_status)
    if status == TransactionStatus.INERROR:
        raise ValidationError("the caller's transaction is aborted by an earlier error: roll it back first")
    if status == TransactionStatus.ACTIVE:
        raise ValidationError("the psycopg connection is busy running another query")
    if status == TransactionStatus.IDLE and conn.autocommit:
        raise ValidationError(
            "the psycopg connection is in autocommit mode outside a transaction: "
            "open one with `with conn.transaction():` (or use a non-autocommit connection)"
        )
    return conn


def checked_sqlite(conn: Any, *, sqlalchemy_owned: bool) -> Any:
    check_sqlite_version(conn, hint=_SQLITE_HINT)
    if conn.in_transaction:
        return conn
    if getattr(conn, "autocommit", None) is False:
        return conn  # PEP 249 mode (Python >= 3.12): always inside a transaction.
    if conn.isolation_level is None and not sqlalchemy_owned:
        raise ValidationError(
            "the SQLite connection is in autocommit mode outside a transaction: execute BEGIN first"
        )
    # The caller's transaction has not touched the database yet (legacy implicit mode
    # only begins before DML; SQLAlchemy's autobegin is lazy). Begin it now so a
    # multi-statement request is atomic; the caller's commit()/rollback() ends it.
    conn.execute("BEGIN IMMEDIATE")
    return conn
