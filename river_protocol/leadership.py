"""What a client does with leadership: the elector plus the leader-only duties (§10.5, §11.5).

``Leadership`` wraps the ``Elector`` in one machine (same driver contract as
every other machine) and adds what River's queue-maintainer leader does: on
gaining leadership it tells the driver to start every maintenance service
and the periodic enqueuer; a failed start is undone and retried with back-off,
and after three failed starts it sends ``request_resign``. On losing
leadership the ``stop_services`` flag comes in the very output that carries the
resign statement, so a driver that acts on flags before running intents stops
its services before the row is released (§10.3: Python stops first, unlike Go).

``PeriodicJob`` is the user's periodic definition (schedule as a cron string,
a ``Schedule`` or an interval; a constructor returning args). ``PeriodicRegistry``
keeps the client's definitions across terms and turns runtime add/remove into
events for the enqueuer of the current term.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from river_protocol.constants import KIND_RE, MAINTENANCE_START_ATTEMPTS, PERIODIC_ID_MAX_LEN
from river_protocol.cron import IntervalSchedule, Schedule, parse_cron
from river_protocol.errors import ValidationError
from river_protocol.intents import Intent, LeaderElect, LeaderReelect, LeaderResign, Notify
from river_protocol.machines import periodic as periodic_machine
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
    Transition,
    exponential_backoff,
    to,
)
from river_protocol.machines.elector import Elector, ElectorState, LeadershipNotification, Start
from river_protocol.machines.notifications import (
    ACTION_REQUEST_RESIGN,
    TOPIC_LEADERSHIP,
    LeadershipPayload,
    build_request_resign,
)
from river_protocol.options import InsertOpts

__all__ = [
    "Leadership",
    "LeadershipOutput",
    "LeadershipState",
    "PeriodicJob",
    "PeriodicRegistry",
    "ServicesStarted",
    "Start",
    "to_schedule",
]

_ELECTOR_INTENTS = (LeaderElect, LeaderReelect, LeaderResign)
# Go's start retries back off with the services' default cycle (1 s, 2 s, ...).
_START_BACKOFF_RESET = 7


# ---------------------------------------------------------------- periodic definitions


def to_schedule(schedule: str | Schedule | timedelta) -> Schedule:
    """A cron string (River's ``cron.ParseStandard``), an interval, or a ``Schedule`` as is."""
    if isinstance(schedule, str):
        return parse_cron(schedule)
    if isinstance(schedule, timedelta):
        if schedule <= timedelta(0):
            raise ValidationError(f"periodic interval must be positive, got {schedule}")
        return IntervalSchedule(schedule)
    if callable(getattr(schedule, "next", None)):
        return schedule
    raise ValidationError(
        "periodic schedule must be a cron string, a timedelta or have next(after), "
        f"got {type(schedule).__name__}"
    )


@dataclass(frozen=True, slots=True)
class PeriodicJob:
    """A periodic job (Go's ``river.NewPeriodicJob``).

    ``constructor()`` returns the job args, ``(args, InsertOpts)``, or ``None``
    to skip that run; ``opts`` applies when it returns bare args. ``id`` is
    stored in the job's metadata as ``river:periodic_job_id`` and allows
    ``remove_by_id``. ``run_on_start`` inserts once as soon as a leader starts.
    """

    schedule: Any  # normalized to a Schedule in __post_init__
    constructor: Callable[[], Any]
    run_on_start: bool = field(default=False, kw_only=True)
    id: str | None = field(default=None, kw_only=True)
    opts: InsertOpts | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "schedule", to_schedule(self.schedule))
        if not callable(self.constructor):
            raise ValidationError("periodic job constructor must be callable")
        if self.id is not None:
            if not isinstance(self.id, str) or not self.id:
                raise ValidationError(f"periodic job id must be a non-empty string, got {self.id!r}")
            if len(self.id) >= PERIODIC_ID_MAX_LEN:
                raise ValidationError(f"periodic job ID must be under {PERIODIC_ID_MAX_LEN} characters")
            if not KIND_RE.match(self.id):
                raise ValidationError(f"periodic job ID {self.id!r} should match regex {KIND_RE.pattern}")
        if self.opts is not None and not isinstance(self.opts, InsertOpts):
            raise ValidationError(f"periodic job opts must be InsertOpts, got {type(self.opts).__name__}")


def constructed_args(job: PeriodicJob) -> tuple[Any, InsertOpts | None] | None:
    """Call the user's constructor: (args, opts), or None when this run is skipped."""
    produced = job.constructor()
    if produced is None:
        return None
    if isinstance(produced, tuple):
        if len(produced) != 2:
            raise ValidationError(
                f"periodic constructor returned a {len(produced)}-tuple; return args or (args, InsertOpts)"
            )
        args, opts = produced
        if opts is not None and not isinstance(opts, InsertOpts):
            raise ValidationError(f"periodic constructor returned opts of type {type(opts).__name__}")
        return None if args is None else (args, opts if opts is not None else job.opts)
    return produced, job.opts


Definer = Callable[[PeriodicJob], periodic_machine.PeriodicJob]


class PeriodicRegistry:
    """The client's periodic definitions by handle, and their numbering in the current enqueuer.

    The enqueuer numbers definitions in the order it receives them (its own
    handles), so the registry, as its only feeder, knows each one's number.
    Not thread-safe: a threaded driver holds a lock around every call.
    """

    def __init__(self, define: Definer) -> None:
        self._define = define
        self._jobs: dict[int, PeriodicJob] = {}
        self._next = 1
        self._term: dict[int, int] | None = None  # registry handle -> enqueuer handle
        self._term_next = 0

    def __len__(self) -> int:
        return len(self._jobs)

    @property
    def jobs(self) -> tuple[tuple[int, PeriodicJob], ...]:
        return tuple(self._jobs.items())

    def add(self, job: PeriodicJob) -> tuple[int, Event | None]:
        """(handle, event for the running enqueuer or None); a duplicate id is refused."""
        handles, event = self.add_many((job,))
        return handles[0], event

    def add_many(self, jobs: tuple[PeriodicJob, ...]) -> tuple[tuple[int, ...], Event | None]:
        ids = {j.id for j in self._jobs.values() if j.id}
        for job in jobs:
            if not isinstance(job, PeriodicJob):
                raise ValidationError(f"expected a PeriodicJob, got {type(job).__name__}")
            if job.id:
                if job.id in ids:
                    raise ValidationError(f"periodic job with ID already registered: {job.id}")
                ids.add(job.id)
        definitions = tuple(self._define(job) for job in jobs)
        handles = []
        for job in jobs:
            handle, self._next = self._next, self._next + 1
            self._jobs[handle] = job
            handles.append(handle)
        event: Event | None = None
        if self._term is not None and jobs:
            for handle in handles:
                self._term[handle], self._term_next = self._term_next, self._term_next + 1
            event = periodic_machine.AddPeriodicJobs(definitions)
        return tuple(handles), event

    def remove(self, handle: int) -> tuple[bool, Event | None]:
        """(whether it existed, event for the running enqueuer or None)."""
        if self._jobs.pop(handle, None) is None:
            return False, None
        if self._term is not None and handle in self._term:
            return True, periodic_machine.RemovePeriodicJobs(handles=(self._term.pop(handle),))
        return True, None

    def remove_by_id(self, periodic_id: str) -> tuple[bool, Event | None]:
        for handle, job in self._jobs.items():
            if job.id == periodic_id:
                return self.remove(handle)
        return False, None

    def start_term(self) -> tuple[periodic_machine.PeriodicJob, ...]:
        """Definitions for a new enqueuer (in handle order); later changes come as events."""
        handles = sorted(self._jobs)
        self._term = {h: i for i, h in enumerate(handles)}
        self._term_next = len(handles)
        return tuple(self._define(self._jobs[h]) for h in handles)

    def end_term(self) -> None:
        self._term = None


# ---------------------------------------------------------------- the leadership machine


class LeadershipState(enum.Enum):
    """The duties; the elector inside has its own states (``elector.state``)."""

    FOLLOWING = "following"
    STARTING = "starting"  # the driver is starting the services
    LEADING = "leading"  # services run
    RETRY_WAIT = "retry_wait"  # a start failed; waiting to try again
    GAVE_UP = "gave_up"  # start failed MAINTENANCE_START_ATTEMPTS times; resignation requested


@dataclass(frozen=True, slots=True)
class ServicesStarted(Event):
    """The driver's answer to ``start_services``: ``error`` is None when every service started."""

    term: int
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class LeadershipOutput(Output):
    became_leader: bool = False
    lost_leadership: bool = False
    # Start every leader-only service now, then answer ServicesStarted(term, error).
    start_services: int | None = None
    # Stop every leader-only service BEFORE running this output's intents (a resign may be among them).
    stop_services: bool = False
    start_error: BaseException | None = None  # a failed start, for the driver's log
    resign_requested: bool = False
    stopped: bool = False  # the elector stopped and resigned: the driver may end the loop


_S = LeadershipState
_OK, _FAIL = IntentSucceeded, IntentFailed
_DUTIES = (_S.STARTING, _S.LEADING, _S.RETRY_WAIT, _S.GAVE_UP)


def _after_elector(state: LeadershipState, via: str, *, can_win: bool = False) -> Transition:
    # Conditional: the elector's report decides. While duties are on the elector leads, and any
    # event may end that (its trust window is checked first): back to following. While
    # following, only a won election (``can_win``) starts the duties.
    if state is not _S.FOLLOWING:
        return to(state, _S.FOLLOWING, via=via)
    return to(_S.FOLLOWING, _S.STARTING, via=via) if can_win else to(_S.FOLLOWING, via=via)


class Leadership(Machine):
    """Elector plus duties. Events: Start, Stop, Tick, LeadershipNotification, ServicesStarted, answers.

    The elector keeps its own table; rows here that hand an event on to it list the states
    its report may lead to.
    """

    INITIAL: ClassVar[LeadershipState] = _S.FOLLOWING
    state: LeadershipState

    TABLE: ClassVar[Table] = {
        (_S.FOLLOWING, Start): to(_S.FOLLOWING, via="_on_forward"),
        **{(s, Stop): _after_elector(s, "_on_forward") for s in _S},
        **{(s, LeadershipNotification): _after_elector(s, "_on_notification") for s in _S},
        **{(s, (r, i)): _after_elector(s, "_on_forward", can_win=(r, i) == (_OK, LeaderElect))
           for s in _S for r in (_OK, _FAIL) for i in _ELECTOR_INTENTS},
        # Our own request_resign: best effort, nothing follows from its answer.
        **{(s, (r, Notify)): to(s, via="_ignore") for s in _S for r in (_OK, _FAIL)},
        **{(s, Tick): _after_elector(s, "_on_tick") for s in (_S.FOLLOWING, _S.STARTING, _S.LEADING,
                                                                 _S.GAVE_UP)},
        # Conditional: the retry timer starts the services again, and the elector may lose meanwhile.
        (_S.RETRY_WAIT, Tick): to(_S.RETRY_WAIT, _S.STARTING, _S.FOLLOWING, via="_on_tick"),
        **{(s, ServicesStarted): to(s, via="_on_started") for s in _S if s is not _S.STARTING},
        # Conditional: started (lead), failed (wait and retry, or give up and ask to resign, which a
        # poll-only client delivers to itself at once: following again); a stale answer changes nothing.
        (_S.STARTING, ServicesStarted): to(
            _S.STARTING, _S.LEADING, _S.RETRY_WAIT, _S.GAVE_UP, _S.FOLLOWING, via="_on_started"),
    }

    def __init__(
        self,
        elector: Elector,
        rng: Rng,
        *,
        max_start_attempts: int = MAINTENANCE_START_ATTEMPTS,
        deliver_request_locally: bool = False,
    ) -> None:
        super().__init__()
        if max_start_attempts < 1:
            raise ValidationError(f"max_start_attempts must be >= 1, got {max_start_attempts}")
        self.elector = elector
        self._rng = rng
        self._max_attempts = max_start_attempts
        # Poll-only clients never hear their own request_resign; they act on it directly.
        self._deliver_locally = deliver_request_locally
        self._term = 0
        self._attempt = 0
        self._flags: dict[str, Any] = {}
        self._forwarded: list[Intent] = []

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader

    @property
    def term(self) -> int:
        return self._term

    # -- driver-facing --------------------------------------------------

    def handle(self, event: Event, now: datetime) -> LeadershipOutput:
        out: LeadershipOutput = super().handle(event, now)
        return out

    def next_deadline(self) -> datetime | None:
        own = min(self._timers.values(), default=None)
        theirs = self.elector.next_deadline()
        if own is None or theirs is None:
            return own or theirs
        return min(own, theirs)

    def timeout_for(self, intent: Intent) -> timedelta | None:
        if isinstance(intent, _ELECTOR_INTENTS):
            return self.elector.timeout_for(intent)
        return super().timeout_for(intent)

    @property
    def in_flight(self) -> tuple[Intent, ...]:
        return self.elector.in_flight + super().in_flight

    # -- internals --------------------------------------------------------

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> LeadershipOutput:
        out = LeadershipOutput(intents=(*self._forwarded, *intents), next_deadline=deadline, **self._flags)
        self._forwarded, self._flags = [], {}
        return out

    def _settle(self, intent: Intent) -> None:
        if not isinstance(intent, _ELECTOR_INTENTS):  # the elector settles its own
            super()._settle(intent)

    def _on_forward(self, event: Event, now: datetime) -> None:
        self._forwarded.extend(self._forward(event, now))

    def _on_notification(self, event: LeadershipNotification, now: datetime) -> None:
        if self.elector.state is not ElectorState.NEW:  # not started yet: the first elect comes anyway
            self._on_forward(event, now)

    def _on_tick(self, event: Tick, now: datetime) -> None:
        if self._due("retry", now) and self.state is _S.RETRY_WAIT:
            self._start(now)
        if self.elector.state is not ElectorState.NEW:
            self._on_forward(event, now)

    def _forward(self, event: Event, now: datetime) -> tuple[Intent, ...]:
        out = self.elector.handle(event, now)
        if out.lost_leadership:
            self._flags["lost_leadership"] = True
            self._end_duties()
        if out.became_leader:
            self._flags["became_leader"] = True
            self._term += 1
            self._attempt = 0
            self._start(now)
        if out.stopped:
            self._flags["stopped"] = True
        return tuple(out.intents)

    def _start(self, now: datetime) -> None:
        self._enter(_S.STARTING)
        self._attempt += 1
        self._flags["start_services"] = self._term

    def _end_duties(self) -> None:
        if self.state in _DUTIES:
            self._flags["stop_services"] = True
        self._timers.pop("retry", None)
        self._enter(_S.FOLLOWING)

    def _on_started(self, event: ServicesStarted, now: datetime) -> None:
        if event.term != self._term or self.state is not _S.STARTING:
            return  # an answer from a term already over
        if event.error is None:
            self._enter(_S.LEADING)
            return
        self._flags["start_error"] = event.error
        self._flags["stop_services"] = True  # undo a partial start before trying again
        if self._attempt < self._max_attempts:
            self._enter(_S.RETRY_WAIT)
            self._timers["retry"] = now + exponential_backoff(self._attempt, _START_BACKOFF_RESET, self._rng)
            return
        self._enter(_S.GAVE_UP)
        self._flags["resign_requested"] = True
        self._emit(Notify(topic=TOPIC_LEADERSHIP, payloads=(build_request_resign(),)))
        if self._deliver_locally and self.elector.is_leader:
            request = LeadershipNotification(LeadershipPayload(ACTION_REQUEST_RESIGN, ""))
            self._on_forward(request, now)
