"""Async executors inside a caller's open transaction (``tx=`` on the trio and asyncio clients).

The async side of ``river_db.caller_tx`` (which detects and checks the blocking kinds for both
clients). ``await executor_for_caller_tx(tx)`` accepts:

- what ``river_db.caller_tx`` does: a psycopg 3 ``Connection`` (non-autocommit, or autocommit
  inside ``with conn.transaction():``), a SQLAlchemy ``Connection`` or ORM ``Session``
  (statements go to the DB-API connection of that transaction), a Django connection inside
  ``transaction.atomic()``, or a sqlite3-style connection (opened with
  ``check_same_thread=False``). Their statements run in worker threads;
- on asyncio only, the asyncio-native kinds, driven on the event loop (``native_runner_for``):
  psycopg 3's ``AsyncConnection`` (non-autocommit, or autocommit inside
  ``async with conn.transaction():``); SQLAlchemy's ``AsyncConnection`` or ``AsyncSession`` on
  psycopg (``postgresql+psycopg://``) or asyncpg (``postgresql+asyncpg://``), whose statements
  go to the driver connection of SQLAlchemy's own transaction, so they commit or roll back with
  it, and with the innermost ``begin_nested()`` savepoint; asyncpg's ``Connection`` (or a pool's
  connection proxy) inside ``async with conn.transaction():`` (asyncpg has no implicit
  transaction: a connection outside one would commit each statement on its own, so it is
  refused). Under trio these kinds are refused with a clear error; ``_native_executor`` is the
  one place deciding. Nothing is imported to recognise them: an object can only be an instance
  of a library's class once that library is loaded.

Nothing here commits or rolls back, and there are no savepoints of our own: when a statement
fails, or the awaiting task is cancelled mid-statement (which on Postgres aborts the
transaction), the caller's transaction is theirs to roll back. Both asyncio drivers leave the
connection able to do that: on cancellation psycopg sends the server a cancel request and waits
for the statement to end, and asyncpg sends one and makes the connection's next operation (the
caller's ROLLBACK) wait for it.

asyncpg speaks differently from psycopg, whose paramstyle the Postgres dialect
writes; ``AsyncpgRunner`` translates:

- ``%s`` placeholders become ``$n`` (``numbered_placeholders``);
- parameters need no conversion: the dialect casts every one (``%s::text[]``,
  ``%s::timestamptz``), asyncpg takes the cast as the parameter's type, and the
  values the dialect sends (str, int, bool, datetime, lists of them) are the
  Python types asyncpg encodes for those. A ``jsonb`` parameter is bound as text
  and cast by the server, so a codec the application set on its connection (often
  ``json.dumps``) cannot encode the dialect's JSON text a second time;
- results: ``Record``s become plain tuples. The dialect selects JSON as text and
  enums and bit strings cast, so the values are the types psycopg returns;
  ``BitString`` is still turned into psycopg's ``'0101'`` text should a statement
  select one uncast;
- ``CopyRows`` goes through ``copy_records_to_table``; its bit(8) text values
  become ``BitString``s, which asyncpg's binary COPY needs.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio
import sniffio

from river_anyio.database import run_blocking
from river_anyio.executor import AsyncExecutor, PlanRunner
from river_db.caller_tx import (
    caller_dialect,
    checked_psycopg,
    checked_sqlite,
    resolve_caller_tx,
    unwrap_django,
)
from river_db.executor import copy_sql, plain_tuples, psycopg_binary, psycopg_fetches
from river_protocol.dialects.base import Dialect, Plan
from river_protocol.errors import ValidationError
from river_protocol.intents import CopyRows, Statement

R = TypeVar("R")
Rows = list[tuple[Any, ...]]

_THREAD_HINT = (
    "the async driver runs statements in worker threads: open the SQLite connection with "
    "check_same_thread=False (river_db.sqlite.connect_sqlite does)"
)


async def executor_for_caller_tx(
    tx: Any, *, schema: str | None = None, expect: str | None = None
) -> AsyncExecutor:
    """An async executor whose statements run in ``tx``'s open transaction; ``expect`` is the
    client's dialect name, which ``tx`` must share."""
    native = await _native_executor(tx, schema=schema, expect=expect)
    if native is not None:
        return native
    tx = unwrap_django(tx)  # Django's connection is per thread: this one's, not the worker thread's
    # SQLAlchemy may check a connection out of its pool and begin: a worker thread's job.
    conn, dialect = await run_blocking(
        lambda: resolve_caller_tx(tx, schema, check_sqlite=_sqlite, expect=expect)
    )
    return AsyncExecutor(conn, dialect, in_caller_tx=True)


def asyncio_only_kind(tx: Any) -> str | None:
    """What ``tx`` is when it is an asyncio-only transaction (for the refusal's text), else None."""
    module = type(tx).__module__
    if module.startswith("psycopg"):
        try:
            import psycopg
        except ImportError:  # pragma: no cover - psycopg is a dependency
            return None
        return "psycopg's AsyncConnection" if isinstance(tx, psycopg.AsyncConnection) else None
    if module.startswith("sqlalchemy.ext.asyncio"):
        return f"SQLAlchemy's asyncio {type(tx).__name__}"
    if module.startswith("asyncpg"):
        return f"asyncpg's {type(tx).__name__}"
    return None


async def _native_executor(tx: Any, *, schema: str | None, expect: str | None) -> AsyncExecutor | None:
    """An executor driving an asyncio-native ``tx``; None for the blocking kinds (threads)."""
    running = sniffio.current_async_library()
    if running == "asyncio":
        found = await native_runner_for(tx, schema=schema, expect=expect)
        if found is not None:
            runner, dialect = found
            return AsyncExecutor(tx, dialect, in_caller_tx=True, runner=runner)
    kind = asyncio_only_kind(tx)
    if kind is None:
        return None
    if running == "asyncio":  # an asyncio library's object that is no transaction (an AsyncEngine)
        raise ValidationError(
            f"{kind} cannot be used as tx=: pass a psycopg AsyncConnection, a SQLAlchemy AsyncConnection "
            "or AsyncSession, or an asyncpg Connection"
        )
    raise ValidationError(
        f"{kind} runs on asyncio only: under {running} pass a sync psycopg Connection, "
        "SQLAlchemy Connection or Session (or use river_asyncio on asyncio)"
    )


def _sqlite(conn: Any, *, sqlalchemy_owned: bool) -> Any:
    try:
        return checked_sqlite(conn, sqlalchemy_owned=sqlalchemy_owned)
    except Exception as exc:
        # sqlite3's own thread check, seen from our worker thread.
        if type(exc).__name__ == "ProgrammingError" and "thread" in str(exc):
            raise ValidationError(_THREAD_HINT) from exc
        raise


# ---------------------------------------------------------------- asyncio-native kinds


async def native_runner_for(
    tx: Any, *, schema: str | None, expect: str | None
) -> tuple[PlanRunner, Dialect] | None:
    """A runner whose statements run in ``tx``'s open transaction, and its dialect; None when
    ``tx`` is none of the asyncio-native kinds. ``expect`` is the client's dialect name."""
    if _instance_of(tx, "psycopg", "AsyncConnection"):
        _require_asyncio(tx)
        dialect = caller_dialect("postgres", schema, expect=expect)
        return PsycopgAsyncRunner(checked_psycopg(tx)), dialect
    if _is_asyncpg(tx):
        _require_asyncio(tx)
        dialect = caller_dialect("postgres", schema, expect=expect)
        return AsyncpgRunner(_checked_asyncpg(tx)), dialect
    if _instance_of(tx, "sqlalchemy.ext.asyncio", "AsyncConnection", "AsyncSession"):
        _require_asyncio(tx)
        return await _sqlalchemy_runner(tx, schema, expect)
    return None


# ---------------------------------------------------------------- detection


def _instance_of(obj: Any, module_name: str, *class_names: str) -> bool:
    module = sys.modules.get(module_name)
    return module is not None and isinstance(obj, tuple(getattr(module, n) for n in class_names))


def _require_asyncio(tx: Any) -> None:
    try:
        running = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        running = None
    if running != "asyncio":
        raise ValidationError(
            f"{type(tx).__module__}.{type(tx).__qualname__} runs on asyncio only, and this is not an "
            "asyncio event loop"
        )


def _is_asyncpg(obj: Any) -> bool:
    # A pool's connections come wrapped in a proxy that forwards every method.
    return _instance_of(obj, "asyncpg", "Connection") or _instance_of(
        obj, "asyncpg.pool", "PoolConnectionProxy"
    )


def _checked_asyncpg(conn: Any) -> Any:
    try:
        closed = conn.is_closed()
    except Exception as exc:  # a proxy released to its pool raises InterfaceError
        raise ValidationError(f"the asyncpg connection cannot be used: {exc}") from exc
    if closed:
        raise ValidationError("the asyncpg connection is closed")
    if not conn.is_in_transaction():
        raise ValidationError(
            "the asyncpg connection is outside a transaction (asyncpg commits each statement on "
            "its own there): insert inside `async with conn.transaction():`"
        )
    return conn


async def _sqlalchemy_runner(tx: Any, schema: str | None, expect: str | None) -> tuple[PlanRunner, Dialect]:
    from sqlalchemy.ext.asyncio import AsyncSession

    if isinstance(tx, AsyncSession):
        # Begins the session transaction when needed: the connection the ORM flushes through.
        sa_conn = await tx.connection()
    else:
        sa_conn = tx
        if sa_conn.closed or sa_conn.sync_connection is None:
            raise ValidationError("the SQLAlchemy AsyncConnection is closed or was never started")
    sa_dialect = sa_conn.dialect
    kind = {"postgresql": "postgres", "sqlite": "sqlite"}.get(sa_dialect.name, sa_dialect.name)
    dialect = caller_dialect(kind, schema, expect=expect)
    if kind != "postgres" or sa_dialect.driver not in ("psycopg", "psycopg_async", "asyncpg"):
        raise ValidationError(
            f"SQLAlchemy's asyncio driver {sa_dialect.name}+{sa_dialect.driver} is not supported for tx=: "
            "use postgresql+psycopg:// or postgresql+asyncpg://"
        )
    if not sa_conn.in_transaction():
        # As SQLAlchemy's autobegin on first execute would: the caller commits it.
        await sa_conn.begin()
    raw = (await sa_conn.get_raw_connection()).driver_connection
    if raw is None:
        raise ValidationError("the SQLAlchemy connection was invalidated: roll it back first")
    if _is_asyncpg(raw):
        if not raw.is_in_transaction():
            # SQLAlchemy's asyncpg adapter sends BEGIN with its first statement, not at begin().
            await sa_conn.exec_driver_sql("SELECT 1")
        return AsyncpgRunner(_checked_asyncpg(raw)), dialect
    return PsycopgAsyncRunner(checked_psycopg(raw)), dialect


# ---------------------------------------------------------------- runners


async def _drive(plan: Plan[R], execute: Callable[[Statement | CopyRows], Coroutine[Any, Any, Rows]]) -> R:
    try:
        step = next(plan)
        while True:
            step = plan.send(await execute(step))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    finally:
        plan.close()


class _CallerTxRunner:
    """What both runners share: plans run straight in the caller's transaction, which only the
    caller ends (``rollback`` leaves it alone: after a failure the caller rolls it back)."""

    conn: Any

    async def run_plan(self, plan: Plan[R], *, begin: str | None = None) -> R:
        if begin is not None:
            raise ValidationError("a runner inside the caller's transaction never begins one of its own")
        # The plan runs in a task of its own, cancelled once when the waiting task is: both
        # drivers clean up after a cancellation with awaits of their own, which an AnyIO cancel
        # scope (it cancels at every await) would interrupt, and psycopg then closes the
        # connection, taking the caller's transaction with it. asyncio is imported here, not at
        # module level: the package loads an event loop only under it (tests/test_layering.py).
        import asyncio

        task = asyncio.ensure_future(_drive(plan, self.execute))
        try:
            return await asyncio.shield(task)
        except BaseException:
            if not task.done():
                task.cancel()
                with anyio.CancelScope(shield=True):
                    await asyncio.wait({task})
                if not task.cancelled():
                    task.exception()  # retrieved: the cancellation is what propagates
            raise

    async def rollback(self) -> None:
        return None

    async def execute(self, step: Statement | CopyRows) -> Rows:
        raise NotImplementedError


class PsycopgAsyncRunner(_CallerTxRunner):
    """Plans on a psycopg 3 ``AsyncConnection``, with the sync executor's conventions."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @property
    def broken(self) -> bool:
        return bool(self.conn.closed or self.conn.broken)

    async def execute(self, step: Statement | CopyRows) -> Rows:
        if isinstance(step, CopyRows):
            async with self.conn.cursor() as cur, cur.copy(copy_sql(step)) as copy:
                for row in step.rows:
                    await copy.write_row(row)
            return []
        async with self.conn.cursor() as cur:
            await cur.execute(step.sql, step.params, binary=psycopg_binary(cur, step))
            return plain_tuples(await cur.fetchall()) if psycopg_fetches(cur, step) else []


class AsyncpgRunner(_CallerTxRunner):
    """Plans on an asyncpg ``Connection``, translated as the module docstring says."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._bitstring: type = sys.modules["asyncpg"].BitString  # loaded: conn is asyncpg's

    @property
    def broken(self) -> bool:
        return bool(self.conn.is_closed())

    async def execute(self, step: Statement | CopyRows) -> Rows:
        if isinstance(step, CopyRows):
            await self._copy(step)
            return []
        sql = asyncpg_sql(step.sql)
        if not step.fetch:
            await self.conn.execute(sql, *step.params)
            return []
        records = await self.conn.fetch(sql, *step.params)
        return [_from_asyncpg(record, self._bitstring) for record in records]

    async def _copy(self, step: CopyRows) -> None:
        schema, table = _split_table(step.table)
        # The column types decide which values need asyncpg's own type (binary COPY).
        probe = await self.conn.prepare(f"SELECT {', '.join(step.columns)} FROM {step.table} LIMIT 0")
        bits = [i for i, attr in enumerate(probe.get_attributes()) if attr.type.name in ("bit", "varbit")]
        rows: Any = step.rows
        if bits:
            rows = [list(row) for row in step.rows]
            for row in rows:
                for i in bits:
                    if isinstance(row[i], str):
                        row[i] = self._bitstring(row[i])
        await self.conn.copy_records_to_table(
            table, records=rows, columns=list(step.columns), schema_name=schema
        )


def _split_table(table: str) -> tuple[str | None, str]:
    """``'"schema".name'`` (the dialect's prefix is a validated, quoted identifier) or ``'name'``."""
    schema, _, name = table.rpartition(".")
    return (schema.strip('"') or None), name.strip('"')


def _from_asyncpg(record: Any, bitstring: type) -> tuple[Any, ...]:
    row = tuple(record)
    if any(type(v) is bitstring for v in row):
        return tuple(_bit_text(v) if type(v) is bitstring else v for v in row)
    return row


def _bit_text(bits: Any) -> str:
    return format(bits.to_int(), f"0{len(bits)}b") if len(bits) else ""


# ---------------------------------------------------------------- placeholders

# psycopg's placeholders (%s, and %b/%t for binary/text), its escaped percent, anything else.
_PERCENT = re.compile(r"%(.|$)", re.DOTALL)
_JSONB_PARAM = re.compile(r"(\$\d+)::jsonb\b(?!\s*\[)")


def numbered_placeholders(sql: str) -> str:
    """``sql`` written for psycopg (``%s``, ``%%``) in asyncpg's form (``$1``, ``%``).

    psycopg reads every ``%`` of a statement with parameters this way, inside string
    literals too (a literal percent is written ``%%`` there), so this does the same:
    the statement means to asyncpg what it means to psycopg. Named placeholders
    (``%(name)s``) and any other ``%`` sequence raise ``ValidationError``, as psycopg does.
    """
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        char = match.group(1)
        if char == "%":
            return "%"
        if char and char in "sbt":
            count += 1
            return f"${count}"
        raise ValidationError(f"unsupported placeholder %{char} in {sql[:80]!r}: only %s, %b, %t and %%")

    return _PERCENT.sub(replace, sql)


@functools.lru_cache(maxsize=512)
def asyncpg_sql(sql: str) -> str:
    """The statement asyncpg runs for the dialect's ``sql``: numbered placeholders, and jsonb
    parameters bound as text (see the module docstring). The dialect's statements repeat, so
    their translations are remembered."""
    return _JSONB_PARAM.sub(r"\1::text::jsonb", numbered_placeholders(sql))
