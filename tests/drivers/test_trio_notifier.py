"""Trio notifiers against real Postgres (LISTEN/NOTIFY without a thread) and a real SQLite outbox.

Ordering questions ("not delivered before commit") are answered with a marker
notification that must arrive later, never with a sleep. Every wait has a
generous deadline.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.errors import ValidationError
from river_protocol.intents import Notify, Statement
from river_trio.database import AsyncDatabase
from river_trio.notifier import (
    Notifier,
    NotifierProtocol,
    NullNotifier,
    SQLiteNotifier,
    notifier_for,
)

WAIT = 10.0


@pytest.fixture(scope="module")
def migrated_pg(module_pg_url: str) -> str:
    with psycopg.connect(module_pg_url, autocommit=True) as conn:
        Migrator(conn).migrate_up()
    return module_pg_url


@pytest.fixture
def migrated_sqlite(tmp_path: Path) -> str:
    path = str(tmp_path / "river.sqlite3")
    conn = connect_sqlite(path)
    Migrator(conn).migrate_up()
    conn.close()
    return path


def no_wait(_attempt: int) -> float:
    return 0.01


async def receive(channel: trio.MemoryReceiveChannel[tuple[str, str]]) -> tuple[str, str]:
    with trio.fail_after(WAIT):
        return await channel.receive()


def notify_sync(url: str, topic: str, *payloads: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for payload in payloads:
            conn.execute("SELECT pg_notify(%s, %s)", ("public." + topic, payload))


async def eventually(predicate: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(WAIT):
        while not predicate():
            await trio.sleep(0.01)
        return
    raise AssertionError(f"timed out waiting for {what}")


# ---------------------------------------------------------------- postgres


@pytest.mark.postgres
def test_delivers_to_channels_and_callbacks_with_low_latency(migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg) as db:
            notifier = Notifier(db.connect_dedicated)
            send, recv = trio.open_memory_channel[tuple[str, str]](100)
            seen: list[tuple[str, str]] = []
            async with trio.open_nursery() as nursery:
                await notifier.subscribe("river_insert", send)  # before start: LISTENed on connect
                await nursery.start(notifier.run)
                await notifier.subscribe("river_other", lambda t, p: seen.append((t, p)))
                latencies = []
                for i in range(50):
                    started = time.perf_counter()
                    await db.run(Notify("river_insert", (f"p{i}",)))
                    assert await receive(recv) == ("river_insert", f"p{i}")
                    latencies.append(time.perf_counter() - started)
                # Sent by a plain psycopg connection in another thread, not by us.
                await trio.to_thread.run_sync(notify_sync, migrated_pg, "river_other", "x")
                await eventually(lambda: bool(seen), "the callback")
                assert seen == [("river_other", "x")]
                assert statistics.median(latencies) < 0.05
                nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.postgres
def test_delivery_only_after_commit(migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg) as db:
            notifier = notifier_for(db)
            send, recv = trio.open_memory_channel[tuple[str, str]](100)
            async with trio.open_nursery() as nursery:
                await nursery.start(notifier.run)
                await notifier.subscribe("river_insert", send)
                async with db.transaction() as ex:
                    await ex.run(Notify("river_insert", ("in-tx",)))
                    # Sent and committed by someone else while our transaction is open.
                    await db.run(Notify("river_insert", ("marker",)))
                    assert await receive(recv) == ("river_insert", "marker")
                    with pytest.raises(trio.WouldBlock):
                        recv.receive_nowait()
                assert await receive(recv) == ("river_insert", "in-tx")
                nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.postgres
def test_reconnects_after_terminate(migrated_pg: str) -> None:
    conns: list[Any] = []
    listening: list[int] = []

    async def connect() -> Any:
        conn = await trio.to_thread.run_sync(lambda: psycopg.connect(migrated_pg, autocommit=True))
        conns.append(conn)
        return conn

    async def main() -> None:
        notifier = Notifier(connect, backoff=no_wait, on_listening=lambda: listening.append(1))
        send, recv = trio.open_memory_channel[tuple[str, str]](100)
        async with trio.open_nursery() as nursery:
            await notifier.subscribe("river_insert", send)
            await nursery.start(notifier.run)
            pid = conns[0].info.backend_pid
            await trio.to_thread.run_sync(
                lambda: psycopg.connect(migrated_pg, autocommit=True).execute(
                    "SELECT pg_terminate_backend(%s)", (pid,)))
            await eventually(lambda: len(listening) == 2, "the listener to reconnect")
            assert notifier.reconnects == 1 and conns[0].closed
            await trio.to_thread.run_sync(notify_sync, migrated_pg, "river_insert", "after")
            assert await receive(recv) == ("river_insert", "after")
            nursery.cancel_scope.cancel()
        # Nothing outlives the nursery: the listener's connection is closed.
        assert all(c.closed for c in conns)

    trio.run(main)


@pytest.mark.postgres
def test_ping_keeps_requests_flowing(migrated_pg: str) -> None:
    conns: list[Any] = []

    async def connect() -> Any:
        conn = await trio.to_thread.run_sync(lambda: psycopg.connect(migrated_pg, autocommit=True))
        conns.append(conn)
        return conn

    def last_query(pid: int) -> str:
        with psycopg.connect(migrated_pg, autocommit=True) as admin:
            row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        return str(row[0]) if row else ""

    async def main() -> None:
        notifier = Notifier(connect, ping_interval=0.01)
        async with trio.open_nursery() as nursery:
            await notifier.subscribe("river_insert", lambda t, p: None)
            await nursery.start(notifier.run)
            pid = conns[0].info.backend_pid
            with trio.fail_after(WAIT):
                while await trio.to_thread.run_sync(last_query, pid) != "SELECT 1":
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.postgres
def test_unsubscribe_and_full_buffers(migrated_pg: str) -> None:
    async def main() -> None:
        notifier = Notifier(migrated_pg, buffer_size=1000)
        small_send, small_recv = trio.open_memory_channel[tuple[str, str]](1)
        marks_send, marks_recv = trio.open_memory_channel[tuple[str, str]](10)
        gone: list[str] = []
        async with trio.open_nursery() as nursery:
            await nursery.start(notifier.run)
            await notifier.subscribe("river_small", small_send)
            await notifier.subscribe("river_marker", marks_send)
            sub = await notifier.subscribe("river_gone", lambda t, p: gone.append(p))
            sub.unsubscribe()
            sub.unsubscribe()
            await trio.to_thread.run_sync(notify_sync, migrated_pg, "river_small", "a", "b", "c")
            await trio.to_thread.run_sync(notify_sync, migrated_pg, "river_gone", "never")
            await trio.to_thread.run_sync(notify_sync, migrated_pg, "river_marker", "m")
            assert await receive(marks_recv) == ("river_marker", "m")
            assert await receive(small_recv) == ("river_small", "a")
            assert notifier.dropped == 2
            assert gone == []
            nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.postgres
def test_listener_buffer_overflow_is_counted(migrated_pg: str) -> None:
    async def main() -> None:
        notifier = Notifier(migrated_pg, buffer_size=1)
        seen: list[str] = []
        async with trio.open_nursery() as nursery:
            await nursery.start(notifier.run)
            await notifier.subscribe("river_burst", lambda t, p: seen.append(p))
            # One transaction: all five arrive together and are read in one drain.
            await trio.to_thread.run_sync(notify_sync_tx, migrated_pg, "river_burst", 5)
            await eventually(lambda: len(seen) + notifier.dropped == 5, "the burst")
            assert notifier.dropped >= 1 and seen[0] == "0"
            nursery.cancel_scope.cancel()

    trio.run(main)


def notify_sync_tx(url: str, topic: str, n: int) -> None:
    with psycopg.connect(url) as conn:
        for i in range(n):
            conn.execute("SELECT pg_notify(%s, %s)", ("public." + topic, str(i)))
        conn.commit()


@pytest.mark.postgres
def test_schema_channels_and_first_connect_errors(migrated_pg: str) -> None:
    async def main() -> None:
        with pytest.raises(ValidationError):
            Notifier(migrated_pg, schema="bad schema!")
        long_schema = Notifier(migrated_pg, schema="s" * 46)
        with pytest.raises(ValidationError, match="longer"):
            await long_schema.subscribe("river_insert_long", lambda t, p: None)
        with pytest.raises(ValidationError):
            await Notifier(migrated_pg).subscribe("", lambda t, p: None)
        with pytest.raises(ValidationError):
            Notifier(migrated_pg, buffer_size=0)
        broken = Notifier("postgresql://postgres@127.0.0.1:1/none", connect_timeout=1)
        async with trio.open_nursery() as nursery:
            with pytest.raises(psycopg.OperationalError):
                await nursery.start(broken.run)
        # An explicit schema names the channel without asking the server.
        scoped = Notifier(migrated_pg, schema="public")
        send, recv = trio.open_memory_channel[tuple[str, str]](10)
        async with trio.open_nursery() as nursery:
            await nursery.start(scoped.run)
            await scoped.subscribe("river_insert", send)
            await trio.to_thread.run_sync(notify_sync, migrated_pg, "river_insert", "s")
            assert await receive(recv) == ("river_insert", "s")
            nursery.cancel_scope.cancel()

    trio.run(main)


# ---------------------------------------------------------------- sqlite


def test_sqlite_outbox_delivery(migrated_sqlite: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            await db.run(Notify("river_insert", ("before-start",)))
            listening: list[int] = []
            notifier = notifier_for(db, on_listening=lambda: listening.append(1))
            assert isinstance(notifier, SQLiteNotifier)
            send, recv = trio.open_memory_channel[tuple[str, str]](100)
            other: list[str] = []
            async with trio.open_nursery() as nursery:
                await notifier.subscribe("river_insert", send)
                await nursery.start(notifier.run)
                await db.run(Notify("river_unsubscribed", ("nobody",)))
                async with db.transaction() as ex:
                    await ex.run(Notify("river_insert", ("one", "two")))
                assert await receive(recv) == ("river_insert", "one")
                assert await receive(recv) == ("river_insert", "two")
                await notifier.subscribe("river_other", lambda t, p: other.append(p))
                await db.run(Notify("river_other", ("o",)))
                await eventually(lambda: other == ["o"], "the callback")
                assert listening == [1]
                with pytest.raises(trio.WouldBlock):
                    recv.receive_nowait()
                nursery.cancel_scope.cancel()

    trio.run(main)


def test_sqlite_poll_retries_after_failure(migrated_sqlite: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            listening: list[int] = []
            failures: list[int] = []

            def backoff(attempt: int) -> float:
                failures.append(attempt)
                return 0.01

            notifier = SQLiteNotifier(db, backoff=backoff, on_listening=lambda: listening.append(1))
            send, recv = trio.open_memory_channel[tuple[str, str]](100)
            async with trio.open_nursery() as nursery:
                await notifier.subscribe("river_insert", send)
                await nursery.start(notifier.run)
                async with db.executor() as ex:
                    await ex.execute(Statement("ALTER TABLE river_notification RENAME TO river_n_away",
                                               fetch=False))
                await eventually(lambda: len(failures) >= 2, "failing polls")
                assert failures[:2] == [1, 2]
                async with db.executor() as ex:
                    await ex.execute(Statement("ALTER TABLE river_n_away RENAME TO river_notification",
                                               fetch=False))
                await eventually(lambda: len(listening) >= 2, "a fresh cursor after the failure")
                await db.run(Notify("river_insert", ("back",)))
                assert await receive(recv) == ("river_insert", "back")
                nursery.cancel_scope.cancel()

    trio.run(main)


# ---------------------------------------------------------------- null and choice


def test_null_notifier_and_choice(migrated_sqlite: str) -> None:
    async def main() -> None:
        null = NullNotifier()
        sub = await null.subscribe("river_insert", lambda t, p: None)
        sub.unsubscribe()
        with pytest.raises(ValidationError):
            await null.subscribe("x" * 64, lambda t, p: None)
        async with trio.open_nursery() as nursery:
            await nursery.start(null.run)
            nursery.cancel_scope.cancel()
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            assert isinstance(notifier_for(db, enabled=False), NullNotifier)
            chosen: NotifierProtocol = notifier_for(db)
            assert isinstance(chosen, SQLiteNotifier)
            async with trio.open_nursery() as nursery:
                await nursery.start(chosen.run)
                with pytest.raises(Exception, match="already running"):
                    await chosen.run()
                nursery.cancel_scope.cancel()

    trio.run(main)


@pytest.mark.postgres
def test_notifier_for_postgres(migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, schema="public") as db:
            assert isinstance(notifier_for(db), Notifier)

    trio.run(main)




def test_a_delivery_after_the_dispatcher_ended_is_dropped_not_raised(migrated_sqlite: str) -> None:
    # Shutdown race: the poller can still hand over a row after the dispatcher's channel closed.
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            notifier = SQLiteNotifier(db)
            send, receive = trio.open_memory_channel[tuple[str, str]](10)
            await receive.aclose()
            notifier._send = send
            notifier._enqueue("river_insert", "{}")
            assert notifier.dropped == 1
            await send.aclose()
            notifier._enqueue("river_insert", "{}")
            assert notifier.dropped == 2

    trio.run(main)
