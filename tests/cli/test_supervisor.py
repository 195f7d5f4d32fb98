"""The ``--processes`` supervisor's rules, driven step by step with fake processes and a fake clock."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from river_tools.supervisor import CHILD_INDEX_ENV, EXIT_USAGE, RestartPolicy, Supervisor


class FakeProc:
    next_pid = 100

    def __init__(self, argv: list[str], env: dict[str, str], **_: Any) -> None:
        self.argv, self.env = argv, env
        self.pid = FakeProc.next_pid
        FakeProc.next_pid += 1
        self.code: int | None = None
        self.signals: list[int] = []

    def poll(self) -> int | None:
        return self.code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)

    def kill(self) -> None:
        self.code = -9


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def made() -> list[FakeProc]:
    return []


@pytest.fixture
def clock() -> Clock:
    return Clock()


def supervisor(made: list[FakeProc], clock: Clock, n: int = 2) -> Supervisor:
    def popen(argv: list[str], **kw: Any) -> FakeProc:
        proc = FakeProc(argv, **kw)
        made.append(proc)
        return proc

    sup = Supervisor(["river", "work", "app:client"], n, popen=popen, clock=clock, env={"A": "1"})
    sup.start_all()
    return sup


def test_restart_policy_doubles_up_to_the_maximum() -> None:
    policy = RestartPolicy(initial=1.0, maximum=30.0)
    assert [policy.delay(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    with pytest.raises(ValueError, match="at least 1"):
        policy.delay(0)


def test_each_child_runs_the_same_command_with_its_index(made: list[FakeProc], clock: Clock) -> None:
    supervisor(made, clock, n=3)
    assert [p.argv for p in made] == [["river", "work", "app:client"]] * 3
    assert [p.env[CHILD_INDEX_ENV] for p in made] == ["0", "1", "2"]
    assert all(p.env["A"] == "1" for p in made)


def test_signals_are_passed_on_twice_then_only_logged(made: list[FakeProc], clock: Clock) -> None:
    sup = supervisor(made, clock)
    sup.on_signal()
    assert [p.signals for p in made] == [[signal.SIGTERM]] * 2
    sup.on_signal()  # the children's second signal: a hard stop
    assert [p.signals for p in made] == [[signal.SIGTERM, signal.SIGTERM]] * 2
    sup.on_signal()
    assert [len(p.signals) for p in made] == [2, 2]
    assert not sup.done
    for p in made:
        p.code = 0
    sup.check()
    assert sup.done and sup.exit_status() == 0


def test_a_dead_child_is_restarted_after_a_growing_back_off(made: list[FakeProc], clock: Clock) -> None:
    sup = supervisor(made, clock)
    made[0].code = -9  # SIGKILLed
    clock.now = 5.0
    sup.check()
    assert len(made) == 2  # not yet: 1 s back-off
    clock.now = 5.9
    sup.check()
    assert len(made) == 2
    clock.now = 6.0
    sup.check()
    assert len(made) == 3 and made[2].env[CHILD_INDEX_ENV] == "0"
    made[2].code = 1  # dies again at once: 2 s
    clock.now = 6.5
    sup.check()
    clock.now = 8.4
    sup.check()
    assert len(made) == 3
    clock.now = 8.5
    sup.check()
    assert len(made) == 4
    assert sup.children[0].restarts == 2 and sup.children[0].exit_codes == [-9, 1]
    assert sup.children[1].restarts == 0


def test_a_child_that_lived_long_restarts_from_the_initial_delay(made: list[FakeProc], clock: Clock) -> None:
    sup = supervisor(made, clock, n=1)
    for attempt in range(3):  # three early deaths: 1, 2, 4 s
        made[-1].code = 1
        sup.check()
        clock.now += sup.policy.delay(attempt + 1)
        sup.check()
    assert sup.children[0].failures == 3
    clock.now += 61.0
    made[-1].code = 1
    sup.check()
    assert sup.children[0].failures == 1
    assert sup.children[0].restart_at == clock.now + 1.0


def test_no_restart_once_stopping(made: list[FakeProc], clock: Clock) -> None:
    sup = supervisor(made, clock)
    made[0].code = 1
    sup.check()  # restart scheduled
    sup.on_signal()
    clock.now = 100.0
    sup.check()
    assert len(made) == 2
    made[1].code = 0
    sup.check()
    assert sup.done


def test_a_usage_error_stops_everything_with_status_2(made: list[FakeProc], clock: Clock) -> None:
    sup = supervisor(made, clock)
    made[0].code = EXIT_USAGE
    sup.check()
    assert made[1].signals == [signal.SIGTERM]
    clock.now = 100.0
    sup.check()
    assert len(made) == 2 and not sup.done
    made[1].code = 0
    sup.check()
    assert sup.done and sup.exit_status() == EXIT_USAGE


def test_processes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Supervisor(["x"], 0)
