"""``benchmarks.server_cpu``: the Postgres server's CPU over a stretch of a run, from /proc.

Fed fake readings (pid -> CPU seconds so far), sampled by hand: the sampler thread's
interval is an hour, so it never samples on its own during a test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.server_cpu import ServerCpu, parse_stat, process_cpu, read_processes

HOUR = 3600.0


def _fed(*readings: dict[int, float]) -> ServerCpu:
    queue = list(readings)
    return ServerCpu(read=lambda: queue.pop(0) if len(queue) > 1 else queue[0], interval=HOUR)


def test_a_process_present_at_the_start_counts_only_what_it_spends_after() -> None:
    cpu = _fed({10: 5.0}, {10: 5.5}, {10: 6.0})
    cpu.start()
    cpu.sample()
    assert cpu.stop() == pytest.approx(1.0)


def test_a_process_that_exits_mid_run_still_counts() -> None:
    cpu = _fed({10: 5.0, 11: 1.0}, {10: 5.4, 11: 1.2}, {11: 1.5})  # 10 exits after the first sample
    cpu.start()
    cpu.sample()
    assert cpu.stop() == pytest.approx(0.4 + 0.5)


def test_a_process_born_after_the_start_counts_whole() -> None:
    cpu = _fed({10: 5.0}, {10: 5.0, 12: 0.3}, {10: 5.0, 12: 0.7})
    cpu.start()
    cpu.sample()
    assert cpu.stop() == pytest.approx(0.7)


def test_a_reused_pid_keeps_the_earlier_process_s_share() -> None:
    cpu = _fed({10: 5.0}, {10: 5.6}, {10: 0.2})  # 10 exited; a new process got its pid
    cpu.start()
    cpu.sample()
    assert cpu.stop() == pytest.approx(0.6 + 0.2)


def test_no_visible_postgres_is_none_not_zero() -> None:
    cpu = _fed({})
    cpu.start()
    cpu.sample()
    assert cpu.stop() is None
    assert ServerCpu(read=dict).stop() is None  # never started: the work phase never began


def test_the_sampler_thread_samples_until_stopped() -> None:
    calls: list[int] = []

    def read(pids: list[int] | None = None) -> dict[int, float]:
        calls.append(1)
        return {10: 0.01 * len(calls)}

    cpu = ServerCpu(read=read, interval=0.001)
    cpu.start()
    while len(calls) < 5:
        pass
    seconds = cpu.stop()
    assert seconds is not None and seconds == pytest.approx(0.01 * (len(calls) - 1))


def test_the_thread_reads_known_pids_and_scans_all_of_proc_every_nth_sample() -> None:
    calls: list[list[int] | None] = []
    world = {10: 1.0}

    def read(pids: list[int] | None = None) -> dict[int, float]:
        calls.append(None if pids is None else sorted(pids))
        if len(calls) == 3:
            world[12] = 0.5  # a backend born mid-run, seen at the next full scan only
        for pid in world:
            world[pid] += 0.01
        return dict(world) if pids is None else {p: world[p] for p in pids if p in world}

    cpu = ServerCpu(read=read, interval=0.001, rescan_every=4)
    cpu.start()
    while len(calls) < 10:
        pass
    seconds = cpu.stop()
    sampled = calls[1:-1]  # the start's and the stop's readings are full scans
    assert calls[0] is None and calls[-1] is None
    assert all((call is None) == (n % 4 == 0) for n, call in enumerate(sampled, 1)), calls
    assert [10] in sampled[:3] and all(call in (None, [10], [10, 12]) for call in sampled)
    assert [10, 12] in sampled[4:], calls  # known after its first full scan
    assert seconds == pytest.approx(world[10] - 1.01 + world[12])  # 12 counted whole


def _fake_proc(root: Path) -> None:
    """Processes 7 and 9 named postgres and 8 python3, each with 1 s user and 1 s system CPU."""
    ticks = os.sysconf("SC_CLK_TCK")
    rest = " ".join(["S", *["0"] * 10, str(ticks), str(ticks), *["0"] * 30])
    for pid, name in ((7, "postgres"), (8, "python3"), (9, "postgres")):
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(f"{pid} ({name}) {rest}")


def test_read_processes_reads_only_the_pids_given(tmp_path: Path) -> None:
    _fake_proc(tmp_path)
    # 8 reused by another program and 11 gone: both left out; 9 not asked for.
    assert read_processes(proc=str(tmp_path), pids=[7, 8, 11]) == {7: 2.0}


def test_parse_stat_takes_the_name_up_to_the_last_parenthesis() -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    rest = " ".join(["S", *["0"] * 10, str(3 * ticks), str(ticks), *["0"] * 30])
    assert parse_stat(f"123 (postgres: a (b)) {rest}") == ("postgres: a (b)", 4.0)


def test_read_processes_reads_proc(tmp_path: Path) -> None:
    _fake_proc(tmp_path)
    (tmp_path / "self").mkdir()
    (tmp_path / "10").mkdir()  # exited: no stat file
    assert read_processes(proc=str(tmp_path)) == {7: 2.0, 9: 2.0}
    assert read_processes(proc=str(tmp_path / "missing")) == {}


def test_process_cpu_reads_one_process_and_raises_once_it_is_gone(tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    rest = " ".join(["S", *["0"] * 10, str(3 * ticks), str(ticks), *["0"] * 30])
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "stat").write_text(f"7 (river bench) {rest}")
    assert process_cpu(7, proc=str(tmp_path)) == 4.0
    with pytest.raises(OSError):
        process_cpu(8, proc=str(tmp_path))
    assert process_cpu(os.getpid()) > 0  # this test's own process, from the real /proc
