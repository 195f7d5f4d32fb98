"""``river_sync.client._JobThreads``: every queued run gets a thread, idle threads are reused, and
``stop`` ends them; submitting takes no lock and starts no thread (idle threads leave tokens, a
spawner starts the rest), so these tests check that no run is ever left waiting, from one
submitter or several."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from river_sync.client import _JobThreads

WAIT = 15.0


def _run(n: int) -> Any:
    return SimpleNamespace(n=n, thread=None)


def test_runs_that_block_each_get_a_thread() -> None:
    barrier = threading.Barrier(20, timeout=WAIT)  # passes only once all 20 runs wait at once
    lock = threading.Lock()
    done: list[int] = []
    all_done = threading.Event()

    def work(run: Any) -> None:
        barrier.wait()
        with lock:
            done.append(run.n)
            if len(done) == 20:
                all_done.set()

    pool = _JobThreads(work)
    for n in range(20):
        pool.submit(_run(n))
    assert all_done.wait(WAIT) and not barrier.broken
    assert sorted(done) == list(range(20))
    assert len(pool._threads) == 20
    pool.stop()


def test_an_idle_thread_is_reused() -> None:
    finished = threading.Semaphore(0)
    seen: list[threading.Thread] = []

    def work(run: Any) -> None:
        seen.append(run.thread)
        finished.release()

    pool = _JobThreads(work)
    for n in range(50):
        pool.submit(_run(n))
        assert finished.acquire(timeout=WAIT)
        # the thread leaves its idle token right after the run: wait for it before the next
        while not pool._idle:
            threading.Event().wait(0.001)
    assert len(pool._threads) == 1 and len(set(seen)) == 1
    pool.stop()
    pool._threads[0].join(WAIT)
    assert not pool._threads[0].is_alive()


def test_many_submitters_lose_no_run_and_run_none_twice() -> None:
    lock = threading.Lock()
    done: list[int] = []
    all_done = threading.Event()
    total = 4 * 500

    def work(run: Any) -> None:
        with lock:
            done.append(run.n)
            if len(done) == total:
                all_done.set()

    pool = _JobThreads(work)

    def submitter(base: int) -> None:
        for n in range(500):
            pool.submit(_run(base + n))

    submitters = [threading.Thread(target=submitter, args=(i * 500,)) for i in range(4)]
    for t in submitters:
        t.start()
    for t in submitters:
        t.join(WAIT)
    assert all_done.wait(WAIT)
    assert sorted(done) == list(range(total))
    pool.stop()
    for thread in pool._threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in pool._threads)


def test_stop_right_after_submitting_ends_every_thread_once_its_run_is_done() -> None:
    # Threads are started by the spawner, perhaps after stop() is called: stop waits for the
    # spawner to start every thread asked for, so each gets its sentinel behind the runs.
    release = threading.Event()
    lock = threading.Lock()
    done: list[int] = []

    def work(run: Any) -> None:
        assert release.wait(WAIT)
        with lock:
            done.append(run.n)

    pool = _JobThreads(work)
    for n in range(10):
        pool.submit(_run(n))
    pool.stop()
    release.set()
    for thread in pool._threads:
        thread.join(WAIT)
    assert sorted(done) == list(range(10))
    assert not any(thread.is_alive() for thread in pool._threads)
    assert pool._spawner is not None and not pool._spawner.is_alive()
