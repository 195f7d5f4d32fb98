"""Receiving River notifications on trio or asyncio: Postgres LISTEN, the SQLite outbox, or nothing.

Mirrors ``river_sync.notifier``. A notifier runs as a task,
``await nursery.start(notifier.run)``: ``start`` returns once the subscribed
topics are listened to (or raises if the first connection fails), and
cancelling the nursery stops it and closes its connection; nothing outlives
the nursery.

``subscribe(topic, target)`` takes a callback ``target(topic, payload)`` or a
channel that receives ``(topic, payload)`` tuples through ``send_nowait`` (an
AnyIO memory object send stream, or a ``trio.MemorySendChannel`` under trio). Delivery
goes through a bounded buffer to a dispatcher task; a full buffer (or a full
subscriber channel) drops the notification and counts it in ``dropped``, since
every consumer also polls. Notifications sent while a listener is disconnected
are lost; ``on_listening`` fires after each (re)connection so a consumer can
poll once to cover the gap.

The Postgres listener holds no thread: it waits for its socket with
``anyio.wait_readable`` and reads what arrived without blocking. Only
connecting, LISTEN/UNLISTEN and the ping go through a worker thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from river_anyio import _backend
from river_anyio.database import run_blocking
from river_anyio.executor import ThreadRunner
from river_db.listen_plan import ping_sql, reconcile_steps
from river_db.listen_probe import ListenProbe
from river_db.notify_settings import (
    BUFFER_SIZE,
    LISTENER_TIMEOUT,
    MAX_CHANNEL_BYTES,
    PING_INTERVAL,
    PROBE_TIMEOUT,
    SQLITE_POLL_INTERVAL,
    default_backoff,
)
from river_protocol.errors import RiverError, ValidationError
from river_protocol.intents import FetchNotifications, MaxNotificationId, Statement

if TYPE_CHECKING:
    import psycopg

    from river_anyio.database import AsyncDatabase

log = logging.getLogger(__name__)

NotifyCallback = Callable[[str, str], None]
Target = NotifyCallback | Any  # or a channel with send_nowait((topic, payload))

__all__ = [
    "BUFFER_SIZE",
    "PING_INTERVAL",
    "SQLITE_POLL_INTERVAL",
    "Notifier",
    "NotifierProtocol",
    "NullNotifier",
    "SQLiteNotifier",
    "Subscription",
    "default_backoff",
    "notifier_for",
]


class Subscription:
    """Handle returned by ``subscribe``; ``unsubscribe()`` is idempotent."""

    def __init__(self, owner: _Hub | None, topic: str, target: Target) -> None:
        self._owner = owner
        self.topic = topic
        self.target = target

    def unsubscribe(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._remove(self)


class NotifierProtocol(Protocol):
    dropped: int

    async def subscribe(self, topic: str, target: Target) -> Subscription: ...

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None: ...

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool: ...


def _validate_topic(topic: str) -> None:
    if not isinstance(topic, str) or not topic or "\x00" in topic:
        raise ValidationError(f"invalid notification topic {topic!r}: must be a non-empty string")
    if len(topic.encode()) > MAX_CHANNEL_BYTES:
        raise ValidationError(f"notification topic {topic!r} is longer than {MAX_CHANNEL_BYTES} bytes")


def _call_hook(hook: Callable[[], None] | None, name: str) -> None:
    if hook is None:
        return
    try:
        hook()
    except Exception:
        log.exception("%s: on_listening hook failed", name)


class NullNotifier:
    """Notifications off (poll-only mode): subscriptions never fire; ``run`` just waits."""

    dropped = 0

    async def subscribe(self, topic: str, target: Target) -> Subscription:
        _validate_topic(topic)
        await anyio.lowlevel.checkpoint()
        return Subscription(None, topic, target)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await anyio.sleep_forever()

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        await anyio.lowlevel.checkpoint()
        return True


class _Hub:
    """Subscriptions, the bounded buffer and the dispatcher task, shared by notifiers."""

    def __init__(self, *, buffer_size: int, name: str) -> None:
        if buffer_size < 1:
            raise ValidationError(f"buffer_size must be at least 1, got {buffer_size}")
        self._name = name
        self._subs: dict[str, list[Subscription]] = {}
        self._buffer_size = buffer_size
        self._send: MemoryObjectSendStream[tuple[str, str]] | None = None
        self._running = False
        self.dropped = 0

    # --- subscriptions

    async def subscribe(self, topic: str, target: Target) -> Subscription:
        """Deliver each notification on ``topic`` to ``target``; returns once the topic
        is listened to when the notifier is running (so a later NOTIFY is received)."""
        self._check_topic(topic)
        sub = Subscription(self, topic, target)
        subs = self._subs.setdefault(topic, [])
        first = not subs
        subs.append(sub)
        if first:
            await self._topics_changed()
        else:
            await anyio.lowlevel.checkpoint()
        return sub

    def _remove(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.topic, [])
        if sub in subs:
            subs.remove(sub)
        if not subs and sub.topic in self._subs:
            del self._subs[sub.topic]
            self._wake()

    def _topics(self) -> set[str]:
        return set(self._subs)

    def _check_topic(self, topic: str) -> None:
        _validate_topic(topic)

    async def _topics_changed(self) -> None:
        await anyio.lowlevel.checkpoint()

    def _wake(self) -> None:
        """Hook: the set of subscribed topics changed (no waiting)."""

    # --- buffer and dispatch

    def _enqueue(self, topic: str, payload: str) -> None:
        if self._send is None:
            return
        backend = _backend.current()
        try:
            self._send.send_nowait((topic, payload))
        except backend.would_block:
            self.dropped += 1
            log.warning("%s: dropping a %s notification, buffer full", self._name, topic)
        except backend.closed_channel:
            # The dispatcher has ended (the notifier is shutting down) while a poll or listen
            # still delivered: nobody is left to hand it to, and every consumer also polls.
            self.dropped += 1

    async def _dispatch(self, receive: MemoryObjectReceiveStream[tuple[str, str]]) -> None:
        async with receive:
            async for topic, payload in receive:
                for sub in list(self._subs.get(topic, ())):
                    self._deliver(sub, topic, payload)

    def _deliver(self, sub: Subscription, topic: str, payload: str) -> None:
        target = sub.target
        send_nowait = getattr(target, "send_nowait", None)
        if send_nowait is not None:
            backend = _backend.current()
            try:
                send_nowait((topic, payload))
            except backend.would_block:
                self.dropped += 1
                log.warning("%s: subscriber channel full, dropping a %s notification", self._name, topic)
            except backend.closed_channel:
                sub.unsubscribe()
            return
        try:
            target(topic, payload)
        except Exception:
            log.exception("%s: subscriber callback for %s failed", self._name, topic)

    async def _serve(self, body: Callable[[anyio.abc.TaskGroup], Any]) -> None:
        """Run the dispatcher and ``body(task_group)`` together; both end with the caller's group."""
        if self._running:
            raise RiverError(f"{self._name} is already running")
        self._running = True
        send, receive = anyio.create_memory_object_stream[tuple[str, str]](self._buffer_size)
        self._send = send
        try:
            try:
                async with anyio.create_task_group() as nursery:
                    nursery.start_soon(self._dispatch, receive)
                    try:
                        await body(nursery)
                    finally:
                        nursery.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # The nursery is an implementation detail: callers see the error itself.
                if len(group.exceptions) == 1:
                    raise group.exceptions[0] from None
                raise
        finally:
            self._send = None
            send.close()
            self._running = False


# ---------------------------------------------------------------- postgres


class Notifier(_Hub):
    """Postgres LISTEN on one dedicated autocommit connection, waited on without a thread.

    ``connect`` is a connection URL or an async function returning a new
    autocommit psycopg connection (``AsyncDatabase.connect_dedicated``).
    Channels are ``<schema>.<topic>`` with the configured schema or the
    connection's ``current_schema()``.
    """

    def __init__(
        self,
        connect: str | Callable[[], Any],
        *,
        schema: str | None = None,
        ping_interval: float = PING_INTERVAL,
        connect_timeout: float = LISTENER_TIMEOUT,
        backoff: Callable[[int], float] = default_backoff,
        buffer_size: int = BUFFER_SIZE,
        on_listening: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(buffer_size=buffer_size, name="river-notifier")
        if schema is not None:
            from river_protocol.dialects.common import validate_schema

            validate_schema(schema)
        if isinstance(connect, str):
            url = connect
            self._connect: Callable[[], Any] = lambda: _connect_url(url, connect_timeout)
        else:
            self._connect = connect
        self._schema = schema
        self._ping_interval = ping_interval
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._on_listening = on_listening
        self._listened: set[str] = set()
        self._prefix = ""
        # Set while the session waits for input; cancelling it makes the session reconcile.
        self._wait_scope: anyio.CancelScope | None = None
        self._waiters: list[anyio.Event] = []
        self._up = False
        # run()'s task_status until the first session listens (then started() is called).
        self._pending_start: anyio.abc.TaskStatus[None] | None = None
        self._run_scope: anyio.CancelScope | None = None
        self.reconnects = 0

    def _check_topic(self, topic: str) -> None:
        _validate_topic(topic)
        if self._schema is not None and len(f"{self._schema}.{topic}".encode()) > MAX_CHANNEL_BYTES:
            raise ValidationError(
                f"channel {self._schema}.{topic} is longer than Postgres' {MAX_CHANNEL_BYTES} bytes"
            )

    # --- subscriptions meet the listener

    def _wake(self) -> None:
        if self._wait_scope is not None:
            self._wait_scope.cancel()

    async def _topics_changed(self) -> None:
        if not self._up:
            # The next connection LISTENs to whatever is subscribed then.
            await anyio.lowlevel.checkpoint()
            return
        done = anyio.Event()
        self._waiters.append(done)
        self._wake()
        with anyio.move_on_after(self._connect_timeout):
            await done.wait()

    def _release_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()

    # --- lifecycle

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled. The first connection is made before ``started()``, so a
        configuration error surfaces from ``nursery.start``; later failures reconnect."""

        async def body(_group: anyio.abc.TaskGroup) -> None:
            conn = await self._connect_checked()
            with anyio.CancelScope() as self._run_scope:  # cancelled by a failed probe()
                await self._listen_forever(conn, task_status)

        await self._serve(body)

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        """Whether a notification sent to ourselves from another connection arrives within
        ``timeout`` seconds (``river_db.listen_probe``). False behind a pooler in transaction mode, and then
        ``run`` returns: a listener that hears nothing is closed. True when there was
        nothing to probe (not listening now, or no room for the probe's channel)."""
        probe = ListenProbe(timeout=timeout)
        prefix = self._prefix
        if not self._up or not prefix or not probe.fits(prefix):
            await anyio.lowlevel.checkpoint()
            return True
        arrived = threading.Event()  # waited on in real time, whatever clock the loop runs on

        def heard(topic: str, payload: str) -> None:
            if probe.answered_by(payload):
                arrived.set()

        sub = await self.subscribe(probe.topic, heard)
        try:
            conn = await self._connect()
            await run_blocking(lambda: probe.send(conn, prefix))
            await run_blocking(lambda: arrived.wait(probe.timeout))
        finally:
            sub.unsubscribe()
        if not arrived.is_set() and self._run_scope is not None:
            self._run_scope.cancel()
        return arrived.is_set()

    async def _connect_checked(self) -> Any:
        with anyio.fail_after(self._connect_timeout + 1):
            return await self._connect()

    async def _listen_forever(self, conn: Any, task_status: anyio.abc.TaskStatus[None]) -> None:
        attempt = 0
        self._pending_start = task_status
        while True:
            try:
                if conn is None:
                    conn = await self._connect_checked()
                    self.reconnects += 1
                await self._session(conn)
                error: Exception = RiverError("the listener session ended")
                healthy = True
            except Exception as exc:
                if self._pending_start is not None:
                    raise  # the first session never listened: a setup error for nursery.start
                error = exc
                healthy = self._up
            finally:
                self._up = False
                self._listened = set()
                self._release_waiters()
                if conn is not None:
                    _close(conn)
                conn = None
            attempt = 1 if healthy else attempt + 1
            delay = self._backoff(attempt)
            log.warning("river-notifier: listener failed (%s); reconnecting in %.2fs", error, delay)
            await anyio.sleep(delay)

    async def _session(self, conn: psycopg.Connection[Any]) -> None:
        runner = ThreadRunner(conn, kind="postgres")
        schema = self._schema
        if schema is None:
            rows = await runner.run_plan(_one(Statement("SELECT current_schema()")))
            if not rows or rows[0][0] is None:
                raise RiverError("current_schema() is NULL: configure a schema or fix search_path")
            schema = str(rows[0][0])
        self._prefix = schema + "."
        self._up = True
        await self._reconcile(runner)
        task_status, self._pending_start = self._pending_start, None
        if task_status is not None:
            task_status.started()
        _call_hook(self._on_listening, "river-notifier")
        next_ping = anyio.current_time() + self._ping_interval
        fd = conn.fileno()
        while True:
            self._drain(conn)
            await self._reconcile(runner)
            now = anyio.current_time()
            if now >= next_ping:
                # Notifications don't reset the timer: the ping also proves the
                # connection can still carry a request, not only receive. It is a LISTEN
                # repeated, so the connection still looks like a listener (river_db.listen_plan).
                ping = Statement(ping_sql(self._prefix, self._listened), fetch=False)
                with anyio.fail_after(self._connect_timeout):
                    await runner.run_plan(_one(ping))
                next_ping = now + self._ping_interval
                continue
            with anyio.CancelScope(deadline=next_ping) as scope:
                self._wait_scope = scope
                if self._waiters or self._topics() != self._listened:
                    scope.cancel()
                await anyio.wait_readable(fd)
            self._wait_scope = None

    async def _reconcile(self, runner: ThreadRunner) -> None:
        waiters, self._waiters = self._waiters, []
        try:
            for step in reconcile_steps(self._listened, self._topics()):
                await runner.run_plan(_one(Statement(step.sql(self._prefix), fetch=False)))
                if step.verb == "LISTEN":
                    self._listened.add(step.topic)
                else:
                    self._listened.discard(step.topic)
        finally:
            for event in waiters:
                event.set()

    def _drain(self, conn: psycopg.Connection[Any]) -> None:
        # notifies(timeout=0) reads what the socket holds without waiting, and first
        # returns anything psycopg queued while a LISTEN or ping ran in a thread.
        for note in conn.notifies(timeout=0):
            if not note.channel.startswith(self._prefix):
                continue
            topic = note.channel[len(self._prefix):]
            if topic in self._listened:
                self._enqueue(topic, note.payload)
        if conn.closed or conn.broken:
            raise RiverError("the listener connection was closed")


def _one(step: Statement) -> Any:
    rows = yield step
    return rows


def _close(conn: Any) -> None:
    # Closing sends one terminate message on a socket with room for it: no real wait.
    with suppress(Exception):
        conn.close()


async def _connect_url(url: str, timeout: float) -> Any:
    from river_db.connect import connect_dedicated

    return await run_blocking(lambda: connect_dedicated(url, {"connect_timeout": max(1, int(timeout))}))


# ---------------------------------------------------------------- sqlite


class SQLiteNotifier(_Hub):
    """Polls the ``river_notification`` outbox every 50 ms for rows past a cursor.

    The cursor starts at ``max(id)`` when listening begins (earlier rows are never
    delivered) and advances past every row read, subscribed topic or not.
    """

    def __init__(
        self,
        database: AsyncDatabase,
        *,
        poll_interval: float = SQLITE_POLL_INTERVAL,
        batch_size: int = 1000,
        backoff: Callable[[int], float] = default_backoff,
        buffer_size: int = BUFFER_SIZE,
        on_listening: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(buffer_size=buffer_size, name="river-sqlite-notifier")
        self._db = database
        self._poll_interval = poll_interval
        self._batch_size = batch_size
        self._backoff = backoff
        self._on_listening = on_listening

    async def _max_id(self) -> int:
        return int(await self._db.run(MaxNotificationId(), readonly=True) or 0)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read the starting cursor (raising if the outbox is unreadable), then poll until cancelled."""

        async def body(_group: anyio.abc.TaskGroup) -> None:
            cursor = await self._max_id()
            task_status.started()
            await self._poll_forever(cursor)

        await self._serve(body)

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        await anyio.lowlevel.checkpoint()
        return True  # the outbox is a table: it has no connection to lose notifications on

    async def _poll_forever(self, cursor: int | None) -> None:
        attempt = 0
        announced = False
        while True:
            try:
                if cursor is None:
                    # Like a reconnect on Postgres: what was sent meanwhile is skipped.
                    cursor = await self._max_id()
                    announced = False
                if not announced:
                    _call_hook(self._on_listening, "river-sqlite-notifier")
                    announced = True
                rows = await self._db.run(FetchNotifications(after_id=cursor, limit=self._batch_size),
                                          readonly=True)
                attempt = 0
            except Exception as exc:
                attempt += 1
                cursor = None
                delay = self._backoff(attempt)
                log.warning("river-sqlite-notifier: poll failed (%s); retrying in %.2fs", exc, delay)
                await anyio.sleep(delay)
                continue
            wanted = self._topics()
            for row in rows:
                cursor = max(cursor, int(row.id))
                if row.topic in wanted:
                    self._enqueue(row.topic, row.payload)
            if len(rows) < self._batch_size:
                await anyio.sleep(self._poll_interval)


# ---------------------------------------------------------------- choice


def notifier_for(database: AsyncDatabase, *, enabled: bool = True, listen_url: str | None = None,
                 **options: Any) -> NotifierProtocol:
    """LISTEN on Postgres (on ``listen_url`` when given), the outbox on SQLite, ``NullNotifier``
    when ``enabled`` is false."""
    if not enabled:
        return NullNotifier()
    if database.dialect.name == "postgres":
        return Notifier(listen_url or database.connect_dedicated, schema=database.dialect.schema, **options)
    return SQLiteNotifier(database, **options)

