"""The periodic job enqueuer (docs/protocol.md §11.5), run by the leader only.

Definitions carry a schedule and a constructor returning fully resolved
``InsertParams`` (or None to skip a run). Every due definition (next run
before now + 100 ms) is constructed with ``scheduled_at`` = its planned run
time and all of them go out as ONE ``InsertJobs`` intent.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from river_protocol import metadata_keys
from river_protocol.constants import KIND_RE, PERIODIC_DUE_MARGIN, PERIODIC_ID_MAX_LEN, PERIODIC_IDLE_WAIT
from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import InsertJobs, InsertParams, Intent, Notify
from river_protocol.machines.base import (
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Rng,
    Stop,
    Table,
    Tick,
    to,
)
from river_protocol.machines.throttle import InsertNotifyThrottle

if TYPE_CHECKING:
    from river_protocol.cron import Schedule

METADATA_PERIODIC = "periodic"
METADATA_PERIODIC_ID = metadata_keys.PERIODIC_JOB_ID


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    schedule: Schedule
    # Called as constructor() or, with pass_now, constructor(now): a client resolving user args
    # needs the construction time (a ByPeriod unique key is bucketed on it, as in Go).
    constructor: Callable[..., InsertParams | None]
    id: str = ""
    run_on_start: bool = False
    pass_now: bool = False

    def __post_init__(self) -> None:
        if self.id:
            if len(self.id) >= PERIODIC_ID_MAX_LEN:
                raise ValidationError(f"periodic job ID must be under {PERIODIC_ID_MAX_LEN} characters")
            if not KIND_RE.match(self.id):
                raise ValidationError(f"periodic job ID {self.id!r} should match regex {KIND_RE.pattern}")
        if not callable(self.constructor):
            raise ValidationError("periodic job constructor must be callable")
        if not callable(getattr(self.schedule, "next", None)):
            raise ValidationError("periodic job schedule needs a next(after) method")


class PeriodicState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Start(Event):
    pass


@dataclass(frozen=True, slots=True)
class AddPeriodicJobs(Event):
    jobs: tuple[PeriodicJob, ...]


@dataclass(frozen=True, slots=True)
class RemovePeriodicJobs(Event):
    handles: tuple[int, ...] = ()
    ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClearPeriodicJobs(Event):
    pass


@dataclass(frozen=True, slots=True)
class PeriodicOutput(Output):
    handles: tuple[int, ...] = ()  # handles of the jobs added by this event
    constructor_errors: tuple[tuple[str, BaseException], ...] = ()  # (id, error); that run is skipped


def mark_periodic(params: InsertParams, periodic_id: str) -> InsertParams:
    """Set the periodic metadata keys the way Go's sjson does (replace in place, else append)."""
    try:
        metadata: Any = json.loads(params.metadata or b"{}")
    except ValueError:
        raise ValidationError(f"periodic job metadata is not JSON: {params.metadata[:80]!r}") from None
    if not isinstance(metadata, dict):
        raise ValidationError("periodic job metadata must be a JSON object")
    if periodic_id:
        metadata[METADATA_PERIODIC_ID] = periodic_id
    metadata[METADATA_PERIODIC] = True
    encoded = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode()
    return replace(params, metadata=encoded)


_S = PeriodicState


@dataclass(slots=True)
class _Entry:
    job: PeriodicJob
    next_run: datetime | None = None
    scheduled: bool = False  # next_run computed (newly added jobs get it on the next pass)


class PeriodicEnqueuer(Machine):
    INITIAL: ClassVar[PeriodicState] = _S.NEW
    state: PeriodicState

    TABLE: ClassVar[Table] = {
        (_S.NEW, Start): to(_S.RUNNING, via="_on_start"),
        (_S.RUNNING, Tick): to(_S.RUNNING, via="_on_tick"),
        **{(s, e): to(s, via=name) for s in (_S.NEW, _S.RUNNING) for e, name in (
            (AddPeriodicJobs, "_on_add"), (RemovePeriodicJobs, "_on_remove"),
            (ClearPeriodicJobs, "_on_clear"))},
        # Go logs a failed insert and moves on: those runs are skipped, not retried.
        **{(s, (r, i)): to(s, via="_ignore") for s in (_S.RUNNING, _S.STOPPED)
           for r in (IntentSucceeded, IntentFailed) for i in (InsertJobs, Notify)},
        (_S.NEW, Stop): to(_S.STOPPED, via="_on_stop"),
        (_S.RUNNING, Stop): to(_S.STOPPED, via="_on_stop"),
        (_S.STOPPED, Stop): to(_S.STOPPED, via="_ignore"),
        (_S.STOPPED, Tick): to(_S.STOPPED, via="_ignore"),
        # A registry change can cross the stop on its way in; the registry itself lives with the
        # driver (river_protocol.leadership) and the next term starts from it, so nothing is lost.
        **{(_S.STOPPED, e): to(_S.STOPPED, via="_ignore")
           for e in (AddPeriodicJobs, RemovePeriodicJobs, ClearPeriodicJobs)},
    }

    def __init__(self, rng: Rng, throttle: InsertNotifyThrottle | None = None,
                 jobs: tuple[PeriodicJob, ...] = ()) -> None:
        super().__init__()
        self._rng = rng
        self._throttle = throttle
        self._entries: dict[int, _Entry] = {}
        self._ids: dict[str, int] = {}
        self._next_handle = 0
        self._handles: list[int] = []
        self._errors: list[tuple[str, BaseException]] = []
        self._add(jobs)

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> PeriodicOutput:
        out = PeriodicOutput(intents=intents, next_deadline=deadline, handles=tuple(self._handles),
                             constructor_errors=tuple(self._errors))
        self._handles, self._errors = [], []
        return out

    def next_run_of(self, handle: int) -> datetime | None:
        return self._entries[handle].next_run

    # ---------------------------------------------------------------- managing definitions

    def _add(self, jobs: tuple[PeriodicJob, ...]) -> list[int]:
        seen = set(self._ids)
        for job in jobs:
            if not isinstance(job, PeriodicJob):
                raise ValidationError(f"expected PeriodicJob, got {type(job).__name__}")
            if job.id and job.id in seen:
                raise ValidationError(f"periodic job with ID already registered: {job.id}")
            seen.add(job.id)
        handles = []
        for job in jobs:
            handle, self._next_handle = self._next_handle, self._next_handle + 1
            self._entries[handle] = _Entry(job)
            if job.id:
                self._ids[job.id] = handle
            handles.append(handle)
        return handles

    def _on_add(self, event: AddPeriodicJobs, now: datetime) -> None:
        self._handles = self._add(event.jobs)
        if self.state is _S.RUNNING:
            self._schedule_new(now)

    def _on_remove(self, event: RemovePeriodicJobs, now: datetime) -> None:
        handles = set(event.handles) | {self._ids[i] for i in event.ids if i in self._ids}
        for handle in handles:
            entry = self._entries.pop(handle, None)
            if entry is not None and entry.job.id:
                self._ids.pop(entry.job.id, None)
        self._plan(now)

    def _on_clear(self, event: ClearPeriodicJobs, now: datetime) -> None:
        self._entries.clear()
        self._ids.clear()
        self._plan(now)

    # ---------------------------------------------------------------- running

    def _on_start(self, event: Start, now: datetime) -> None:
        self._schedule_new(now)

    def _on_stop(self, event: Stop, now: datetime) -> None:
        self._timers.clear()

    def _schedule_new(self, now: datetime) -> None:
        """New definitions: first next_run from now; run-on-start ones insert at once (at now)."""
        batch: list[InsertParams] = []
        for entry in self._entries.values():
            if entry.scheduled:
                continue
            entry.scheduled = True
            entry.next_run = entry.job.schedule.next(now)
            if entry.job.run_on_start:
                self._construct(entry, now, batch, now)
        self._insert(batch, now)
        self._plan(now)

    def _on_tick(self, event: Tick, now: datetime) -> None:
        if not self._due("next", now):
            return
        margin = now + PERIODIC_DUE_MARGIN
        batch: list[InsertParams] = []
        for handle in sorted(self._entries):
            entry = self._entries[handle]
            if entry.next_run is None or not entry.next_run < margin:
                continue
            self._construct(entry, entry.next_run, batch, now)
            entry.next_run = entry.job.schedule.next(entry.next_run)
        self._insert(batch, now)
        self._schedule_new(now)

    def _construct(
        self, entry: _Entry, scheduled_at: datetime, batch: list[InsertParams], now: datetime
    ) -> None:
        try:
            params = entry.job.constructor(now) if entry.job.pass_now else entry.job.constructor()
        except Exception as exc:  # a user constructor failing must not stop the other definitions
            self._errors.append((entry.job.id, exc))
            return
        if params is None:
            return
        if not isinstance(params, InsertParams):
            raise ProtocolError(f"periodic constructor returned {type(params).__name__}, not InsertParams")
        if params.scheduled_at is None:
            params = replace(params, scheduled_at=scheduled_at)
        batch.append(mark_periodic(params, entry.job.id))

    def _insert(self, batch: list[InsertParams], now: datetime) -> None:
        if not batch:
            return
        nonce = f"{int(self._rng.random() * 2**64) & (2**64 - 1):016x}"
        self._emit(InsertJobs(jobs=tuple(batch), nonce=nonce))
        if self._throttle is not None:
            notify = self._throttle.notify_for_insert(batch, now)
            if notify is not None:
                self._emit(notify)

    def _plan(self, now: datetime) -> None:
        if self.state is not _S.RUNNING:
            return
        runs = [e.next_run for e in self._entries.values() if e.next_run is not None]
        self._timers["next"] = min(runs) if runs else now + PERIODIC_IDLE_WAIT
