"""What only the async clients have, on real Postgres and SQLite, on trio and asyncio (the ``run``
fixture; the virtual-time tests run on trio's MockClock only): run() in a task group, aclose(),
async steps, cancel scopes (an outer cancel, virtual-time timeouts), exception groups, sync workers
in threads, loop latency, a shared queue with river_sync, signals.

Behaviour both drivers share (insert, outcomes, stop, admin, leadership, periodic jobs, maintenance,
resumable steps) is tested once for all in ``behaviour/``. Tests here are plain functions
running ``run(main)``. Waits are bounded with ``anyio.fail_after(WAIT)`` and end as soon as the
awaited event arrives; the job-timeout test runs in virtual time (``MockClock``) so its one-hour
sleep costs nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import pytest
import sniffio
import trio
import trio.testing

import river_sync
import river_trio
from river_protocol.errors import RiverError
from river_protocol.intents import GetJob
from river_protocol.job import JobRow
from river_trio import (
    CancelCause,
    Client,
    EventKind,
    InsertManyParams,
    InsertOpts,
    JobState,
    LeaderElectionConfig,
    MaintenanceConfig,
    PeriodicJob,
    QueueConfig,
    WorkContext,
    Workers,
)
from river_trio.client import DEADLINE_GRAIN
from river_trio.runner import trio_deadline, utcnow
from tests.drivers.test_client_support import (
    FAST,
    WAIT,
    Other,
    Task,
    client_db_url_fixture,  # noqa: F401  (the fixture)
    migrated_pg_fixture,  # noqa: F401  (used by the fixture)
)

Run = Callable[[Callable[[], Awaitable[Any]]], Any]  # the run fixture (tests/drivers/conftest.py)


def _workers(fn: Any, args_type: type = Task, **kwargs: Any) -> Workers:
    workers = Workers()
    workers.job(args_type, **kwargs)(fn)
    return workers


def _client(url: str, workers: Workers | None, **kwargs: Any) -> Client:
    kwargs.setdefault("queues", {"default": FAST})
    kwargs.setdefault("leader_election", False)
    return _driver_client()(url, workers=workers, **kwargs)


def run_trio(fn: Callable[[], Awaitable[Any]], **kwargs: Any) -> Any:
    """For the tests on trio's MockClock (the others take the ``run`` fixture: trio and asyncio)."""
    return trio.run(fn, **kwargs)


def _driver_client() -> type[Client]:
    """The running loop's Client class: river_trio's under trio, river_asyncio's under asyncio."""
    if sniffio.current_async_library() == "trio":
        return Client
    import river_asyncio

    return river_asyncio.Client  # type: ignore[return-value]


async def _row(url: str, job_id: int) -> JobRow:
    async with _driver_client()(url) as reader:
        return await reader.jobs.get(job_id)
    raise AssertionError("unreachable")  # Client.__aexit__ may swallow, as a nursery's does


async def _event_for(
    sub: river_trio.Subscription, job_id: int, kinds: tuple[EventKind, ...] | None = None,
    within: float = WAIT,
) -> Any:
    with anyio.fail_after(within):
        async for event in sub:
            if event.job is not None and event.job.id == job_id and (kinds is None or event.kind in kinds):
                return event
    raise AssertionError("subscription closed before the event")


async def _events_for_all(sub: river_trio.Subscription, job_ids: list[int], within: float = WAIT) -> None:
    """Events about every one of ``job_ids``, in whatever order they come."""
    missing = set(job_ids)
    with anyio.fail_after(within):
        async for event in sub:
            if event.job is not None:
                missing.discard(event.job.id)
            if not missing:
                return
    raise AssertionError(f"subscription closed before events for {sorted(missing)}")


# ---------------------------------------------------------------- runtime, insert, work


def test_clock_maps_trio_time_to_wall_time() -> None:
    async def main() -> None:
        before = utcnow()
        assert abs((before - datetime.now(UTC)).total_seconds()) < 1
        await anyio.sleep(3600)  # virtual
        assert (utcnow() - before).total_seconds() == pytest.approx(3600)
        later = before + timedelta(seconds=10)
        assert trio_deadline(later) == pytest.approx(anyio.current_time() - 3600 + 10)

    run_trio(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_nursery_start_run_and_insert_many(run: Run, client_db_url: str) -> None:
    done: list[str] = []

    async def work(args: Any) -> None:
        done.append(getattr(args, "name", str(getattr(args, "n", ""))))

    workers = _workers(work)
    workers.job(Other)(work)

    async def main() -> None:
        client = _client(client_db_url, workers)
        sub = client.subscribe([EventKind.JOB_COMPLETED])
        async with anyio.create_task_group() as nursery:
            await nursery.start(client.run)
            items = [Task("a"), InsertManyParams(Other(7), InsertOpts(priority=2))]
            results = await client.insert_many(items)
            assert [r.job.kind for r in results] == ["task", "other"]
            await _events_for_all(sub, [r.job.id for r in results])
            await client.stop()
        assert sorted(done) == ["7", "a"]
        with pytest.raises(RiverError, match="cannot start"):
            await client.run()

    run(main)


def test_insert_only_client_without_run_closes_with_aclose(run: Run, client_db_url: str) -> None:
    async def main() -> None:
        # Without run(): the database opens at the first call, aclose() closes it.
        bare = _driver_client()(client_db_url)
        inserted = await bare.insert(Task("y"))
        assert (await bare.jobs.get(inserted.job.id)).args == {"name": "y"}
        await bare.aclose()
        assert bare.database.closed

    run(main)


def test_a_client_bound_to_one_loop_refuses_to_run_under_the_other(client_db_url: str) -> None:
    import river_asyncio

    for bound, loop in ((river_trio.Client, "asyncio"), (river_asyncio.Client, "trio")):
        async def main(bound: type[Any] = bound, loop: str = loop) -> None:
            client = bound(client_db_url)
            with pytest.raises(RiverError, match=f"runs under {bound.ANYIO_BACKEND}, not {loop}"):
                await client.run()
            assert client.state.value == "new"  # refused before anything started

        anyio.run(main, backend=loop)


def test_the_asyncio_client_on_uvloop_works_jobs_and_hears_notifications(client_db_url: str) -> None:
    # uvloop's add_reader carries anyio.wait_readable, the Postgres listener's wait.
    import river_asyncio

    async def work(args: Task) -> None:
        await anyio.sleep(0)

    async def main() -> None:
        import asyncio

        assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        client = river_asyncio.Client(client_db_url, workers=_workers(work), queues={"default": FAST},
                                      leader_election=False)
        sub = client.subscribe([EventKind.JOB_COMPLETED])
        async with client:
            results = await client.insert_many([Task(f"u{i}") for i in range(5)])
            await _events_for_all(sub, [r.job.id for r in results])

    anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})


# ---------------------------------------------------------------- async-only APIs


def test_resumable_steps_in_an_async_worker(run: Run, client_db_url: str) -> None:
    ran: list[str] = []

    async def work(ctx: WorkContext, args: Task) -> None:
        async with ctx.step("one") as step:
            if not step.skip:
                ran.append("one")
        await ctx.step("two").run(lambda: ran.append("two"))
        if args.name == "fail" and len(ran) == 2:
            raise ValueError("after two")

    async def main() -> None:
        client = _client(client_db_url, _workers(work))
        sub = client.subscribe()
        async with client:
            inserted = await client.insert(Task("fail"))
            await _event_for(sub, inserted.job.id)
            row = await client.jobs.get(inserted.job.id)
        assert ran == ["one", "two"]
        assert row.metadata["river:resumable_step"] == "two"

    run(main)


# ---------------------------------------------------------------- cancellation


@pytest.mark.parametrize("timeout_s", [5])
def test_job_timeout_interrupts_async_worker_in_virtual_time(client_db_url: str, timeout_s: int) -> None:
    """The worker sleeps an hour of trio time and is interrupted at its timeout.

    The MockClock jumps only after the loop has been idle for 20 ms of real
    time, i.e. never while a statement runs in a thread (a jump then could fire
    the database layer's own timeouts); producers poll rarely and notifications
    are off, so a few dozen jumps cover the whole timeout.
    """
    seen: dict[str, Any] = {}

    async def work(ctx: WorkContext, args: Task) -> None:
        seen["start"] = anyio.current_time()
        try:
            await anyio.sleep(3600)
        except trio.Cancelled:
            seen["cancelled_at"] = anyio.current_time()
            seen["cause"] = ctx.cancel_cause
            raise

    quiet = QueueConfig(max_workers=10, fetch_poll_interval=timedelta(seconds=timeout_s / 4))

    async def main() -> None:
        client = _client(client_db_url, _workers(work, timeout=timedelta(seconds=timeout_s)),
                         queues={"default": quiet}, notifications=False)
        sub = client.subscribe()
        async with client:
            inserted = await client.insert(Task("slow"))
            event = await _event_for(sub, inserted.job.id, within=timeout_s + WAIT)
            row = await client.jobs.get(inserted.job.id)
        assert event.kind is EventKind.JOB_FAILED
        assert seen["cancelled_at"] - seen["start"] == pytest.approx(timeout_s, abs=0.5)
        assert seen["cause"] is CancelCause.TIMEOUT  # the token is set before the worker unwinds
        assert row.errors[0].error == "context deadline exceeded" and row.attempt == 1
        assert client.stats().timed_out == 1

    run_trio(main, clock=trio.testing.MockClock(autojump_threshold=0.02))


def test_a_claims_jobs_share_one_deadline_looked_up_once_in_virtual_time(client_db_url: str) -> None:
    """The timeout counts from the claim (as the threaded client's): the jobs of one claim, with
    their worker's timeout, go into one ``_Deadlines`` bucket, found once, and time out together."""
    timeout_s, total = 5, 6
    cancelled_at: list[float] = []
    claims: list[int] = []
    lookups: list[float] = []  # how far ahead each looked-up slot is

    async def work(ctx: WorkContext, args: Task) -> None:
        try:
            await anyio.sleep(3600)
        except trio.Cancelled:
            cancelled_at.append(anyio.current_time())
            assert ctx.cancel_cause is CancelCause.TIMEOUT
            raise

    quiet = QueueConfig(max_workers=total, fetch_poll_interval=timedelta(seconds=1))

    async def main() -> None:
        client = _client(client_db_url, _workers(work, timeout=timedelta(seconds=timeout_s)),
                         queues={"default": quiet}, notifications=False)
        client.testing_claim_hook = lambda queue, jobs: claims.append(len(jobs))
        deadlines = client._deadlines
        bucket = deadlines.bucket

        def counted(when: float) -> Any:
            lookups.append(when - anyio.current_time())
            return bucket(when)

        deadlines.bucket = counted  # type: ignore[method-assign]
        sub = client.subscribe()
        async with client:
            inserted = await client.insert_many([Task(f"slow {n}") for n in range(total)])
            await _events_for_all(sub, [r.job.id for r in inserted], within=timeout_s + WAIT)
        at_timeout = [ahead for ahead in lookups if ahead == pytest.approx(timeout_s)]
        assert sum(claims) == total and len(at_timeout) == len(claims)  # one lookup per claim
        # (The rest are the stuck checks each timeout adds, one run each.)
        assert len(lookups) == len(claims) + total
        assert client.stats().timed_out == total

    run_trio(main, clock=trio.testing.MockClock(autojump_threshold=0.02))
    if len(claims) == 1:
        assert max(cancelled_at) - min(cancelled_at) <= DEADLINE_GRAIN  # one bucket: one moment


def test_sync_worker_timeout_sets_its_token(run: Run, client_db_url: str) -> None:
    causes: list[CancelCause | None] = []

    def work(ctx: WorkContext, args: Task) -> None:
        ctx.token.wait(WAIT)
        causes.append(ctx.cancel_cause)
        ctx.raise_if_cancelled()

    async def main() -> None:
        client = _client(client_db_url, _workers(work, timeout=timedelta(milliseconds=100)))
        sub = client.subscribe()
        async with client:
            inserted = await client.insert(Task("slow"))
            await _event_for(sub, inserted.job.id)
            row = await client.jobs.get(inserted.job.id)
        assert causes == [CancelCause.TIMEOUT]
        assert row.errors[0].error == "context deadline exceeded"

    run(main)


def test_outer_cancel_makes_a_hard_stop_without_using_an_attempt(run: Run, client_db_url: str) -> None:
    """Cancelling run() from outside interrupts running jobs (stop_and_cancel and the soft stop
    timeout are in behaviour/test_work.py)."""
    entered = anyio.Event()

    async def work(ctx: WorkContext, args: Task) -> None:
        entered.set()
        await anyio.sleep_forever()

    async def main() -> None:
        client = _client(client_db_url, _workers(work))
        sub = client.subscribe([EventKind.JOB_INTERRUPTED])
        async with anyio.create_task_group() as nursery:
            await nursery.start(client.run)
            inserted = await client.insert(Task("x"))
            with anyio.fail_after(WAIT):
                await entered.wait()
            nursery.cancel_scope.cancel()
        interrupted = sub.get_nowait().job
        assert interrupted is not None and interrupted.id == inserted.job.id
        row = await _row(client_db_url, inserted.job.id)
        assert (row.state, row.attempt, row.errors) == (JobState.AVAILABLE, 0, ())

    run(main)


def test_one_job_task_works_jobs_in_turn_and_outlives_a_cancelled_run(run: Run, client_db_url: str) -> None:
    """Job tasks are long-lived: at max_workers 1 every job runs in the same task, including after
    a run in it was cancelled (its cancel scope is spent, so the task goes on in a new one)."""
    tasks: list[tuple[str, int]] = []
    entered = anyio.Event()

    async def work(ctx: WorkContext, args: Task) -> None:
        tasks.append((args.name, anyio.get_current_task().id))
        if args.name == "hold":
            entered.set()
            await anyio.sleep_forever()
        await anyio.sleep(0)

    one = QueueConfig(max_workers=1, fetch_cooldown=FAST.fetch_cooldown,
                      fetch_poll_interval=FAST.fetch_poll_interval)

    async def main() -> None:
        client = _client(client_db_url, _workers(work), queues={"default": one})
        sub = client.subscribe()
        async with client:
            held = await client.insert(Task("hold"))
            with anyio.fail_after(WAIT):
                await entered.wait()
            await client.jobs.cancel(held.job.id)
            cancelled = await _event_for(sub, held.job.id)
            later = await client.insert_many([Task(f"after-{i}") for i in range(5)])
            await _events_for_all(sub, [r.job.id for r in later])
            rows = [await client.jobs.get(r.job.id) for r in later]
        assert cancelled.kind is EventKind.JOB_CANCELLED
        assert [row.state for row in rows] == [JobState.COMPLETED] * 5
        assert [name for name, _ in tasks] == ["hold"] + [f"after-{i}" for i in range(5)]
        assert len({task for _, task in tasks}) == 1

    run(main)


def test_jobs_that_wait_each_get_a_task_of_their_own(run: Run, client_db_url: str) -> None:
    """Job tasks wake one another in a chain; jobs that wait still all run at once: each of ten
    waits until all ten have started, which only ends if every one has its own task."""
    started: list[str] = []
    tasks: set[int] = set()
    all_in = anyio.Event()

    async def work(ctx: WorkContext, args: Task) -> None:
        started.append(args.name)
        tasks.add(anyio.get_current_task().id)
        if len(started) == 10:
            all_in.set()
        with anyio.fail_after(WAIT):
            await all_in.wait()

    async def main() -> None:
        client = _client(client_db_url, _workers(work))  # FAST: max_workers 10
        sub = client.subscribe([EventKind.JOB_COMPLETED])
        async with client:
            results = await client.insert_many([Task(f"t{i}") for i in range(10)])
            await _events_for_all(sub, [r.job.id for r in results])
        assert sorted(started) == sorted(f"t{i}" for i in range(10))
        assert len(tasks) == 10

    run(main)


def test_an_async_error_handler_runs_after_its_run_was_interrupted(run: Run, client_db_url: str) -> None:
    """A timed-out run's scope is cancelled; its async error handler still awaits normally, and
    the next job in that task is not interrupted."""
    handled: list[tuple[int, CancelCause | None]] = []
    finished: list[str] = []

    async def work(ctx: WorkContext, args: Task) -> None:
        if args.name == "slow":
            await anyio.sleep(3600)
        await anyio.sleep(0)
        finished.append(args.name)

    async def on_error(job: JobRow, error: BaseException) -> bool:
        await anyio.sleep(0)  # a checkpoint: would raise Cancelled inside the spent scope
        handled.append((job.id, getattr(error, "cause", None)))
        return False

    one = QueueConfig(max_workers=1, fetch_cooldown=FAST.fetch_cooldown,
                      fetch_poll_interval=FAST.fetch_poll_interval)

    async def main() -> None:
        workers = _workers(work, timeout=timedelta(milliseconds=200))
        client = _client(client_db_url, workers, queues={"default": one}, error_handler=on_error)
        sub = client.subscribe()
        async with client:
            slow = await client.insert(Task("slow"))
            failed = await _event_for(sub, slow.job.id)
            quick = await client.insert(Task("quick"))
            done = await _event_for(sub, quick.job.id)
        assert failed.kind is EventKind.JOB_FAILED
        assert handled == [(slow.job.id, CancelCause.TIMEOUT)]
        assert done.kind is EventKind.JOB_COMPLETED and finished == ["quick"]

    run(main)


class Boom(BaseException):
    """Not an Exception: a worker raising it is a crash, not a job failure."""


def test_a_crash_propagates_as_an_exception_group(run: Run, client_db_url: str) -> None:
    async def work(args: Task) -> None:
        raise Boom("worker crashed")

    async def main() -> None:
        with pytest.raises(BaseExceptionGroup) as info:
            async with _client(client_db_url, _workers(work)) as client:
                await client.insert(Task("x"))
                await anyio.sleep_forever()
        assert info.group_contains(Boom, depth=None) if hasattr(info, "group_contains") else True
        matched, _ = info.value.split(Boom)
        assert matched is not None

    run(main)


def test_an_error_in_the_block_cancels_the_client(run: Run, client_db_url: str) -> None:
    async def main() -> None:
        client = _client(client_db_url, _workers(lambda args: None))
        with pytest.raises(BaseExceptionGroup) as info:
            async with client:
                raise KeyError("body")
        matched, rest = info.value.split(KeyError)
        assert matched is not None and rest is None
        assert client._stopped.is_set()

    run(main)


# ---------------------------------------------------------------- leadership


def _leader_settings() -> dict[str, Any]:
    return {
        "leader_election": LeaderElectionConfig(interval=timedelta(milliseconds=200),
                                                jitter=timedelta(0), ttl=timedelta(seconds=5)),
        "maintenance": MaintenanceConfig(scheduler_interval=timedelta(milliseconds=100), stagger_start=False,
                                         reindexer=False),
    }


def test_leadership_and_periodic_jobs_in_virtual_time(client_db_url: str) -> None:
    """Election, services and a one-minute periodic job on trio's MockClock (no real minute passes).

    The periodic job is enqueued at a virtual time ahead of the database's
    clock, so it is checked in the table rather than worked.
    """

    async def main() -> None:
        periodic = PeriodicJob(timedelta(minutes=1), lambda: Task("every minute"), id="minutely")
        client = _client(client_db_url, _workers(lambda args: None), periodic_jobs=[periodic],
                         leader_election=True, notifications=False,
                         queues={"default": QueueConfig(fetch_poll_interval=timedelta(seconds=2))},
                         maintenance=MaintenanceConfig(reindexer=False))
        async with client:
            start = anyio.current_time()
            assert await client.wait_leader(True, 60)
            with anyio.fail_after(300):
                while not (await client.jobs.list(kinds=["task"])).jobs:
                    await anyio.sleep(1)
            elapsed = anyio.current_time() - start
            (job_row,) = (await client.jobs.list(kinds=["task"])).jobs
        assert 55 <= elapsed <= 70 and job_row.args == {"name": "every minute"}
        assert job_row.metadata.get("river:periodic_job_id") == "minutely"

    run_trio(main, clock=trio.testing.MockClock(autojump_threshold=0.02))


# ---------------------------------------------------------------- the loop stays responsive


def test_other_tasks_keep_running_while_the_client_works_many_jobs(run: Run, client_db_url: str) -> None:
    """A task sleeping 5 ms at a time keeps waking while the client works 2,000 jobs: the client
    never holds the loop for the whole run. How late it wakes is a figure, not an assertion:
    ``python -m benchmarks trio`` prints it (loop responsiveness)."""
    total = 2000
    done = anyio.Event()
    count = 0

    async def work(args: Other) -> None:
        nonlocal count
        count += 1
        if count == total:
            done.set()

    async def main() -> None:
        seen: list[int] = []  # jobs worked so far, at each wake-up

        async def ticker() -> None:
            while True:
                await anyio.sleep(0.005)
                seen.append(count)

        async with _driver_client()(client_db_url) as inserter:
            for start in range(0, total, 500):
                await inserter.insert_many([Other(n) for n in range(start, start + 500)])
        queue = QueueConfig(max_workers=100, fetch_cooldown=timedelta(milliseconds=5),
                            fetch_poll_interval=timedelta(milliseconds=50))
        client = _client(client_db_url, _workers(work, Other), queues={"default": queue})
        async with client, anyio.create_task_group() as nursery:
            nursery.start_soon(ticker)
            with anyio.fail_after(60):
                await done.wait()
            nursery.cancel_scope.cancel()
        assert count == total
        assert any(0 < n < total for n in seen), "the ticker never woke while jobs were being worked"

    run(main)


# ---------------------------------------------------------------- mixed drivers


def test_sync_and_trio_clients_share_a_queue(run: Run, client_db_url: str) -> None:
    total = 200
    worked: list[tuple[str, int]] = []
    # Each side's first jobs wait until the other side has one too: a client holds at most
    # max_workers (10) jobs, so the other claims the rest, however the two are scheduled
    # (alone, one client could claim every job before the other's first fetch).
    sync_began, trio_began = threading.Event(), threading.Event()

    def sync_work(args: Other) -> None:
        sync_began.set()
        assert trio_began.wait(WAIT)
        worked.append(("sync", args.n))

    async def trio_work(args: Other) -> None:
        trio_began.set()
        with anyio.fail_after(WAIT):
            while not sync_began.is_set():
                await anyio.sleep(0.001)
        worked.append(("trio", args.n))

    settings = _leader_settings()
    sync_client = river_sync.Client(client_db_url, queues={"default": FAST},
                                    workers=_workers(sync_work, Other), client_id="sync-client", **settings)

    async def main() -> None:
        client = _driver_client()(client_db_url, queues={"default": FAST}, workers=_workers(trio_work, Other),
                        client_id="trio-client", **settings)
        async with client:
            await anyio.to_thread.run_sync(sync_client.start)
            try:
                await client.insert_many([Other(n) for n in range(total)])
                with anyio.fail_after(WAIT * 2):
                    while (await client.jobs.count_by_state())[JobState.COMPLETED] < total or not (
                        client.is_leader or sync_client.is_leader
                    ):
                        await anyio.sleep(0.02)
                assert client.is_leader != sync_client.is_leader
                counts = await client.jobs.count_by_state()
            finally:
                await anyio.to_thread.run_sync(sync_client.stop)
        assert counts[JobState.COMPLETED] == total
        assert sorted(n for _, n in worked) == list(range(total))  # each job exactly once
        assert {who for who, _ in worked} == {"sync", "trio"}

    run(main)


# ---------------------------------------------------------------- signals


def test_run_until_signalled_soft_then_hard(run: Run, client_db_url: str) -> None:
    entered = anyio.Event()

    async def work(ctx: WorkContext, args: Task) -> None:
        entered.set()
        await anyio.sleep_forever()

    async def main() -> None:
        client = _client(client_db_url, _workers(work))
        async with anyio.create_task_group() as nursery:
            results: list[str] = []

            async def runner(task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
                results.append(await river_trio.run_until_signalled(client, task_status=task_status))

            await nursery.start(runner)
            inserted = await client.insert(Task("x"))
            with anyio.fail_after(WAIT):
                await entered.wait()
            signal.raise_signal(signal.SIGINT)
            await anyio.wait_all_tasks_blocked()
            assert not client._stopped.is_set()
            signal.raise_signal(signal.SIGTERM)
        assert results == ["hard"]
        row = await _row(client_db_url, inserted.job.id)
        assert row.state is JobState.AVAILABLE and row.attempt == 0

    run(main)


def test_job_row_reads_go_through_the_client(run: Run, client_db_url: str) -> None:
    async def main() -> None:
        async with _driver_client()(client_db_url) as client:
            inserted = await client.insert(Task("x"))
            row = await client.database.run(GetJob(inserted.job.id), readonly=True)
        assert row == inserted.job

    run(main)
