"""river_sync's MachineRunner: posts from any thread, without its lock, are never lost."""

from __future__ import annotations

import enum
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from river_protocol.machines.base import Event, Machine, Output, Stop, Table, Tick, to
from river_sync.runner import MachineRunner


class _S(enum.Enum):
    ON = "on"
    OFF = "off"


@dataclass(frozen=True, slots=True)
class Ping(Event):
    n: int


@dataclass(frozen=True, slots=True)
class Pings(Event):
    ns: tuple[int, ...]

    @classmethod
    def of(cls, events: tuple[Ping, ...]) -> Pings:
        return cls(tuple(e.n for e in events))


class Counter(Machine):
    INITIAL: ClassVar[_S] = _S.ON
    BATCHES: ClassVar[Any] = {Ping: Pings.of}
    TABLE: ClassVar[Table] = {
        (_S.ON, Ping): to(_S.ON, via="_on_ping"),
        (_S.ON, Pings): to(_S.ON, via="_on_pings"),
        (_S.ON, Tick): to(_S.ON, via="_ignore"),
        (_S.ON, Stop): to(_S.OFF, via="_ignore"),
        (_S.OFF, Stop): to(_S.OFF, via="_ignore"),
    }

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []
        self.handled = 0

    def _on_ping(self, event: Ping, now: datetime) -> None:
        self.seen.append(event.n)

    def _on_pings(self, event: Pings, now: datetime) -> None:
        self.seen.extend(event.ns)

    def _ignore(self, event: Event, now: datetime) -> None:
        return None

    def _output(self, intents: tuple[Any, ...], deadline: datetime | None) -> Output:
        self.handled += 1
        return Output(intents, deadline)


def _wait_for(predicate: Any, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_posts_from_many_threads_all_arrive_in_each_posters_order_per_queue() -> None:
    machine = Counter()
    runner = MachineRunner(machine, database=None, name="test")  # type: ignore[arg-type]
    runner.start()
    per_thread, threads = 2_000, 4
    rng = random.Random(7)
    pauses = [[rng.random() < 0.01 for _ in range(per_thread)] for _ in range(threads)]

    def poster(t: int) -> None:
        for i in range(per_thread):
            runner.post(Ping(t * per_thread + i), urgent=bool(i % 2))
            if pauses[t][i]:
                time.sleep(0.002)  # lets the runner fall asleep between bursts

    workers = [threading.Thread(target=poster, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert _wait_for(lambda: len(machine.seen) == per_thread * threads)
    for t in range(threads):
        mine = [n for n in machine.seen if t * per_thread <= n < (t + 1) * per_thread]
        assert sorted(mine) == list(range(t * per_thread, (t + 1) * per_thread))
        assert [n for n in mine if n % 2] == sorted(n for n in mine if n % 2)  # urgent: in order
        assert [n for n in mine if n % 2 == 0] == sorted(n for n in mine if n % 2 == 0)
    assert machine.handled < per_thread * threads  # runs of pings were taken as batches
    runner.post(Stop())
    runner.finish()
    assert runner.join(10) and runner.error is None


def test_a_post_wakes_a_sleeping_runner() -> None:
    machine = Counter()
    runner = MachineRunner(machine, database=None, name="test")  # type: ignore[arg-type]
    runner.start()
    for n in range(20):
        assert _wait_for(lambda: runner._sleeping), "the runner never went to sleep"
        runner.post(Ping(n))
        assert _wait_for(lambda n=n: machine.seen[-1:] == [n])
    runner.finish()
    assert runner.join(10)
