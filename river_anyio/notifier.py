"""Receiving River notifications: Postgres LISTEN, the SQLite outbox, or nothing.

One source for both clients: tools/async_to_sync.py generates the threaded client's notifier
from the async client's; they differ only in the ``if True:  # ASYNC`` branches and in
``_backend``'s notifier section. On an event loop (trio or asyncio) a notifier runs as a
task, ``await nursery.start(notifier.run)``: ``start`` returns once the subscribed topics are
listened to (or raises if the first connection fails), and cancelling the nursery stops it and
closes its connection. In river_sync, ``start()`` does the same with a listener thread and a
dispatcher thread, which ``stop()`` joins.

``subscribe(topic, target)`` takes a callback ``target(topic, payload)`` (or, on a loop, a
channel that receives ``(topic, payload)`` tuples through ``send_nowait``: an AnyIO memory
object send stream, or a ``trio.MemorySendChannel`` under trio). Delivery goes through a bounded
buffer to the dispatcher; a full buffer (or a full subscriber channel) drops the notification
and counts it in ``dropped``, since every consumer also polls. Notifications sent while a
listener is disconnected are lost; ``on_listening`` fires after each (re)connection so a
consumer can poll once to cover the gap.

The Postgres listener waits for its socket (the loop's ``wait_readable``, or ``select`` in
river_sync's thread) and reads what arrived without blocking; a topic change cuts the wait
short. The last statement on the listen connection is always a LISTEN
(``river_db.listen_plan``), so River's tools see a listener.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol, Self

import anyio
import anyio.abc

from river_anyio import _backend
from river_anyio.executor import ThreadRunner
from river_db.executor import execute_step
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
Target = NotifyCallback | Any  # or, on a loop, a channel with send_nowait((topic, payload))

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
    dropped: int  # notifications lost to a full buffer

    async def subscribe(self, topic: str, target: Target) -> Subscription: ...

    if True:  # ASYNC
        async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                      ) -> None: ...
    else:
        def start(self) -> None: ...

        def stop(self) -> None: ...

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
    """Notifications off (poll-only mode): subscriptions never fire."""

    dropped = 0

    async def subscribe(self, topic: str, target: Target) -> Subscription:
        _validate_topic(topic)
        await _backend.checkpoint()
        return Subscription(None, topic, target)

    if True:  # ASYNC
        async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            """Wait until cancelled."""
            task_status.started()
            await anyio.sleep_forever()
    else:
        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        await _backend.checkpoint()
        return True


class _Hub:
    """Subscriptions, the bounded buffer and its dispatcher, shared by notifiers."""

    def __init__(self, *, buffer_size: int, name: str) -> None:
        if buffer_size < 1:
            raise ValidationError(f"buffer_size must be at least 1, got {buffer_size}")
        self._name = name
        self._subs: dict[str, list[Subscription]] = {}
        # river_sync's subscribers, listener and dispatcher are threads; on a loop it is never contended.
        self._subs_lock = threading.Lock()
        self._mailbox = _backend.Mailbox[tuple[str, str]](buffer_size, self._dispatch)
        self._stop = _backend.Stop()
        self.dropped = 0
        if True:  # ASYNC
            self._running = False
        else:
            self._lifecycle_lock = threading.Lock()
            self._thread: threading.Thread | None = None
            self._left: threading.Thread | None = None  # stopped from inside, maybe still running

    # --- subscriptions

    async def subscribe(self, topic: str, target: Target) -> Subscription:
        """Deliver each notification on ``topic`` to ``target``; returns once the topic
        is listened to when the notifier is running (so a later NOTIFY is received)."""
        self._check_topic(topic)
        sub = Subscription(self, topic, target)
        with self._subs_lock:
            subs = self._subs.setdefault(topic, [])
            first = not subs
            subs.append(sub)
        if first:
            await self._topics_changed()
        else:
            await _backend.checkpoint()
        return sub

    def _remove(self, sub: Subscription) -> None:
        with self._subs_lock:
            subs = self._subs.get(sub.topic, [])
            if sub in subs:
                subs.remove(sub)
            last = not subs and sub.topic in self._subs
            if last:
                del self._subs[sub.topic]
        if last:
            if True:  # ASYNC
                self._wake()  # unsubscribe() cannot wait on a loop: the listener UNLISTENs soon
            else:
                self._topics_changed()  # returns once the listener UNLISTENed

    def _topics(self) -> set[str]:
        with self._subs_lock:
            return set(self._subs)

    def _check_topic(self, topic: str) -> None:
        _validate_topic(topic)

    async def _topics_changed(self) -> None:
        """Hook: the set of subscribed topics changed (the listener waits until it LISTENs)."""
        await _backend.checkpoint()

    def _wake(self) -> None:
        """Hook: the set of subscribed topics changed (no waiting)."""

    # --- buffer and dispatch

    def _enqueue(self, topic: str, payload: str) -> None:
        answer = self._mailbox.put((topic, payload))
        if answer == _backend.TAKEN:
            return
        self.dropped += 1
        if answer == _backend.FULL:
            log.warning("%s: dropping a %s notification, buffer full", self._name, topic)
        # CLOSED: the dispatcher has ended (the notifier is shutting down) while a poll or listen
        # still delivered: nobody is left to hand it to, and every consumer also polls.

    def _dispatch(self, item: tuple[str, str]) -> None:
        topic, payload = item
        with self._subs_lock:
            subs = list(self._subs.get(topic, ()))
        for sub in subs:
            self._deliver(sub, topic, payload)

    def _deliver(self, sub: Subscription, topic: str, payload: str) -> None:
        target = sub.target
        if True:  # ASYNC
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

    # --- lifecycle: _begin() (raising a setup error to the caller), then _forever() in the background

    _ROLE = "run"  # the background thread's role, in its name (river_sync)

    async def _begin(self) -> Any:
        """The first step, whose error the caller sees (a bad URL, an unreadable outbox)."""
        raise NotImplementedError

    async def _forever(self, first: Any) -> None:
        """Listen or poll until stopped, starting from what ``_begin`` returned."""
        raise NotImplementedError

    if True:  # ASYNC
        async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            """Begin before ``started()`` (so a setup error surfaces from ``nursery.start``), then
            listen or poll until cancelled, the dispatcher beside; both end with the caller's task group."""
            if self._running:
                raise RiverError(f"{self._name} is already running")
            self._running = True

            async def body() -> None:
                first = await self._begin()
                self._starting(task_status)
                await self._forever(first)

            try:
                await self._mailbox.serve(body)
            finally:
                self._running = False

        def _starting(self, task_status: anyio.abc.TaskStatus[None]) -> None:
            """Begun: the poller is started now (the listener once its first session listens)."""
            task_status.started()
    else:
        def start(self) -> None:
            """Begin (raising what that raises) and listen or poll in a background thread;
            returns once the subscribed topics are listened to. Idempotent while running."""
            with self._lifecycle_lock:
                if self._thread is not None:
                    return
                # Threads a stop() from their own callback left running end first (their loops
                # see the stop flag, which this start clears): two would listen, or dispatch.
                _backend.wait_ended(self._left, self._name)
                self._left = None
                self._mailbox.wait_stopped(self._name)
                first = self._begin()
                self._stop.clear()
                self._mailbox.start(f"{self._name}-dispatch")
                ready = self._starting()
                self._thread = threading.Thread(target=self._forever, args=(first,),
                                                name=f"{self._name}-{self._ROLE}", daemon=True)
                self._thread.start()
            if ready is not None:
                ready()

        def _starting(self) -> Callable[[], Any] | None:
            """Just before the thread starts; what ``start`` then waits with, or None."""
            return None

        def stop(self) -> None:
            """Stop, and join the background and dispatcher threads; from a callback in one of
            them, that thread ends once the callback returns, and ``start()`` waits for it (and
            is refused from it)."""
            with self._lifecycle_lock:
                thread, self._thread = self._thread, None
                if thread is None:
                    return
                self._stop.set()
                self._wake()
                self._left = _backend.join(thread)
                self._mailbox.stop()
                self._stopped()

        def _stopped(self) -> None:
            """After both threads ended."""

        def __enter__(self) -> Self:
            self.start()
            return self

        def __exit__(self, *exc: object) -> None:
            self.stop()


# ---------------------------------------------------------------- postgres


class Notifier(_Hub):
    """Postgres LISTEN on one dedicated autocommit connection.

    ``connect`` is a connection URL or a function, called with no arguments, that opens a new
    autocommit psycopg connection, such as ``AsyncDatabase.connect_dedicated``: on a loop an async
    function (its result is awaited), in river_sync a plain one. Channels are ``<schema>.<topic>``
    with the configured schema or the connection's ``current_schema()``.
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
        # The socket wait a topic change cuts short, so that the session reconciles.
        self._socket_wait = _backend.SocketWait()
        self._state_lock = threading.Lock()  # guards _up and _waiters (river_sync: across threads)
        self._waiters: list[Any] = []  # _backend.Events set once the listener reconciled
        # True while a session listens (river_sync: from start() on): subscribers then wait for a LISTEN.
        self._up = False
        self.reconnects = 0
        if True:  # ASYNC
            # run()'s task_status until the first session listens (then started() is called).
            self._pending_start: anyio.abc.TaskStatus[None] | None = None
            self._run_scope: anyio.CancelScope | None = None

    def _check_topic(self, topic: str) -> None:
        _validate_topic(topic)
        if self._schema is not None and len(f"{self._schema}.{topic}".encode()) > MAX_CHANNEL_BYTES:
            raise ValidationError(
                f"channel {self._schema}.{topic} is longer than Postgres' {MAX_CHANNEL_BYTES} bytes"
            )

    # --- subscriptions meet the listener

    def _wake(self) -> None:
        self._socket_wait.wake()

    def _in_listener(self) -> bool:
        """Whether this is the listener (an on_listening hook subscribing): it must not wait for itself."""
        if True:  # ASYNC
            return False  # the hook is called synchronously: it cannot await subscribe()
        else:
            return self._thread is threading.current_thread()

    async def _topics_changed(self) -> None:
        """Have the listener LISTEN/UNLISTEN now and wait until it did, so a notification sent
        after ``subscribe`` returns is received."""
        done = _backend.Event()
        with self._state_lock:
            waiting = self._up and not self._in_listener()
            if waiting:
                self._waiters.append(done)
                self._wake()
        if not waiting:
            # The next connection LISTENs to whatever is subscribed then.
            await _backend.checkpoint()
            return
        await _backend.wait_event(done, self._connect_timeout)

    def _release_waiters(self) -> None:
        with self._state_lock:
            waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()

    # --- lifecycle (_Hub's, with these hooks)

    _ROLE = "listen"

    async def _begin(self) -> Any:
        return await self._connect_checked()

    if True:  # ASYNC
        def _starting(self, task_status: anyio.abc.TaskStatus[None]) -> None:
            self._pending_start = task_status  # started() once the first session listens
    else:
        def _starting(self) -> Callable[[], Any] | None:
            self._socket_wait.open()
            listening = _backend.Event()
            with self._state_lock:
                self._up = True  # connected: subscribers wait for the first LISTEN
                self._waiters.append(listening)
            # Set once the topics subscribed before start() are LISTENed (or the session ended).
            return lambda: listening.wait(self._connect_timeout)

        def _stopped(self) -> None:
            self._socket_wait.close()

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        """Whether a notification sent to ourselves from another connection arrives within
        ``timeout`` seconds (``river_db.listen_probe``). False behind a pooler in transaction
        mode (and then, on a loop, ``run`` returns: a listener that hears nothing is closed;
        river_sync's client stops it). True when there was nothing to probe (not listening
        now, or no room for the probe's channel)."""
        probe = ListenProbe(timeout=timeout)
        with self._state_lock:
            up, prefix = self._up, self._prefix
        if not up or not prefix or not probe.fits(prefix):
            await _backend.checkpoint()
            return True
        arrived = threading.Event()  # waited on in real time, whatever clock a loop runs on

        def heard(topic: str, payload: str) -> None:
            if probe.answered_by(payload):
                arrived.set()

        sub = await self.subscribe(probe.topic, heard)
        try:
            conn = await self._connect()
            try:
                await _backend.run_blocking(lambda: probe.send(conn, prefix))  # closes conn
            except BaseException:
                _close(conn)  # cancelled before the send began (a cancel met during the connect)
                raise
            await _backend.run_blocking(lambda: arrived.wait(probe.timeout))
        finally:
            sub.unsubscribe()
        if True:  # ASYNC
            if not arrived.is_set() and self._run_scope is not None:
                self._run_scope.cancel()
        return arrived.is_set()

    async def _connect_checked(self) -> Any:
        if True:  # ASYNC
            with anyio.fail_after(self._connect_timeout + 1):
                return await self._connect()
        else:
            return self._connect()  # its connect_timeout bounds it

    async def _forever(self, first: Any) -> None:
        if True:  # ASYNC
            with anyio.CancelScope() as self._run_scope:  # cancelled by a failed probe()
                await self._listen_forever(first)
        else:
            self._listen_forever(first)

    async def _listen_forever(self, conn: Any) -> None:
        attempt = 0
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = await self._connect_checked()
                    self.reconnects += 1
                await self._session(conn)
                error: Exception = RiverError("the listener session ended")
                healthy = True
            except Exception as exc:
                if True:  # ASYNC
                    if self._pending_start is not None:
                        raise  # the first session never listened: a setup error for nursery.start
                error = exc
                healthy = self._up
            finally:
                with self._state_lock:
                    self._up = False
                self._listened = set()
                self._release_waiters()  # subscribers waiting for a LISTEN get it on the next connection
                if conn is not None:
                    _close(conn)
                conn = None
            if self._stop.is_set():
                break
            attempt = 1 if healthy else attempt + 1
            delay = self._backoff(attempt)
            log.warning("river-notifier: listener failed (%s); reconnecting in %.2fs", error, delay)
            await self._stop.sleep(delay)

    async def _session(self, conn: psycopg.Connection[Any]) -> None:
        runner = _runner(conn)
        schema = self._schema
        if schema is None:
            rows = await _run(runner, Statement("SELECT current_schema()"))
            if not rows or rows[0][0] is None:
                raise RiverError("current_schema() is NULL: configure a schema or fix search_path")
            schema = str(rows[0][0])
        self._prefix = schema + "."
        with self._state_lock:
            self._up = True
        await self._reconcile(runner)
        if True:  # ASYNC
            task_status, self._pending_start = self._pending_start, None
            if task_status is not None:
                task_status.started()
        _call_hook(self._on_listening, "river-notifier")
        next_ping = _backend.current_time() + self._ping_interval
        fd = conn.fileno()
        while not self._stop.is_set():
            self._drain(conn)
            await self._reconcile(runner)
            now = _backend.current_time()
            if now >= next_ping:
                # Notifications don't reset the timer: the ping also proves the
                # connection can still carry a request, not only receive. It is a LISTEN
                # repeated, so the connection still looks like a listener (river_db.listen_plan).
                ping = Statement(ping_sql(self._prefix, self._listened), fetch=False)
                if True:  # ASYNC
                    with anyio.fail_after(self._connect_timeout):
                        await _run(runner, ping)
                else:
                    _run(runner, ping)
                next_ping = now + self._ping_interval
                continue
            due = bool(self._waiters) or self._topics() != self._listened  # a wake came before the wait
            await self._socket_wait.wait(fd, next_ping, skip=due)

    async def _reconcile(self, runner: Any) -> None:
        with self._state_lock:
            waiters, self._waiters = self._waiters, []
        try:
            for step in reconcile_steps(self._listened, self._topics()):
                await _run(runner, Statement(step.sql(self._prefix), fetch=False))
                if step.verb == "LISTEN":
                    self._listened.add(step.topic)
                else:
                    self._listened.discard(step.topic)
        finally:
            for event in waiters:
                event.set()

    def _drain(self, conn: psycopg.Connection[Any]) -> None:
        # notifies(timeout=0) reads what the socket holds without waiting, and first
        # returns anything psycopg queued while a LISTEN or ping ran.
        for note in conn.notifies(timeout=0):
            if not note.channel.startswith(self._prefix):
                continue
            topic = note.channel[len(self._prefix):]
            if topic in self._listened:
                self._enqueue(topic, note.payload)
        if conn.closed or conn.broken:
            raise RiverError("the listener connection was closed")


if True:  # ASYNC
    def _runner(conn: Any) -> Any:
        return ThreadRunner(conn, kind="postgres")

    async def _run(runner: Any, statement: Statement) -> list[tuple[Any, ...]]:
        """``statement`` on the listen connection, in a worker thread a cancellation interrupts."""
        return await runner.run_plan(_one(statement))  # type: ignore[no-any-return]

    def _one(step: Statement) -> Any:
        rows = yield step
        return rows
else:
    def _runner(conn: Any) -> Any:
        return conn

    def _run(runner: Any, statement: Statement) -> list[tuple[Any, ...]]:
        """``statement`` on the listen connection, in the listener's thread."""
        return execute_step(runner, statement)


def _close(conn: Any) -> None:
    # Closing sends one terminate message on a socket with room for it: no real wait.
    with suppress(Exception):
        conn.close()


async def _connect_url(url: str, timeout: float) -> Any:
    from river_db.connect import connect_dedicated

    params = {"connect_timeout": max(1, int(timeout))}
    return await _backend.run_blocking(lambda: connect_dedicated(url, params))


# ---------------------------------------------------------------- sqlite


class SQLiteNotifier(_Hub):
    """Polls the ``river_notification`` outbox every 50 ms for rows past a cursor.

    The cursor starts at ``max(id)`` when listening begins (earlier rows are never
    delivered) and advances past every row read, subscribed topic or not. Ids
    are a valid cursor because SQLite's single writer commits them in order.
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

    # --- lifecycle (_Hub's): the starting cursor first, raising if the outbox is unreadable

    _ROLE = "poll"

    async def _begin(self) -> int:
        return await self._max_id()

    async def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        await _backend.checkpoint()
        return True  # the outbox is a table: it has no connection to lose notifications on

    async def _forever(self, cursor: int | None) -> None:
        attempt = 0
        announced = False
        while not self._stop.is_set():
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
                if self._stop.is_set():
                    break
                attempt += 1
                cursor = None
                delay = self._backoff(attempt)
                log.warning("river-sqlite-notifier: poll failed (%s); retrying in %.2fs", exc, delay)
                await self._stop.sleep(delay)
                continue
            wanted = self._topics()
            for row in rows:
                cursor = max(cursor, int(row.id))
                if row.topic in wanted:
                    self._enqueue(row.topic, row.payload)
            if len(rows) < self._batch_size:
                await self._stop.sleep(self._poll_interval)


# ---------------------------------------------------------------- choice


def notifier_for(database: AsyncDatabase, *, enabled: bool = True, listen_url: str | None = None,
                 **options: Any) -> NotifierProtocol:
    """The notifier matching ``database``: LISTEN on Postgres (on ``listen_url`` when given,
    else on a connection like the database's), the outbox on SQLite, ``NullNotifier`` when
    ``enabled`` is false (poll-only)."""
    if not enabled:
        return NullNotifier()
    if database.dialect.name == "postgres":
        return Notifier(listen_url or database.connect_dedicated, schema=database.dialect.schema, **options)
    return SQLiteNotifier(database, **options)
