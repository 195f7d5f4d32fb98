"""Receiving River notifications: Postgres LISTEN, the SQLite outbox, or nothing.

All three notifiers share one small interface (``NotifierProtocol``) so the
client does not care which one it has. Callbacks receive ``(topic, payload)``
where ``topic`` is the bare name (``river_insert``), never schema-qualified.
They run on one dispatcher thread per notifier, fed by a bounded buffer: when
the buffer is full new notifications are dropped and counted, since every
consumer also polls. Sending is not done here (it is the ``Notify`` intent).

Notifications that arrive while a listener is disconnected are lost; the
``on_listening`` hook fires after each (re)connection so a consumer can poll
once to cover the gap.
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol

from river_db.listen_plan import ping_sql, reconcile_steps
from river_db.listen_probe import ListenProbe
from river_protocol.errors import RiverError, ValidationError
from river_protocol.intents import FetchNotifications, MaxNotificationId

if TYPE_CHECKING:
    import psycopg

    from river_sync.database import Database

log = logging.getLogger(__name__)

NotifyCallback = Callable[[str, str], None]

from river_db.notify_settings import (  # noqa: E402
    BUFFER_SIZE,
    LISTENER_TIMEOUT,
    MAX_CHANNEL_BYTES,
    PING_INTERVAL,
    PROBE_TIMEOUT,
    SQLITE_POLL_INTERVAL,
    default_backoff,
)


class Subscription:
    """Handle returned by ``subscribe``; ``unsubscribe()`` is idempotent."""

    def __init__(self, owner: _Hub | None, topic: str, callback: NotifyCallback) -> None:
        self._owner = owner
        self.topic = topic
        self.callback = callback

    def unsubscribe(self) -> None:
        owner, self._owner = self._owner, None
        if owner is not None:
            owner._remove(self)


class NotifierProtocol(Protocol):
    dropped: int  # notifications lost to a full buffer

    def subscribe(self, topic: str, callback: NotifyCallback) -> Subscription: ...

    def start(self) -> None: ...

    def probe(self, timeout: float = PROBE_TIMEOUT) -> bool: ...

    def stop(self) -> None: ...


class NullNotifier:
    """Notifications off (poll-only mode): subscriptions never fire."""

    dropped = 0

    def subscribe(self, topic: str, callback: NotifyCallback) -> Subscription:
        _validate_topic(topic)
        return Subscription(None, topic, callback)

    def start(self) -> None:
        pass

    def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        return True

    def stop(self) -> None:
        pass


def _validate_topic(topic: str) -> None:
    if not isinstance(topic, str) or not topic or "\x00" in topic:
        raise ValidationError(f"invalid notification topic {topic!r}: must be a non-empty string")
    if len(topic.encode()) > MAX_CHANNEL_BYTES:
        raise ValidationError(f"notification topic {topic!r} is longer than {MAX_CHANNEL_BYTES} bytes")


class _Hub:
    """Subscriptions, the bounded buffer and the dispatcher thread, shared by notifiers."""

    def __init__(self, *, buffer_size: int, name: str) -> None:
        if buffer_size < 1:
            raise ValidationError(f"buffer_size must be at least 1, got {buffer_size}")
        self._name = name
        self._subs: dict[str, list[Subscription]] = {}
        self._subs_lock = threading.Lock()
        self._buffer: deque[tuple[str, str]] = deque()
        self._buffer_size = buffer_size
        self._cond = threading.Condition()
        self._dispatching = False
        self._dispatcher: threading.Thread | None = None
        self.dropped = 0

    # --- subscriptions

    def subscribe(self, topic: str, callback: NotifyCallback) -> Subscription:
        """Call ``callback(topic, payload)`` for each notification on ``topic``."""
        self._check_topic(topic)
        sub = Subscription(self, topic, callback)
        with self._subs_lock:
            subs = self._subs.setdefault(topic, [])
            first = not subs
            subs.append(sub)
        if first:
            self._topics_changed()
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
            self._topics_changed()

    def _topics(self) -> set[str]:
        with self._subs_lock:
            return set(self._subs)

    def _check_topic(self, topic: str) -> None:
        _validate_topic(topic)

    def _topics_changed(self) -> None:
        """Hook: the set of subscribed topics changed."""

    # --- buffer and dispatch

    def _enqueue(self, topic: str, payload: str) -> None:
        with self._cond:
            if len(self._buffer) >= self._buffer_size:
                self.dropped += 1
                log.warning("%s: dropping a %s notification, buffer full", self._name, topic)
                return
            self._buffer.append((topic, payload))
            self._cond.notify()

    def _start_dispatcher(self) -> None:
        with self._cond:
            self._dispatching = True
            self._buffer.clear()
        self._dispatcher = threading.Thread(target=self._dispatch_loop, name=f"{self._name}-dispatch",
                                            daemon=True)
        self._dispatcher.start()

    def _stop_dispatcher(self) -> None:
        with self._cond:
            self._dispatching = False
            self._buffer.clear()
            self._cond.notify_all()
        _join(self._dispatcher)
        self._dispatcher = None

    def _dispatch_loop(self) -> None:
        while True:
            with self._cond:
                while self._dispatching and not self._buffer:
                    self._cond.wait()
                if not self._dispatching:
                    return
                topic, payload = self._buffer.popleft()
            with self._subs_lock:
                callbacks = [s.callback for s in self._subs.get(topic, ())]
            for callback in callbacks:
                try:
                    callback(topic, payload)
                except Exception:
                    log.exception("%s: subscriber callback for %s failed", self._name, topic)


def _join(thread: threading.Thread | None) -> None:
    # stop() called from a callback must not wait for its own thread; it exits right after.
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def _call_hook(hook: Callable[[], None] | None, name: str) -> None:
    if hook is None:
        return
    try:
        hook()
    except Exception:
        log.exception("%s: on_listening hook failed", name)


# ---------------------------------------------------------------- postgres


class Notifier(_Hub):
    """Postgres LISTEN on one dedicated autocommit connection.

    ``connect`` is a connection URL or a function returning a new autocommit
    psycopg connection (``Database.connect_dedicated``). Channels are
    ``<schema>.<topic>`` with the configured schema or the connection's
    ``current_schema()``.
    """

    def __init__(
        self,
        connect: str | Callable[[], psycopg.Connection[Any]],
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
            self._connect: Callable[[], psycopg.Connection[Any]] = lambda: _connect_url(url, connect_timeout)
        else:
            self._connect = connect
        self._schema = schema
        self._ping_interval = ping_interval
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._on_listening = on_listening
        self._lifecycle_lock = threading.Lock()
        self._state_lock = threading.Lock()  # guards _down and _waiters
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._waiters: list[threading.Event] = []
        self._listened: set[str] = set()
        # True between a lost connection and the next LISTEN: subscribers then don't wait.
        self._down = True
        self._listening_ok = False
        self._prefix = ""
        self.reconnects = 0

    def _check_topic(self, topic: str) -> None:
        _validate_topic(topic)
        if self._schema is not None and len(f"{self._schema}.{topic}".encode()) > MAX_CHANNEL_BYTES:
            raise ValidationError(
                f"channel {self._schema}.{topic} is longer than Postgres' {MAX_CHANNEL_BYTES} bytes"
            )

    # --- lifecycle

    def start(self) -> None:
        """Connect (raising if that fails, to surface configuration errors early) and
        start listening in the background; returns once the subscribed topics are
        LISTENed (or the first connection was lost). Idempotent while running."""
        with self._lifecycle_lock:
            if self._thread is not None:
                return
            conn = self._connect()
            self._stopping.clear()
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._start_dispatcher()
            self._thread = threading.Thread(target=self._run, args=(conn,), name="river-notifier-listen",
                                            daemon=True)
            listening = threading.Event()
            with self._state_lock:
                self._down = False  # connected: subscribers wait for the first LISTEN
                self._waiters.append(listening)
            self._thread.start()
        # Topics subscribed before start are LISTENed once this returns.
        listening.wait(self._connect_timeout)

    def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        """Whether a notification sent to ourselves from another connection arrives within
        ``timeout`` seconds (``river_db.listen_probe``); False behind a pooler in transaction
        mode. True when there was nothing to probe (not listening now, or no room for the
        probe's channel)."""
        probe = ListenProbe(timeout=timeout)
        with self._state_lock:
            if self._thread is None or self._down or not self._prefix or not probe.fits(self._prefix):
                return True
            prefix = self._prefix
        arrived = threading.Event()

        def heard(topic: str, payload: str) -> None:
            if probe.answered_by(payload):
                arrived.set()

        sub = self.subscribe(probe.topic, heard)
        try:
            probe.send(self._connect(), prefix)
            return arrived.wait(probe.timeout)
        finally:
            sub.unsubscribe()

    def stop(self) -> None:
        """Stop listening, close the connection and join both threads."""
        with self._lifecycle_lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stopping.set()
            self._wake()
            _join(thread)
            self._stop_dispatcher()
            for sock in (self._wake_r, self._wake_w):
                if sock is not None:
                    sock.close()
            self._wake_r = self._wake_w = None

    def __enter__(self) -> Notifier:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- subscriptions meet the listener thread

    def _topics_changed(self) -> None:
        """Have the listener thread LISTEN/UNLISTEN now and wait until it did, so a
        notification sent after ``subscribe`` returns is received."""
        with self._state_lock:
            listener = self._thread
            if self._down or listener is None or listener is threading.current_thread():
                return  # the next connection LISTENs to whatever is subscribed then
            done = threading.Event()
            self._waiters.append(done)
            self._wake()
        done.wait(self._connect_timeout)

    def _wake(self) -> None:
        if self._wake_w is not None:
            with suppress(BlockingIOError, OSError):
                self._wake_w.send(b"\x00")

    # --- the listener thread

    def _run(self, conn: psycopg.Connection[Any] | None) -> None:
        attempt = 0
        while not self._stopping.is_set():
            error: Exception | None = None
            try:
                if conn is None:
                    conn = self._connect()
                    self.reconnects += 1
                self._session(conn)
            except Exception as exc:
                error = exc
            finally:
                if conn is not None:
                    with suppress(Exception):
                        conn.close()
                conn = None
                with self._state_lock:
                    self._down = True
                    self._listened = set()
                    # Subscribers waiting for a LISTEN get it on the next connection.
                    waiters, self._waiters = self._waiters, []
                for event in waiters:
                    event.set()
            if error is None or self._stopping.is_set():
                continue
            attempt = 1 if self._listening_ok else attempt + 1
            self._listening_ok = False
            delay = self._backoff(attempt)
            log.warning("river-notifier: listener failed (%s); reconnecting in %.2fs", error, delay)
            self._stopping.wait(delay)

    def _session(self, conn: psycopg.Connection[Any]) -> None:
        schema = self._schema
        if schema is None:
            row = conn.execute("SELECT current_schema()").fetchone()
            if row is None or row[0] is None:
                raise RiverError("current_schema() is NULL: configure a schema or fix search_path")
            schema = str(row[0])
        self._prefix = schema + "."
        with self._state_lock:
            self._down = False
        self._reconcile(conn)
        self._listening_ok = True
        _call_hook(self._on_listening, "river-notifier")
        next_ping = time.monotonic() + self._ping_interval
        wake_r = self._wake_r
        assert wake_r is not None
        while not self._stopping.is_set():
            self._drain(conn)
            self._reconcile(conn)
            now = time.monotonic()
            if now >= next_ping:
                # Notifications don't reset the timer: the ping also proves the
                # connection can still carry a request, not only receive. It is a LISTEN
                # repeated, so the connection still looks like a listener (river_db.listen_plan).
                conn.execute(ping_sql(self._prefix, self._listened).encode())
                next_ping = now + self._ping_interval
                continue
            readable, _, _ = select.select([conn.fileno(), wake_r.fileno()], [], [], next_ping - now)
            if wake_r.fileno() in readable:
                with suppress(BlockingIOError):
                    while wake_r.recv(4096):
                        pass

    def _reconcile(self, conn: psycopg.Connection[Any]) -> None:
        with self._state_lock:
            waiters, self._waiters = self._waiters, []
        try:
            for step in reconcile_steps(self._listened, self._topics()):
                conn.execute(step.sql(self._prefix).encode())
                if step.verb == "LISTEN":
                    self._listened.add(step.topic)
                else:
                    self._listened.discard(step.topic)
        finally:
            for event in waiters:
                event.set()

    def _drain(self, conn: psycopg.Connection[Any]) -> None:
        for note in conn.notifies(timeout=0):
            if not note.channel.startswith(self._prefix):
                continue
            topic = note.channel[len(self._prefix):]
            if topic in self._listened:
                self._enqueue(topic, note.payload)


def _connect_url(url: str, timeout: float) -> psycopg.Connection[Any]:
    from river_db.connect import connect_dedicated

    return connect_dedicated(url, {"connect_timeout": max(1, int(timeout))})


# ---------------------------------------------------------------- sqlite


class SQLiteNotifier(_Hub):
    """Polls the ``river_notification`` outbox every 50 ms for rows past a cursor.

    The cursor starts at ``max(id)`` when listening begins (earlier rows are never
    delivered) and advances past every row read, subscribed topic or not. Ids
    are a valid cursor because SQLite's single writer commits them in order.
    """

    def __init__(
        self,
        database: Database,
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
        self._state_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Read the starting cursor (raising if the outbox is unreadable) and start polling."""
        with self._state_lock:
            if self._thread is not None:
                return
            cursor = self._max_id()
            self._stopping.clear()
            self._start_dispatcher()
            self._thread = threading.Thread(target=self._run, args=(cursor,),
                                            name="river-sqlite-notifier-poll", daemon=True)
            self._thread.start()

    def probe(self, timeout: float = PROBE_TIMEOUT) -> bool:
        return True  # the outbox is a table: it has no connection to lose notifications on

    def stop(self) -> None:
        with self._state_lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stopping.set()
            _join(thread)
            self._stop_dispatcher()

    def __enter__(self) -> SQLiteNotifier:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _max_id(self) -> int:
        return int(self._db.run(MaxNotificationId(), readonly=True) or 0)

    def _run(self, cursor: int | None) -> None:
        attempt = 0
        announced = False
        while not self._stopping.is_set():
            try:
                if cursor is None:
                    # Like a reconnect on Postgres: what was sent meanwhile is skipped.
                    cursor = self._max_id()
                    announced = False
                if not announced:
                    _call_hook(self._on_listening, "river-sqlite-notifier")
                    announced = True
                rows = self._db.run(FetchNotifications(after_id=cursor, limit=self._batch_size),
                                    readonly=True)
                attempt = 0
            except Exception as exc:
                if self._stopping.is_set():
                    break
                attempt += 1
                cursor = None
                delay = self._backoff(attempt)
                log.warning("river-sqlite-notifier: poll failed (%s); retrying in %.2fs", exc, delay)
                self._stopping.wait(delay)
                continue
            wanted = self._topics()
            for row in rows:
                cursor = max(cursor, int(row.id))
                if row.topic in wanted:
                    self._enqueue(row.topic, row.payload)
            if len(rows) < self._batch_size:
                self._stopping.wait(self._poll_interval)


# ---------------------------------------------------------------- choice


def notifier_for(database: Database, *, enabled: bool = True, listen_url: str | None = None,
                 **options: Any) -> NotifierProtocol:
    """The notifier matching ``database``: LISTEN on Postgres (on ``listen_url`` when given,
    else on a connection like the database's), the outbox on SQLite, ``NullNotifier`` when
    ``enabled`` is false (poll-only)."""
    if not enabled:
        return NullNotifier()
    if database.dialect.name == "postgres":
        return Notifier(listen_url or database.connect_dedicated, schema=database.dialect.schema, **options)
    return SQLiteNotifier(database, **options)
