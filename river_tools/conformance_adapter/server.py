"""The protocol's methods, each driving ``river_sync``'s client.

One ``Adapter`` serves one process: a connection pool per schema (Postgres
connections carry the harness's ``application_name``), an insert-only client
per schema for every request but the worker's, named open transactions, the
barriers, and at most one running worker client (``start`` .. ``stop``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any, cast
from urllib.parse import quote

from river_db.caller_tx import executor_for_caller_tx
from river_db.migrator import Migrator
from river_protocol.client_core import EventKind, InsertManyParams
from river_protocol.errors import JobNotFoundError, QueueNotFoundError, ValidationError
from river_protocol.go_job_list import go_job_list_cursor, go_list_jobs_intent
from river_protocol.intents import Notify
from river_protocol.machines.notifications import TOPIC_LEADERSHIP, build_request_resign
from river_protocol.options import InsertOpts
from river_protocol.states import JobState
from river_protocol.unique import UniqueOpts
from river_sync import Client, Database
from river_sync.events import Subscription
from river_tools.conformance_adapter import params as p
from river_tools.conformance_adapter.jsonrpc import (
    METHOD_NOT_FOUND,
    AdapterError,
    InvalidParams,
    NotFound,
    Rejected,
    dumps,
)
from river_tools.conformance_adapter.normalize import has_inexact_numbers, protocol_job
from river_tools.conformance_adapter.worker import (
    Barriers,
    EchoArgs,
    EchoWorker,
    Stats,
    client_settings,
)

log = logging.getLogger(__name__)

IMPLEMENTATION = "python"
DRIVERS = ("postgres", "sqlite")
POOL_SIZE = 8  # plus the worker client's listener: River's adapters hold at most 10 connections
SCHEMA_POOL_SIZE = 1  # a schema named by a request, besides the URL's own
SCHEMA_POOLS_KEPT = 2
STOP_TIMEOUT = 10.0  # seconds a graceful stop lets jobs finish before cancelling them
QUEUE_ROW_WAIT = 10.0  # seconds start waits for its producers' queue rows
EVENT_KINDS = (
    EventKind.JOB_CANCELLED, EventKind.JOB_COMPLETED, EventKind.JOB_FAILED, EventKind.JOB_SNOOZED,
    EventKind.QUEUE_PAUSED, EventKind.QUEUE_RESUMED,
)


def implementation_version() -> str:
    try:
        return package_version("river-python")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def with_application_name(url: str, name: str) -> str:
    """``url`` with ``application_name`` added to its query (a Postgres URL)."""
    if not name:
        return url
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}application_name={quote(name, safe='')}"


class OpenTx:
    """A named transaction the harness opened with ``tx_begin``: a connection held inside BEGIN."""

    def __init__(self, database: Database) -> None:
        self._stack = contextlib.ExitStack()
        self._postgres = database.dialect.name == "postgres"
        try:
            executor = self._stack.enter_context(database.executor())
            self.conn = executor.conn
            if self._postgres:
                self._stack.enter_context(self.conn.transaction())
            else:
                self.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._stack.close()
            raise

    def end(self, commit: bool) -> None:
        """Commit or roll back; the connection goes back to the pool either way."""
        with self._stack:
            if self._postgres:
                if not commit:
                    import psycopg

                    # The transaction block swallows its own Rollback: the pop closes it rolled back.
                    self._stack.pop_all().__exit__(psycopg.Rollback, psycopg.Rollback(), None)
                return
            if self.conn.in_transaction:
                self.conn.execute("COMMIT" if commit else "ROLLBACK")


@dataclass
class RunningClient:
    client: Client
    stats: Stats
    subscription: Subscription
    claim_barrier: str
    schema: str


class Adapter:
    """Handles one request at a time (``handle``), as the harness sends them."""

    def __init__(self, *, driver: str, database_url: str, application_name: str = "") -> None:
        if driver not in DRIVERS:
            raise ValueError(f"RIVER_CONFORMANCE_DRIVER must be one of {', '.join(DRIVERS)}, got {driver!r}")
        if not database_url:
            raise ValueError("RIVER_CONFORMANCE_DATABASE_URL is required")
        self.driver = driver
        self._url = with_application_name(database_url, application_name) if driver == "postgres" \
            else database_url
        self._databases: dict[str, Database] = {}
        self._clients: dict[str, Client] = {}
        self._txs: dict[str, OpenTx] = {}
        self.barriers = Barriers()
        self._running: RunningClient | None = None
        self._methods: dict[str, Callable[[Any], Any]] = {
            "cancel": self.cancel, "handshake": self.handshake, "insert": self.insert, "list": self.list,
            "migrate": self.migrate, "queue": self.queue, "release": self.release,
            "request_resign": self.request_resign, "retry": self.retry, "start": self.start,
            "stats": self.stats, "stop": self.stop, "tx_begin": self.tx_begin, "tx_end": self.tx_end,
        }

    # ---------------------------------------------------------------- plumbing

    def handle(self, method: str, raw_params: Any) -> Any:
        handler = self._methods.get(method)
        if handler is None:
            raise AdapterError(f"unknown method {method!r}", METHOD_NOT_FOUND)
        try:
            return handler(raw_params)
        except JobNotFoundError as exc:
            raise NotFound(str(exc)) from exc
        except QueueNotFoundError as exc:
            raise NotFound(str(exc)) from exc

    def database(self, schema: str = "") -> Database:
        """The pool for ``schema`` ("" is the URL's own, through its search path).

        Pools of named schemas hold one connection each, and only the most recent
        few stay open (the running client's is kept), so a scenario walking through
        many schemas stays within the protocol's ten connections.
        """
        database = self._databases.pop(schema, None)
        if database is None:
            if schema and self.driver == "sqlite":
                raise Rejected("a schema is a Postgres notion: SQLite requests take none")
            if self.driver == "postgres":
                database = Database.from_url(self._url, schema=schema or None,
                                             pool_size=SCHEMA_POOL_SIZE if schema else POOL_SIZE)
            else:
                database = Database.from_sqlite_path(self._url)
        self._databases[schema] = database  # most recently used last
        self._close_idle_schema_pools()
        return database

    def _close_idle_schema_pools(self) -> None:
        named = [name for name in self._databases if name]
        in_use = self._running.schema if self._running is not None else None
        for name in named[:max(0, len(named) - SCHEMA_POOLS_KEPT)]:
            if name == in_use:
                continue
            client = self._clients.pop(name, None)
            if client is not None:
                client.close()
            self._databases.pop(name).close()

    def client(self, schema: str = "") -> Client:
        """The insert-only client for ``schema``."""
        client = self._clients.get(schema)
        if client is None:
            client = self._clients[schema] = Client(self.database(schema), skip_unknown_job_check=True)
        return client

    def tx(self, name: str) -> Any:
        """The connection of the open transaction ``name``, or None when ``name`` is empty."""
        if not name:
            return None
        open_tx = self._txs.get(name)
        if open_tx is None:
            raise NotFound(f"transaction {name!r} is not open")
        return open_tx.conn

    def jobs(self, rows: Sequence[Any], schema: str, tx: Any) -> list[dict[str, Any]]:
        """Rows in the protocol's form. The row reader keeps attempt error times to microseconds
        and metadata numbers as floats, so jobs with errors or with a number no float holds
        have those columns read again as stored text, in the same transaction."""
        reread = [row.id for row in rows if row.errors or has_inexact_numbers(row.metadata)]
        texts = self._stored_texts(reread, schema, tx) if reread else {}
        return [protocol_job(row, *texts.get(row.id, (None, None))) for row in rows]

    def _stored_texts(self, ids: list[int], schema: str, tx: Any) -> dict[int, tuple[str, str]]:
        """``{id: (metadata, errors)}`` as the database stores them, as JSON text."""
        database = self.database(schema)
        table = f'"{schema}".river_job' if schema else "river_job"  # as the dialects qualify it
        if self.driver == "postgres":
            columns, marker = "metadata::text, coalesce(to_json(errors)::text, '[]')", "%s"
        else:
            columns, marker = "json(metadata), coalesce(json(errors), '[]')", "?"
        query = f"SELECT id, {columns} FROM {table} WHERE id IN ({', '.join([marker] * len(ids))})"
        with contextlib.ExitStack() as stack:
            conn = tx if tx is not None else stack.enter_context(database.executor(readonly=True)).conn
            rows = conn.execute(query, ids).fetchall()
        return {int(row[0]): (str(row[1]), str(row[2])) for row in rows}

    def close(self) -> None:
        """Stop the worker client, roll back open transactions, close the pools."""
        if self._running is not None:
            with contextlib.suppress(Exception):
                self._stop_running(cancel=True)
        for name in list(self._txs):
            with contextlib.suppress(Exception):
                self._txs.pop(name).end(commit=False)
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                client.close()
        for database in self._databases.values():
            with contextlib.suppress(Exception):
                database.close()

    # ---------------------------------------------------------------- methods

    def handshake(self, raw: Any) -> dict[str, Any]:
        p.decode(p.Empty, raw)
        return {"driver": self.driver, "implementation": IMPLEMENTATION, "version": implementation_version()}

    def migrate(self, raw: Any) -> dict[str, Any]:
        params = p.decode(p.MigrateParams, raw)
        if params.direction not in ("", "up", "down"):
            raise InvalidParams(f"unknown direction {params.direction!r}")
        with self.database(params.schema).executor() as executor:
            migrator = Migrator(executor.conn, schema=params.schema or None)
            result = migrator.migrate(params.direction or "up", target_version=params.target_version)
        return {"versions": [version.version for version in result.versions]}

    def insert(self, raw: Any) -> dict[str, Any]:
        params = p.decode(p.InsertParams, raw)
        client, tx = self.client(params.schema), self.tx(params.tx)
        items = [InsertManyParams(EchoArgs(job.behavior, job.duration_ms, job.message),
                                  _insert_opts(job.opts)) for job in params.jobs]
        results = client.insert_many(items, tx=tx)  # an empty batch is River's refusal too
        jobs = self.jobs([result.job for result in results], params.schema, tx)
        return {"results": [{"job": job, "unique_skipped_as_duplicate": result.unique_skipped_as_duplicate}
                            for job, result in zip(jobs, results, strict=True)]}

    def cancel(self, raw: Any) -> dict[str, Any]:
        params = p.decode(p.JobParams, raw)
        tx = self.tx(params.tx)
        return self.jobs([self.client(params.schema).jobs.cancel(params.id, tx=tx)], params.schema, tx)[0]

    def retry(self, raw: Any) -> dict[str, Any]:
        params = p.decode(p.JobParams, raw)
        tx = self.tx(params.tx)
        return self.jobs([self.client(params.schema).jobs.retry(params.id, tx=tx)], params.schema, tx)[0]

    def list(self, raw: Any) -> dict[str, Any]:
        """River Go's ``JobList``, cursors included (``river_protocol.go_job_list``)."""
        params = p.decode(p.ListParams, raw)
        if params.direction not in ("", "asc", "desc"):
            raise InvalidParams(f"unknown direction {params.direction!r}")
        try:
            intent = go_list_jobs_intent(
                states=params.states or None, kinds=params.kinds or None, queues=params.queues or None,
                ids=params.ids or None, priorities=params.priorities or None,
                tags_all=params.tags_all or None,
                metadata=None if params.metadata is None else dumps(params.metadata).encode(),
                order_by=params.order_by or "id", descending=params.direction == "desc",
                limit=params.limit or 100, after=params.after or None,
            )
        except ValidationError as exc:
            # Go's adapter answers a cursor it cannot read as invalid params, the rest as River's refusal.
            raise (InvalidParams if "cursor" in str(exc) else Rejected)(str(exc)) from exc
        tx = self.tx(params.tx)
        database = self.database(params.schema)
        if tx is not None:
            rows = executor_for_caller_tx(tx, schema=params.schema or None, expect=self.driver).run(intent)
        else:
            with database.executor(readonly=True) as executor:
                rows = executor.run(intent)
        cursor = (go_job_list_cursor(rows[-1], params.order_by or "id", states=params.states or None)
                  if rows else None)
        return {"cursor": cursor, "jobs": self.jobs(rows, params.schema, tx)}

    def queue(self, raw: Any) -> None:
        params = p.decode(p.QueueParams, raw)
        client, tx = self.client(params.schema), self.tx(params.tx)
        if params.action in ("pause", "resume"):
            change = client.queues.pause if params.action == "pause" else client.queues.resume
            if change(params.name, tx=tx) == 0 and params.name != "*":
                client.queues.get(params.name, tx=tx)  # QueueNotFoundError when there is none
        elif params.action == "update":
            metadata = None if params.metadata is None else dumps(params.metadata)
            client.queues.update(params.name, metadata=metadata, tx=tx)
        else:
            raise InvalidParams(f"unknown queue action {params.action!r}")

    def release(self, raw: Any) -> None:
        self.barriers.release(p.decode(p.ReleaseParams, raw).name)

    def request_resign(self, raw: Any) -> None:
        params = p.decode(p.RequestResignParams, raw)
        tx = self.tx(params.tx)
        intent = Notify(TOPIC_LEADERSHIP, (build_request_resign(),))
        database = self.database(params.schema)
        if tx is not None:
            executor_for_caller_tx(tx, schema=params.schema or None, expect=self.driver).run(intent)
            return
        with database.transaction() as executor:
            executor.run(intent)

    def start(self, raw: Any) -> None:
        params = p.decode(p.StartParams, raw)
        if self._running is not None:
            raise Rejected("a client is already running")
        stats = Stats()
        settings = client_settings(params, EchoWorker(self.barriers, stats), stats)
        client = Client(self.database(params.schema), schema=params.schema or None, **settings)
        if params.claim_barrier:
            client.testing_claim_hook = _hold_first_claim(self.barriers, params.claim_barrier)
        subscription = client.subscribe(EVENT_KINDS, maxsize=100_000)
        threading.Thread(target=_record_events, args=(subscription, stats), name="conformance-events",
                         daemon=True).start()
        try:
            client.start()
        except BaseException:
            subscription.close()
            raise
        self._running = RunningClient(client, stats, subscription, params.claim_barrier, params.schema)
        self._await_queue_rows(client, settings["queues"])

    @staticmethod
    def _await_queue_rows(client: Client, queues: Sequence[str]) -> None:
        """Return once every queue's row exists, as River Go's ``Start`` does: its producers
        upsert their queues before it returns, and scenarios pause a queue right after ``start``.
        ``river_sync``'s producers upsert on their own threads just after ``start()``."""
        deadline = time.monotonic() + QUEUE_ROW_WAIT
        for name in queues:
            while True:
                try:
                    client.queues.get(name)
                    break
                except QueueNotFoundError:
                    if time.monotonic() > deadline:
                        raise Rejected(f"queue {name!r} was not created within {QUEUE_ROW_WAIT} s") from None
                    time.sleep(0.005)

    def stats(self, raw: Any) -> dict[str, Any]:
        p.decode(p.Empty, raw)
        if self._running is None:
            raise Rejected("no client is running")
        return self._running.stats.snapshot(self._running.client.leadership_terms)

    def stop(self, raw: Any) -> None:
        params = p.decode(p.StopParams, raw)
        if self._running is None:
            raise Rejected("no client is running")
        self._stop_running(cancel=params.cancel)

    def _stop_running(self, *, cancel: bool) -> None:
        running, self._running = self._running, None
        assert running is not None
        if running.claim_barrier:  # a claim held on its barrier would keep the client from stopping
            self.barriers.release(running.claim_barrier)
        try:
            if cancel:
                running.client.stop_and_cancel()
            else:
                running.client.stop(timeout=timedelta(seconds=STOP_TIMEOUT))
        finally:
            running.subscription.close()

    def tx_begin(self, raw: Any) -> None:
        params = p.decode(p.TxParams, raw)
        if not params.tx:
            raise InvalidParams("tx is required")
        if params.tx in self._txs:
            raise Rejected(f"transaction {params.tx!r} is already open")
        self._txs[params.tx] = OpenTx(self.database())

    def tx_end(self, raw: Any) -> None:
        params = p.decode(p.TxEndParams, raw)
        self.tx(params.tx)
        self._txs.pop(params.tx).end(params.commit)


def _insert_opts(opts: p.InsertOptsParams | None) -> InsertOpts | None:
    if opts is None:
        return None
    unique = None
    if opts.unique is not None:
        u = opts.unique
        try:
            unique = UniqueOpts(
                by_args=u.by_args,
                by_period=timedelta(milliseconds=u.by_period_ms) if u.by_period_ms else None,
                # Names as given: UniqueOpts refuses an unknown one in River's words.
                by_queue=u.by_queue, by_state=cast("tuple[JobState, ...]", u.by_state) or None,
                exclude_kind=u.exclude_kind,
            )
        except ValidationError as exc:
            raise Rejected(str(exc)) from exc
    return InsertOpts(
        max_attempts=opts.max_attempts, priority=opts.priority, queue=opts.queue,
        scheduled_at=opts.scheduled_at, tags=opts.tags,
        metadata=None if opts.metadata is None else dumps(opts.metadata).encode(),
        pending=opts.pending, unique_opts=unique,
    )


def _hold_first_claim(barriers: Barriers, name: str) -> Callable[[str, Sequence[Any]], None]:
    """The claim hook of ``start``'s ``claim_barrier``: the first claim waits for ``name``."""
    lock = threading.Lock()
    held = False

    def hook(queue: str, jobs: Sequence[Any]) -> None:
        nonlocal held
        with lock:  # producers of several queues may claim at once: only the first claim waits
            first, held = not held, True
        if first:
            barriers.wait(name)

    return hook


def _record_events(subscription: Subscription, stats: Stats) -> None:
    for event in subscription:
        stats.event(event.kind.value)
