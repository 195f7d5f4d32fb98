"""The async notifiers (river_anyio.notifier, under trio and asyncio) against real Postgres
(LISTEN/NOTIFY without a thread) and a real SQLite outbox.

Ordering questions ("not delivered before commit") are answered with a marker
notification that must arrive later, never with a sleep. Every wait has a
generous deadline.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import psycopg
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from river_anyio.database import AsyncDatabase
from river_anyio.notifier import (
    Notifier,
    NotifierProtocol,
    NullNotifier,
    SQLiteNotifier,
    notifier_for,
)
from river_db.migrator import Migrator
from river_db.sqlite import connect_sqlite
from river_protocol.errors import ValidationError
from river_protocol.intents import Notify, Statement

WAIT = 10.0
Run = Callable[[Callable[[], Awaitable[Any]]], Any]  # the run fixture (tests/drivers/conftest.py)


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


async def receive(channel: MemoryObjectReceiveStream[tuple[str, str]]) -> tuple[str, str]:
    with anyio.fail_after(WAIT):
        return await channel.receive()


def notify_sync(url: str, topic: str, *payloads: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for payload in payloads:
            conn.execute("SELECT pg_notify(%s, %s)", ("public." + topic, payload))


async def eventually(predicate: Callable[[], bool], what: str) -> None:
    with anyio.move_on_after(WAIT):
        while not predicate():
            await anyio.sleep(0.01)
        return
    raise AssertionError(f"timed out waiting for {what}")


# ---------------------------------------------------------------- postgres


@pytest.mark.postgres
def test_delivers_to_channels_and_callbacks_with_low_latency(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg) as db:
            notifier = Notifier(db.connect_dedicated)
            send, recv = anyio.create_memory_object_stream[tuple[str, str]](100)
            seen: list[tuple[str, str]] = []
            async with anyio.create_task_group() as nursery:
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
                await anyio.to_thread.run_sync(notify_sync, migrated_pg, "river_other", "x")
                await eventually(lambda: bool(seen), "the callback")
                assert seen == [("river_other", "x")]
                assert statistics.median(latencies) < 0.05
                nursery.cancel_scope.cancel()

    run(main)


@pytest.mark.postgres
def test_delivery_only_after_commit(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg) as db:
            notifier = notifier_for(db)
            send, recv = anyio.create_memory_object_stream[tuple[str, str]](100)
            async with anyio.create_task_group() as nursery:
                await nursery.start(notifier.run)
                await notifier.subscribe("river_insert", send)
                async with db.transaction() as ex:
                    await ex.run(Notify("river_insert", ("in-tx",)))
                    # Sent and committed by someone else while our transaction is open.
                    await db.run(Notify("river_insert", ("marker",)))
                    assert await receive(recv) == ("river_insert", "marker")
                    with pytest.raises(anyio.WouldBlock):
                        recv.receive_nowait()
                assert await receive(recv) == ("river_insert", "in-tx")
                nursery.cancel_scope.cancel()

    run(main)


@pytest.mark.postgres
def test_reconnects_after_terminate(run: Run, migrated_pg: str) -> None:
    conns: list[Any] = []
    listening: list[int] = []

    async def connect() -> Any:
        conn = await anyio.to_thread.run_sync(lambda: psycopg.connect(migrated_pg, autocommit=True))
        conns.append(conn)
        return conn

    async def main() -> None:
        notifier = Notifier(connect, backoff=no_wait, on_listening=lambda: listening.append(1))
        send, recv = anyio.create_memory_object_stream[tuple[str, str]](100)
        async with anyio.create_task_group() as nursery:
            await notifier.subscribe("river_insert", send)
            await nursery.start(notifier.run)
            pid = conns[0].info.backend_pid
            await anyio.to_thread.run_sync(
                lambda: psycopg.connect(migrated_pg, autocommit=True).execute(
                    "SELECT pg_terminate_backend(%s)", (pid,)))
            await eventually(lambda: len(listening) == 2, "the listener to reconnect")
            assert notifier.reconnects == 1 and conns[0].closed
            await anyio.to_thread.run_sync(notify_sync, migrated_pg, "river_insert", "after")
            assert await receive(recv) == ("river_insert", "after")
            nursery.cancel_scope.cancel()
        # Nothing outlives the nursery: the listener's connection is closed.
        assert all(c.closed for c in conns)

    run(main)


@pytest.mark.postgres
def test_probe_hears_itself_and_closes_its_connection_even_when_cancelled(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        opened: list[psycopg.Connection[Any]] = []
        cancel_next: list[anyio.CancelScope] = []

        async def connect() -> Any:
            conn = await anyio.to_thread.run_sync(lambda: psycopg.connect(migrated_pg, autocommit=True))
            opened.append(conn)
            if cancel_next:
                cancel_next.pop().cancel()  # the probe is cancelled while its connection opens
            return conn

        notifier = Notifier(connect, backoff=no_wait)
        async with anyio.create_task_group() as tg:
            await tg.start(notifier.run)
            assert await notifier.probe(timeout=WAIT) is True  # a direct connection hears itself
            assert len(opened) == 2 and opened[1].closed  # the probe's own connection, closed
            with anyio.CancelScope() as scope:
                cancel_next.append(scope)
                await notifier.probe(timeout=WAIT)
            assert scope.cancelled_caught
            assert len(opened) == 3 and opened[2].closed  # closed although the send never ran
            assert not opened[0].closed  # the listener's is untouched
            tg.cancel_scope.cancel()
        for conn in opened:
            conn.close()

    run(main)


@pytest.mark.postgres
def test_ping_keeps_requests_flowing(run: Run, migrated_pg: str) -> None:
    conns: list[Any] = []

    async def connect() -> Any:
        conn = await anyio.to_thread.run_sync(lambda: psycopg.connect(migrated_pg, autocommit=True))
        conns.append(conn)
        return conn

    def last_query(pid: int) -> tuple[str, Any]:
        with psycopg.connect(migrated_pg, autocommit=True) as admin:
            row = admin.execute("SELECT query, query_start FROM pg_stat_activity WHERE pid = %s",
                                (pid,)).fetchone()
        return (str(row[0]), row[1]) if row else ("", None)

    async def main() -> None:
        notifier = Notifier(connect, ping_interval=0.01)
        async with anyio.create_task_group() as nursery:
            await notifier.subscribe("river_insert", lambda t, p: None)
            await nursery.start(notifier.run)
            pid = conns[0].info.backend_pid
            _, first = await anyio.to_thread.run_sync(last_query, pid)
            # The ping is the LISTEN repeated: it runs again and again (query_start moves on),
            # and the connection still looks like a listener in pg_stat_activity.
            with anyio.fail_after(WAIT):
                while True:
                    query, started = await anyio.to_thread.run_sync(last_query, pid)
                    if started != first:
                        break
                    await anyio.sleep(0.01)
            assert query == 'LISTEN "public.river_insert"'
            nursery.cancel_scope.cancel()

    run(main)


@pytest.mark.postgres
def test_unsubscribe_and_full_buffers(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        notifier = Notifier(migrated_pg, buffer_size=1000)
        small_send, small_recv = anyio.create_memory_object_stream[tuple[str, str]](1)
        marks_send, marks_recv = anyio.create_memory_object_stream[tuple[str, str]](10)
        gone: list[str] = []
        async with anyio.create_task_group() as nursery:
            await nursery.start(notifier.run)
            await notifier.subscribe("river_small", small_send)
            await notifier.subscribe("river_marker", marks_send)
            sub = await notifier.subscribe("river_gone", lambda t, p: gone.append(p))
            sub.unsubscribe()
            sub.unsubscribe()
            await anyio.to_thread.run_sync(notify_sync, migrated_pg, "river_small", "a", "b", "c")
            await anyio.to_thread.run_sync(notify_sync, migrated_pg, "river_gone", "never")
            await anyio.to_thread.run_sync(notify_sync, migrated_pg, "river_marker", "m")
            assert await receive(marks_recv) == ("river_marker", "m")
            assert await receive(small_recv) == ("river_small", "a")
            assert notifier.dropped == 2
            assert gone == []
            nursery.cancel_scope.cancel()

    run(main)


@pytest.mark.postgres
def test_listener_buffer_overflow_is_counted(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        notifier = Notifier(migrated_pg, buffer_size=1)
        seen: list[str] = []
        async with anyio.create_task_group() as nursery:
            await nursery.start(notifier.run)
            await notifier.subscribe("river_burst", lambda t, p: seen.append(p))
            # One transaction: all five arrive together and are read in one drain.
            await anyio.to_thread.run_sync(notify_sync_tx, migrated_pg, "river_burst", 5)
            await eventually(lambda: len(seen) + notifier.dropped == 5, "the burst")
            assert notifier.dropped >= 1 and seen[0] == "0"
            nursery.cancel_scope.cancel()

    run(main)


def notify_sync_tx(url: str, topic: str, n: int) -> None:
    with psycopg.connect(url) as conn:
        for i in range(n):
            conn.execute("SELECT pg_notify(%s, %s)", ("public." + topic, str(i)))
        conn.commit()


@pytest.mark.postgres
def test_schema_channels_and_first_connect_errors(run: Run, migrated_pg: str) -> None:
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
        async with anyio.create_task_group() as nursery:
            with pytest.raises(psycopg.OperationalError):
                await nursery.start(broken.run)
        # An explicit schema names the channel without asking the server.
        scoped = Notifier(migrated_pg, schema="public")
        send, recv = anyio.create_memory_object_stream[tuple[str, str]](10)
        async with anyio.create_task_group() as nursery:
            await nursery.start(scoped.run)
            await scoped.subscribe("river_insert", send)
            await anyio.to_thread.run_sync(notify_sync, migrated_pg, "river_insert", "s")
            assert await receive(recv) == ("river_insert", "s")
            nursery.cancel_scope.cancel()

    run(main)


# ---------------------------------------------------------------- sqlite


def test_sqlite_outbox_delivery(run: Run, migrated_sqlite: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            await db.run(Notify("river_insert", ("before-start",)))
            listening: list[int] = []
            notifier = notifier_for(db, on_listening=lambda: listening.append(1))
            assert isinstance(notifier, SQLiteNotifier)
            send, recv = anyio.create_memory_object_stream[tuple[str, str]](100)
            other: list[str] = []
            async with anyio.create_task_group() as nursery:
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
                with pytest.raises(anyio.WouldBlock):
                    recv.receive_nowait()
                nursery.cancel_scope.cancel()

    run(main)


def test_sqlite_poll_retries_after_failure(run: Run, migrated_sqlite: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            listening: list[int] = []
            failures: list[int] = []

            def backoff(attempt: int) -> float:
                failures.append(attempt)
                return 0.01

            notifier = SQLiteNotifier(db, backoff=backoff, on_listening=lambda: listening.append(1))
            send, recv = anyio.create_memory_object_stream[tuple[str, str]](100)
            async with anyio.create_task_group() as nursery:
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

    run(main)


def test_under_trio_a_trio_channel_is_a_target_and_a_full_or_closed_one_drops(migrated_sqlite: str) -> None:
    # river_trio's notifier took trio.MemorySendChannel targets before AnyIO: it still does.
    import trio

    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            notifier = SQLiteNotifier(db)
            send, recv = trio.open_memory_channel[tuple[str, str]](1)
            async with trio.open_nursery() as nursery:
                sub = await notifier.subscribe("river_insert", send)
                await nursery.start(notifier.run)
                await db.run(Notify("river_insert", ("one", "two")))
                await eventually(lambda: notifier.dropped == 1, "the full channel's drop")
                with trio.fail_after(WAIT):
                    assert await recv.receive() == ("river_insert", "one")
                await recv.aclose()
                await db.run(Notify("river_insert", ("three",)))
                await eventually(lambda: sub._owner is None, "the closed channel's unsubscribe")
                nursery.cancel_scope.cancel()

    trio.run(main)


# ---------------------------------------------------------------- null and choice


def test_null_notifier_and_choice(run: Run, migrated_sqlite: str) -> None:
    async def main() -> None:
        null = NullNotifier()
        sub = await null.subscribe("river_insert", lambda t, p: None)
        sub.unsubscribe()
        with pytest.raises(ValidationError):
            await null.subscribe("x" * 64, lambda t, p: None)
        async with anyio.create_task_group() as nursery:
            await nursery.start(null.run)
            nursery.cancel_scope.cancel()
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            assert isinstance(notifier_for(db, enabled=False), NullNotifier)
            chosen: NotifierProtocol = notifier_for(db)
            assert isinstance(chosen, SQLiteNotifier)
            async with anyio.create_task_group() as nursery:
                await nursery.start(chosen.run)
                with pytest.raises(Exception, match="already running"):
                    await chosen.run()
                nursery.cancel_scope.cancel()

    run(main)


@pytest.mark.postgres
def test_notifier_for_postgres(run: Run, migrated_pg: str) -> None:
    async def main() -> None:
        async with await AsyncDatabase.from_url(migrated_pg, schema="public") as db:
            assert isinstance(notifier_for(db), Notifier)

    run(main)




def test_a_delivery_after_the_dispatcher_ended_is_dropped_not_raised(run: Run, migrated_sqlite: str) -> None:
    # Shutdown race: the poller can still hand over a row after the dispatcher's channel closed.
    async def main() -> None:
        async with await AsyncDatabase.from_sqlite_path(migrated_sqlite) as db:
            notifier = SQLiteNotifier(db)
            send, receive = anyio.create_memory_object_stream[tuple[str, str]](10)
            await receive.aclose()
            notifier._mailbox._send = send
            notifier._enqueue("river_insert", "{}")
            assert notifier.dropped == 1
            await send.aclose()
            notifier._enqueue("river_insert", "{}")
            assert notifier.dropped == 2

    run(main)
