"""Notifiers against real Postgres (LISTEN/NOTIFY) and a real SQLite outbox.

Every wait is on a threading.Event with a timeout; ordering questions ("not
delivered before commit") are answered with a marker notification that must
arrive later, never with a sleep.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from river_db.listen_plan import ListenStep, ping_sql, reconcile_steps
from river_db.sqlite import connect_sqlite
from river_protocol.dialects.base import Plan
from river_protocol.dialects.sqlite import SQLiteDialect
from river_protocol.errors import RiverError, ValidationError
from river_protocol.intents import (
    FetchNotifications,
    MaxNotificationId,
    NotificationRow,
    Notify,
    Statement,
)
from river_sync.database import Database
from river_sync.notifier import (
    Notifier,
    NotifierProtocol,
    NullNotifier,
    SQLiteNotifier,
    default_backoff,
    notifier_for,
)

WAIT = 10.0


class Inbox:
    """Collects (topic, payload) and lets a test wait for a given payload."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, topic: str, payload: str) -> None:
        with self._cond:
            self.items.append((topic, payload))
            self._cond.notify_all()

    def wait_for(self, payload: str, timeout: float = WAIT) -> None:
        with self._cond:
            ok = self._cond.wait_for(lambda: any(p == payload for _, p in self.items), timeout)
        assert ok, f"{payload!r} not received; got {self.items}"

    def payloads(self) -> list[str]:
        with self._cond:
            return [p for _, p in self.items]


def _notifier_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("river-") and "notifier" in t.name]


def _notify(url: str, channel: str, *payloads: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for payload in payloads:
            conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


# ---------------------------------------------------------------- postgres


@pytest.fixture
def listener(module_pg_url: str) -> Iterator[Callable[..., Notifier]]:
    made: list[Notifier] = []

    def make(connect: Any = None, **kwargs: Any) -> Notifier:
        n = Notifier(connect or module_pg_url, **kwargs)
        made.append(n)
        return n

    yield make
    for n in made:
        n.stop()
    assert _notifier_threads() == []


def test_pg_delivers_only_after_sender_commits(module_pg_url: str, listener: Callable[..., Notifier]) -> None:
    inbox = Inbox()
    n = listener()
    n.start()
    sub = n.subscribe("river_insert", inbox)
    with psycopg.connect(module_pg_url) as sender:  # non-autocommit: NOTIFY waits for COMMIT
        sender.execute("SELECT pg_notify('public.river_insert', 'in-tx')")
        # Committed after the pending one was sent; arrives first because delivery follows commits.
        _notify(module_pg_url, "public.river_insert", "marker")
        inbox.wait_for("marker")
        assert inbox.payloads() == ["marker"]
        sender.commit()
    inbox.wait_for("in-tx")
    assert inbox.items == [("river_insert", "marker"), ("river_insert", "in-tx")]
    sub.unsubscribe()
    sub.unsubscribe()  # idempotent


def test_pg_topics_schema_and_unsubscribe(module_pg_url: str, listener: Callable[..., Notifier]) -> None:
    inserts, controls = Inbox(), Inbox()
    n = listener(schema="myschema")  # LISTEN needs no schema object, only the channel name
    n.subscribe("river_insert", inserts)  # before start: LISTENed on connect
    n.start()
    control_sub = n.subscribe("river_control", controls)
    _notify(module_pg_url, "public.river_insert", "wrong-schema")
    _notify(module_pg_url, "myschema.river_leadership", "unsubscribed-topic")
    _notify(module_pg_url, "myschema.river_control", "c1")
    _notify(module_pg_url, "myschema.river_insert", "i1")
    inserts.wait_for("i1")
    controls.wait_for("c1")
    assert inserts.items == [("river_insert", "i1")]
    assert controls.items == [("river_control", "c1")]

    control_sub.unsubscribe()  # returns once UNLISTEN ran
    _notify(module_pg_url, "myschema.river_control", "c2")
    _notify(module_pg_url, "myschema.river_insert", "i2")
    inserts.wait_for("i2")
    assert controls.payloads() == ["c1"]


def test_pg_current_schema_used_when_none_configured(pg_url_with_search_path: str) -> None:
    inbox = Inbox()
    with Notifier(pg_url_with_search_path) as n:
        n.subscribe("river_insert", inbox)
        _notify(pg_url_with_search_path, "public.river_insert", "not-mine")
        _notify(pg_url_with_search_path, "alt.river_insert", "mine")
        inbox.wait_for("mine")
        assert inbox.payloads() == ["mine"]
    assert _notifier_threads() == []


@pytest.fixture
def pg_url_with_search_path(module_pg_url: str) -> str:
    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS alt")
    sep = "&" if "?" in module_pg_url else "?"
    return f"{module_pg_url}{sep}options=-csearch_path%3Dalt"


def test_pg_reconnects_after_backend_is_killed(module_pg_url: str, listener: Callable[..., Notifier]) -> None:
    app = "river_test_" + uuid.uuid4().hex[:8]
    listening = threading.Semaphore(0)

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(module_pg_url, autocommit=True, application_name=app)

    inbox = Inbox()
    n = listener(connect=connect, backoff=lambda attempt: 0.01 * attempt, on_listening=listening.release)
    n.subscribe("river_insert", inbox)
    n.start()
    assert listening.acquire(timeout=WAIT)
    _notify(module_pg_url, "public.river_insert", "before")
    inbox.wait_for("before")

    with psycopg.connect(module_pg_url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (app,),
        ).fetchone()
        assert row == (1,)
    assert listening.acquire(timeout=WAIT), "listener did not come back"
    assert n.reconnects == 1
    _notify(module_pg_url, "public.river_insert", "after")
    inbox.wait_for("after")
    assert inbox.payloads() == ["before", "after"]


def _listener_activity(url: str, app: str) -> tuple[str, Any]:
    """(last statement, when it started) of the connection named ``app``, as pg_stat_activity shows it."""
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute("SELECT query, query_start FROM pg_stat_activity WHERE application_name = %s",
                            (app,)).fetchone()
    assert row is not None
    return str(row[0]), row[1]


def test_pg_listener_looks_like_one_after_unsubscribe_and_ping(
    module_pg_url: str, listener: Callable[..., Notifier]
) -> None:
    """River's harness finds a listener as a connection whose last statement is a LISTEN: an
    UNLISTEN (the start-up probe's) and the keep-alive ping both leave one last."""
    app = "river_test_" + uuid.uuid4().hex[:8]
    listening = threading.Semaphore(0)
    n = listener(connect=lambda: psycopg.connect(module_pg_url, autocommit=True, application_name=app),
                 on_listening=listening.release, ping_interval=3600)
    n.subscribe("river_insert", Inbox())
    n.start()
    assert listening.acquire(timeout=WAIT)
    gone = n.subscribe("river_gone", Inbox())
    gone.unsubscribe()  # returns once the UNLISTEN ran
    assert _listener_activity(module_pg_url, app)[0] == 'LISTEN "public.river_insert"'
    n.stop()

    pinged = listener(connect=lambda: psycopg.connect(module_pg_url, autocommit=True, application_name=app),
                      on_listening=listening.release, ping_interval=0.01)
    pinged.subscribe("river_control", Inbox())
    pinged.start()
    assert listening.acquire(timeout=WAIT)
    first = _listener_activity(module_pg_url, app)[1]
    deadline = time.monotonic() + WAIT
    while (seen := _listener_activity(module_pg_url, app))[1] == first:  # a ping ran since
        assert time.monotonic() < deadline, "the listener never pinged"
    assert seen[0] == 'LISTEN "public.river_control"'


def test_reconcile_steps_end_on_a_listen() -> None:
    assert [(s.verb, s.topic) for s in reconcile_steps({"a", "probe"}, {"a"})] == [
        ("UNLISTEN", "probe"), ("LISTEN", "a")]
    assert [(s.verb, s.topic) for s in reconcile_steps({"a"}, {"a", "b"})] == [("LISTEN", "b")]
    assert [(s.verb, s.topic) for s in reconcile_steps({"b", "c"}, {"a", "c"})] == [
        ("UNLISTEN", "b"), ("LISTEN", "a")]
    assert [(s.verb, s.topic) for s in reconcile_steps({"a"}, set())] == [("UNLISTEN", "a")]
    assert reconcile_steps({"a"}, {"a"}) == []
    assert ListenStep("LISTEN", 'we"ird').sql("s.") == 'LISTEN "s.we""ird"'
    assert ping_sql("s.", {"b", "a"}) == 'LISTEN "s.a"'
    assert ping_sql("s.", set()) == "SELECT 1"


def test_pg_receives_notify_intent_on_commit(module_pg_url: str, listener: Callable[..., Notifier]) -> None:
    inbox = Inbox()
    n = listener()
    n.start()
    n.subscribe("river_insert", inbox)
    with Database.from_url(module_pg_url, pool_size=2) as db:
        try:
            with db.transaction() as ex:
                ex.run(Notify("river_insert", ('{"queue": "a"}', '{"queue": "b"}')))
                db.run(Notify("river_insert", ("marker",)))  # another connection, autocommit
                inbox.wait_for("marker")
                assert inbox.payloads() == ["marker"]
        except ValidationError as exc:
            pytest.skip(f"Postgres Notify planner not available: {exc}")
    inbox.wait_for('{"queue": "b"}')
    assert inbox.payloads() == ["marker", '{"queue": "a"}', '{"queue": "b"}']


def test_pg_callback_errors_do_not_stop_delivery(
    module_pg_url: str, listener: Callable[..., Notifier]
) -> None:
    inbox = Inbox()

    def bad(topic: str, payload: str) -> None:
        raise RuntimeError("subscriber bug")

    n = listener()
    n.start()
    n.subscribe("river_insert", bad)
    n.subscribe("river_insert", inbox)
    _notify(module_pg_url, "public.river_insert", "one", "two")
    inbox.wait_for("two")
    assert inbox.payloads() == ["one", "two"]


def test_pg_stop_from_callback_and_restart(module_pg_url: str, listener: Callable[..., Notifier]) -> None:
    stopped = threading.Event()
    n = listener()

    def stop_me(topic: str, payload: str) -> None:
        n.stop()
        stopped.set()

    n.start()
    n.start()  # idempotent
    n.subscribe("river_insert", stop_me)
    _notify(module_pg_url, "public.river_insert", "stop")
    assert stopped.wait(WAIT)
    for t in _notifier_threads():
        t.join(WAIT)
    assert _notifier_threads() == []
    # A stopped notifier can be started again.
    inbox = Inbox()
    n.subscribe("river_control", inbox)
    n.start()
    _notify(module_pg_url, "public.river_control", "again")
    inbox.wait_for("again")


def test_pg_probe_hears_itself_on_a_direct_connection_and_closes_its_own(
        module_pg_url: str, listener: Callable[..., Notifier]) -> None:
    opened: list[psycopg.Connection[Any]] = []

    def connect() -> psycopg.Connection[Any]:
        conn = psycopg.connect(module_pg_url, autocommit=True)
        opened.append(conn)
        return conn

    n = listener(connect)
    assert n.probe(timeout=WAIT) is True  # not started: nothing to probe
    assert opened == []
    n.start()
    assert n.probe(timeout=WAIT) is True
    assert len(opened) == 2 and opened[1].closed and not opened[0].closed
    n.stop()
    assert opened[0].closed


def test_pg_start_fails_fast_on_bad_url() -> None:
    n = Notifier("postgresql://postgres@127.0.0.1:1/nope", connect_timeout=2)
    with pytest.raises(psycopg.OperationalError):
        n.start()
    assert _notifier_threads() == []
    n.stop()  # harmless when never started


def test_topic_validation() -> None:
    with pytest.raises(ValidationError, match="non-empty"):
        Notifier("postgresql://x/y").subscribe("", lambda t, p: None)
    with pytest.raises(ValidationError, match="63 bytes"):
        Notifier("postgresql://x/y", schema="s" * 40).subscribe("river_leadership_x" * 2, lambda t, p: None)
    with pytest.raises(ValidationError, match="invalid schema"):
        Notifier("postgresql://x/y", schema="no.dots")
    with pytest.raises(ValidationError, match="buffer_size"):
        Notifier("postgresql://x/y", buffer_size=0)


def test_buffer_overflow_is_counted() -> None:
    # The dispatcher is not running, so nothing drains the buffer of two.
    n = Notifier("postgresql://x/y", buffer_size=2)
    for i in range(5):
        n._enqueue("river_insert", str(i))
    assert n.dropped == 3


def test_default_backoff_doubles_with_jitter_and_resets() -> None:
    import random

    rng = random.Random(7)
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0), (10, 512.0), (11, 1.0)):
        assert base * 0.9 <= default_backoff(attempt, rng) <= base * 1.1


# ---------------------------------------------------------------- sqlite


def _plan_max_id(d: Any, intent: MaxNotificationId) -> Plan[int]:
    rows = yield Statement(f"SELECT coalesce(max(id), 0) FROM {d.prefix}river_notification")
    return int(rows[0][0])


def _plan_fetch(d: Any, intent: FetchNotifications) -> Plan[list[NotificationRow]]:
    rows = yield Statement(
        f"SELECT id, topic, payload, created_at FROM {d.prefix}river_notification "
        "WHERE id > ? ORDER BY id LIMIT ?",
        (intent.after_id, intent.limit),
    )
    return [NotificationRow(id=r[0], topic=r[1], payload=r[2], created_at=r[3]) for r in rows]


# Fallback until the SQLite statement planners provide these two intents.
SQLiteDialect.planners().setdefault(MaxNotificationId, _plan_max_id)
SQLiteDialect.planners().setdefault(FetchNotifications, _plan_fetch)

NOTIFICATION_TABLE = """
CREATE TABLE river_notification (
    id integer PRIMARY KEY AUTOINCREMENT,
    created_at timestamp NOT NULL DEFAULT (datetime('now', 'subsec')),
    payload text NOT NULL,
    topic text NOT NULL
)"""


@pytest.fixture
def outbox_db(sqlite_path: str) -> str:
    try:
        from river_db.migrator import Migrator
    except ImportError:
        # Without the migrator, the outbox table is all this needs.
        conn = connect_sqlite(sqlite_path)
        conn.execute("DROP TABLE IF EXISTS river_notification")
        conn.execute(NOTIFICATION_TABLE)
        conn.close()
    else:
        with Migrator(sqlite_path) as migrator:
            migrator.migrate_up()
    return sqlite_path


def _outbox_send(path: str, *rows: tuple[str, str]) -> None:
    conn = connect_sqlite(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO river_notification (topic, payload) VALUES (?, ?)", rows)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_sqlite_delivers_rows_after_start_only(outbox_db: str) -> None:
    _outbox_send(outbox_db, ("river_insert", "old-1"), ("river_insert", "old-2"))
    inserts, controls = Inbox(), Inbox()
    listening = threading.Event()
    with Database.from_sqlite_path(outbox_db) as db:
        n = SQLiteNotifier(db, on_listening=listening.set)
        n.subscribe("river_insert", inserts)
        with n:
            assert listening.wait(WAIT)
            sub = n.subscribe("river_control", controls)
            _outbox_send(outbox_db, ("river_insert", "new-1"), ("river_leadership", "unsubscribed"),
                         ("river_control", "c-1"))
            with db.transaction() as ex:  # through the handle's own writer, too
                ex.execute(Statement("INSERT INTO river_notification (topic, payload) VALUES (?, ?)",
                                     ("river_insert", "new-2"), fetch=False))
            inserts.wait_for("new-2")
            controls.wait_for("c-1")
            sub.unsubscribe()
            _outbox_send(outbox_db, ("river_control", "c-2"), ("river_insert", "new-3"))
            inserts.wait_for("new-3")
        assert _notifier_threads() == []
    assert inserts.items == [("river_insert", "new-1"), ("river_insert", "new-2"), ("river_insert", "new-3")]
    assert controls.payloads() == ["c-1"]


def test_sqlite_receives_notify_intent_on_commit(outbox_db: str) -> None:
    inbox = Inbox()
    with Database.from_sqlite_path(outbox_db) as db, SQLiteNotifier(db) as n:
        n.subscribe("river_insert", inbox)
        try:
            with pytest.raises(RuntimeError), db.transaction() as ex:
                ex.run(Notify("river_insert", ("rolled-back",)))
                raise RuntimeError
            with db.transaction() as ex:
                ex.run(Notify("river_insert", ('{"queue": "a"}', "last")))
        except ValidationError as exc:
            pytest.skip(f"SQLite Notify planner not available: {exc}")
        inbox.wait_for("last")
    assert inbox.payloads() == ['{"queue": "a"}', "last"]


def test_sqlite_large_batches_keep_order(outbox_db: str) -> None:
    inbox = Inbox()
    with Database.from_sqlite_path(outbox_db) as db, SQLiteNotifier(db, batch_size=7) as n:
        n.subscribe("river_insert", inbox)
        _outbox_send(outbox_db, *[("river_insert", str(i)) for i in range(50)])
        inbox.wait_for("49")
    assert inbox.payloads() == [str(i) for i in range(50)]


def test_sqlite_start_fails_without_outbox(sqlite_path: str) -> None:
    with Database.from_sqlite_path(sqlite_path) as db:
        n = SQLiteNotifier(db)
        with pytest.raises(Exception, match="river_notification"):
            n.start()
        assert _notifier_threads() == []


# ---------------------------------------------------------------- stop() from the notifier's own threads


def _role_threads(role: str) -> list[threading.Thread]:
    return [t for t in _notifier_threads() if t.name.endswith(f"-{role}")]


def _blocked_joining(thread: threading.Thread) -> bool:
    """Whether ``thread`` is waiting in a ``Thread.join`` (read from its stack, not timed)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_filename == threading.__file__ and frame.f_code.co_name == "join":
            return True
        frame = frame.f_back
    return False


def _start_from_another_thread(n: Any) -> threading.Thread:
    """``n.start()`` in a thread, returned once that start() returned or waits for a thread to end."""
    starter = threading.Thread(target=n.start)
    starter.start()
    while starter.is_alive() and not _blocked_joining(starter):
        starter.join(0.001)
    return starter


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_restart_from_the_notifiers_own_hook_is_refused(
    kind: str, outbox_db: str, request: pytest.FixtureRequest
) -> None:
    """stop() from the on_listening hook cannot wait for the listener it runs in; a start() there
    too would run a second listener beside it, so it is refused, and a start() from another
    thread afterwards runs one listener."""
    refused: list[BaseException] = []
    hooked = threading.Event()
    calls = 0

    def hook() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            n.stop()
            try:
                n.start()
            except RiverError as exc:
                refused.append(exc)
            hooked.set()

    with Database.from_sqlite_path(outbox_db) as db:
        n: Any = (SQLiteNotifier(db, on_listening=hook, poll_interval=0.01) if kind == "sqlite"
                  else Notifier(request.getfixturevalue("module_pg_url"), on_listening=hook))
        role = "poll" if kind == "sqlite" else "listen"
        n.start()
        assert hooked.wait(WAIT)
        assert [str(e) for e in refused] == [
            f"{n._name} was stopped from its own thread and cannot start again from it (it would"
            " wait for itself to end): start it from another thread"]
        n.start()
        try:
            assert len(_role_threads(role)) == 1
        finally:
            n.stop()
    assert _notifier_threads() == []


def test_a_start_after_a_stop_from_the_hook_waits_for_the_old_listener(outbox_db: str) -> None:
    """The old listener ends once the hook that stopped it returns; a start() meanwhile waits for
    that, so the two never poll at once."""
    stopped, release = threading.Event(), threading.Event()
    old: list[threading.Thread] = []
    inbox = Inbox()

    def hook() -> None:
        if not old:
            old.append(threading.current_thread())
            n.stop()
            stopped.set()
            release.wait(WAIT)

    with Database.from_sqlite_path(outbox_db) as db:
        n = SQLiteNotifier(db, on_listening=hook, poll_interval=0.01)
        n.subscribe("river_insert", inbox)
        n.start()
        assert stopped.wait(WAIT)
        starter = _start_from_another_thread(n)
        release.set()
        starter.join(WAIT)
        try:
            assert not old[0].is_alive() and len(_role_threads("poll")) == 1
            _outbox_send(outbox_db, ("river_insert", "after-restart"))
            inbox.wait_for("after-restart")
        finally:
            n.stop()
    assert _notifier_threads() == []


def test_a_start_after_a_stop_from_a_subscriber_waits_for_the_old_dispatcher(outbox_db: str) -> None:
    """Likewise for the dispatcher a subscriber's callback stopped: a restart from that callback is
    refused, and one from another thread waits until the callback returned."""
    stopped, release = threading.Event(), threading.Event()
    refused: list[BaseException] = []
    inbox = Inbox()

    def first(topic: str, payload: str) -> None:
        if payload == "stop":
            n.stop()
            with pytest.raises(RiverError, match="stopped from its own thread") as caught:
                n.start()
            refused.append(caught.value)
            stopped.set()
            release.wait(WAIT)

    with Database.from_sqlite_path(outbox_db) as db:
        n = SQLiteNotifier(db, poll_interval=0.01)
        n.subscribe("river_control", first)
        n.subscribe("river_insert", inbox)
        n.start()
        _outbox_send(outbox_db, ("river_control", "stop"))
        assert stopped.wait(WAIT) and len(refused) == 1
        starter = _start_from_another_thread(n)
        release.set()
        starter.join(WAIT)
        try:
            assert len(_role_threads("dispatch")) == 1
            _outbox_send(outbox_db, ("river_insert", "after-restart"))
            inbox.wait_for("after-restart")
        finally:
            n.stop()
    assert _notifier_threads() == []


# ---------------------------------------------------------------- choice and null


def test_notifier_for_each_database(module_pg_url: str, sqlite_path: str) -> None:
    with Database.from_url(module_pg_url, pool_size=1) as pg:
        chosen: NotifierProtocol = notifier_for(pg)
        assert isinstance(chosen, Notifier)
        inbox = Inbox()
        chosen.subscribe("river_insert", inbox)
        chosen.start()
        try:
            _notify(module_pg_url, "public.river_insert", "via-db")
            inbox.wait_for("via-db")
        finally:
            chosen.stop()
        assert isinstance(notifier_for(pg, enabled=False), NullNotifier)
    with Database.from_sqlite_path(sqlite_path) as lite:
        assert isinstance(notifier_for(lite, poll_interval=0.01), SQLiteNotifier)


def test_null_notifier() -> None:
    n: NotifierProtocol = NullNotifier()
    n.start()
    sub = n.subscribe("river_insert", lambda t, p: None)
    sub.unsubscribe()
    n.stop()
    with pytest.raises(ValidationError):
        n.subscribe("", lambda t, p: None)
