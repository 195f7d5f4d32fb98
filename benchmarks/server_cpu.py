"""CPU of every local Postgres server process over a stretch of a run, from /proc.

``ServerCpu`` counts the CPU (user + system) of every process on this machine whose
command name starts with ``postgres``: the backends of every connection, the WAL
writer, the checkpointer, the background writer and the rest. Backends exit when
their client disconnects, taking their CPU time with them, so a sampler thread reads
/proc every ``interval`` and keeps, per pid, its first reading and its last: a pid
present at ``start()`` counts from its reading then, a pid first seen later counts
its whole life (it began after the start, to within one interval), and a pid that
exits counts up to its last reading. CPU spent between a pid's last reading and its
exit (under one interval) is missed.

Reading all of /proc costs about 1.4 ms of CPU here (every process's stat file), which at
one scan every 20 ms took 7 % of a core from the run being measured (on an idle machine,
4 interleaved rounds of river_sync: 25.8k jobs/s with it, 27.1k with the sampler below,
27.5k with none; within the runs' spread, but the largest cost). So the sampler re-reads
only the pids it knows at each interval and scans all of /proc every ``rescan_every``-th
time (0.5 s by default), and at ``start()`` and ``stop()``. A backend first seen at a rescan still
counts its whole life; one that starts and exits between two rescans is missed.

``stop()`` is None when no Postgres process was visible (a server on another host or
in another container): nothing to report, rather than a 0.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable

Reading = dict[int, float]  # pid -> its CPU seconds so far
Reader = Callable[..., Reading]  # read() scans all of /proc; read(pids=...) reads those pids only
RESCAN_EVERY = 25  # samples: all of /proc every 0.5 s at the default 20 ms


def parse_stat(text: str) -> tuple[str, float]:
    """The command name and user + system CPU seconds in a /proc/<pid>/stat line."""
    # The name is parenthesised and may itself hold spaces or parentheses: up to the last ")".
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    return head.partition("(")[2], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int, proc: str = "/proc") -> float:
    """User + system CPU seconds of running process ``pid`` (OSError once it is gone)."""
    with open(f"{proc}/{pid}/stat") as f:
        return parse_stat(f.read())[1]


def read_processes(prefix: str = "postgres", proc: str = "/proc",
                   pids: Iterable[int] | None = None) -> Reading:
    """The CPU seconds of every process under ``proc`` whose name starts with ``prefix``;
    with ``pids``, of those processes only (one that is gone, or whose pid now names
    another program, is left out)."""
    out: Reading = {}
    if pids is not None:
        entries = [str(pid) for pid in pids]
    else:
        try:
            entries = os.listdir(proc)
        except OSError:
            return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/stat") as f:
                name, seconds = parse_stat(f.read())
        except (OSError, ValueError, IndexError):  # gone meanwhile, or unreadable
            continue
        if name.startswith(prefix):
            out[int(entry)] = seconds
    return out


class ServerCpu:
    """The CPU seconds local Postgres processes spend between ``start()`` and ``stop()``."""

    def __init__(self, read: Reader = read_processes, interval: float = 0.02,
                 rescan_every: int = RESCAN_EVERY) -> None:
        self._read, self.interval, self.rescan_every = read, interval, max(rescan_every, 1)
        self._first: Reading = {}
        self._last: Reading = {}
        self._banked = 0.0  # CPU of earlier processes whose pid was reused
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Take the starting readings and sample from now on."""
        if self._thread is not None:
            return
        with self._lock:
            self._first = self._read()
            self._last = dict(self._first)
        self._thread = threading.Thread(target=self._run, name="bench-server-cpu", daemon=True)
        self._thread.start()

    def sample(self, full: bool = True) -> None:
        """Read every process once, or (``full=False``) the ones already known: the sampler
        thread calls this every ``interval``, with a full scan every ``rescan_every``-th time."""
        if full:
            reading = self._read()
        else:
            with self._lock:
                known = list(self._last)
            reading = self._read(pids=known)
        with self._lock:
            for pid, seconds in reading.items():
                last = self._last.get(pid)
                if last is not None and seconds < last:  # a new process under a reused pid
                    self._banked += last - self._first[pid]
                    self._first[pid] = 0.0
                self._first.setdefault(pid, 0.0)
                self._last[pid] = seconds

    def _run(self) -> None:
        count = 0
        while not self._stop.wait(self.interval):
            count += 1
            self.sample(full=count % self.rescan_every == 0)

    def stop(self) -> float | None:
        """The CPU seconds since ``start()``; None when it never started or saw no process."""
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self.sample()
        with self._lock:
            if not self._last:
                return None
            return self._banked + sum(last - self._first[pid] for pid, last in self._last.items())
