"""Leader election (docs/protocol.md §10): follower, leader, resigning, stopped.

Leadership is trusted locally only until ``attempt start + TTL - 1 s`` of the
last successful elect/reelect; a trust timer enforces that even when the
database stops answering, so this client never believes it leads past the
window. On every voluntary step-down the machine reports ``lost_leadership``
*before* emitting the resign, so the driver stops maintenance first (§10.3).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar

from river_protocol.constants import (
    ELECT_BACKOFF_RESET,
    ELECT_INTERVAL,
    ELECT_INTERVAL_JITTER,
    ELECT_TIMEOUT,
    ELECT_WAKEUP_JITTER,
    LEADER_TRUST_MARGIN,
    LEADER_TTL,
    REELECT_BACKOFF_RESET,
    RESIGN_MAX_ATTEMPTS,
)
from river_protocol.errors import ProtocolError, ValidationError
from river_protocol.intents import Intent, LeaderElect, LeaderReelect, LeaderResign, LeaderRow
from river_protocol.machines.base import (
    DeadlineEvent,
    Event,
    IntentFailed,
    IntentSucceeded,
    Machine,
    Output,
    Rng,
    Stop,
    Table,
    Tick,
    exponential_backoff,
    to,
    uniform,
)
from river_protocol.machines.notifications import ACTION_REQUEST_RESIGN, ACTION_RESIGNED, LeadershipPayload


class ElectorState(enum.Enum):
    NEW = "new"
    FOLLOWER = "follower"
    LEADER = "leader"
    RESIGNING = "resigning"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Start(Event):
    pass


@dataclass(frozen=True, slots=True)
class LeadershipNotification(Event):
    payload: LeadershipPayload


@dataclass(frozen=True, slots=True)
class ElectorOutput(Output):
    became_leader: bool = False
    lost_leadership: bool = False
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class Term:
    elected_at: datetime
    trust_until: datetime


_S = ElectorState
_OK, _FAIL = IntentSucceeded, IntentFailed
_ALL = tuple(ElectorState)


@dataclass(frozen=True, slots=True)
class TrustExpired(DeadlineEvent):
    """The leader's trust window ran out: it steps down before anything else is handled."""


class Elector(Machine):
    INITIAL: ClassVar[ElectorState] = _S.NEW
    state: ElectorState

    TABLE: ClassVar[Table] = {
        (_S.NEW, Start): to(_S.FOLLOWER, via="_on_start"),
        (_S.NEW, Stop): to(_S.STOPPED, via="_on_stop_idle"),
        (_S.FOLLOWER, Tick): to(_S.FOLLOWER, via="_on_follower_tick"),
        # Conditional: lost (stay), won, or won too late to trust (resign at once).
        (_S.FOLLOWER, (_OK, LeaderElect)): to(_S.FOLLOWER, _S.LEADER, _S.RESIGNING, via="_on_elected"),
        (_S.FOLLOWER, (_FAIL, LeaderElect)): to(_S.FOLLOWER, via="_on_elect_failed"),
        (_S.FOLLOWER, LeadershipNotification): to(_S.FOLLOWER, via="_on_follower_notification"),
        (_S.FOLLOWER, Stop): to(_S.STOPPED, via="_on_stop_idle"),
        (_S.LEADER, Tick): to(_S.LEADER, via="_on_leader_tick"),
        (_S.LEADER, TrustExpired): to(_S.RESIGNING, via="_on_trust_expired"),
        # Conditional: kept, lost to another client (follow), or kept too late to trust (resign).
        (_S.LEADER, (_OK, LeaderReelect)): to(_S.LEADER, _S.FOLLOWER, _S.RESIGNING, via="_on_reelected"),
        (_S.LEADER, (_FAIL, LeaderReelect)): to(_S.LEADER, via="_on_reelect_failed"),
        # Conditional: only request_resign makes the leader step down.
        (_S.LEADER, LeadershipNotification): to(_S.LEADER, _S.RESIGNING, via="_on_leader_notification"),
        (_S.LEADER, Stop): to(_S.RESIGNING, via="_on_stop_leader"),
        (_S.RESIGNING, Tick): to(_S.RESIGNING, via="_on_resign_tick"),
        # Conditional: another term left to give up (stay), else follow again, or stop if asked to.
        (_S.RESIGNING, (_OK, LeaderResign)): to(_S.RESIGNING, _S.FOLLOWER, _S.STOPPED, via="_on_resigned"),
        (_S.RESIGNING, (_FAIL, LeaderResign)): to(
            _S.RESIGNING, _S.FOLLOWER, _S.STOPPED, via="_on_resign_failed"),
        (_S.RESIGNING, LeadershipNotification): to(_S.RESIGNING, via="_ignore"),
        (_S.RESIGNING, Stop): to(_S.RESIGNING, via="_on_stop_resigning"),
        (_S.STOPPED, Tick): to(_S.STOPPED, via="_ignore"),
        (_S.STOPPED, Stop): to(_S.STOPPED, via="_ignore"),
        (_S.STOPPED, LeadershipNotification): to(_S.STOPPED, via="_ignore"),
        # A term won by an elect answered after stop must still be given up.
        (_S.LEADER, (_OK, LeaderElect)): to(_S.LEADER, via="_on_late_elected"),
        (_S.RESIGNING, (_OK, LeaderElect)): to(_S.RESIGNING, via="_on_late_elected"),
        # Conditional: only a won term makes a stopped elector resign it.
        (_S.STOPPED, (_OK, LeaderElect)): to(_S.STOPPED, _S.RESIGNING, via="_on_late_elected"),
        **{(s, (_FAIL, LeaderElect)): to(s, via="_ignore") for s in (_S.LEADER, _S.RESIGNING, _S.STOPPED)},
        # Reelect answers that arrive after a step-down no longer matter.
        **{(s, (r, LeaderReelect)): to(s, via="_ignore") for s in (_S.FOLLOWER, _S.RESIGNING, _S.STOPPED)
           for r in (_OK, _FAIL)},
        **{(s, (r, LeaderResign)): to(s, via="_ignore") for s in (_S.FOLLOWER, _S.LEADER, _S.STOPPED)
           for r in (_OK, _FAIL)},
    }

    def __init__(
        self,
        client_id: str,
        rng: Rng,
        *,
        ttl: timedelta = LEADER_TTL,
        elect_interval: timedelta = ELECT_INTERVAL,
        elect_jitter: timedelta = ELECT_INTERVAL_JITTER,
    ) -> None:
        super().__init__()
        if not client_id:
            raise ValidationError("elector needs a non-empty client id")
        if ttl <= LEADER_TRUST_MARGIN:
            raise ValidationError(f"leader TTL must exceed {LEADER_TRUST_MARGIN}, got {ttl}")
        self.client_id = client_id
        self._rng = rng
        self._ttl, self._interval, self._jitter = ttl, elect_interval, elect_jitter
        self.term: Term | None = None
        self._attempt_started: datetime | None = None
        self._errors = 0
        self._resign_attempt = 0
        self._resign_terms: list[Term] = []
        self._stop_requested = False
        self._became = self._lost = self._stopped_now = False

    @property
    def is_leader(self) -> bool:
        return self.state is _S.LEADER

    def _output(self, intents: tuple[Intent, ...], deadline: datetime | None) -> ElectorOutput:
        out = ElectorOutput(
            intents=intents, next_deadline=deadline, became_leader=self._became,
            lost_leadership=self._lost, stopped=self._stopped_now,
        )
        self._became = self._lost = self._stopped_now = False
        return out

    def _new_term(self, row: object, started: datetime) -> Term:
        if not isinstance(row, LeaderRow):
            raise ProtocolError(f"leader statements return a LeaderRow or None, got {type(row).__name__}")
        if row.leader_id != self.client_id:
            raise ProtocolError(f"leader row for {row.leader_id!r} answered {self.client_id!r}'s attempt")
        return Term(row.elected_at, started + self._ttl - LEADER_TRUST_MARGIN)

    # ---------------------------------------------------------------- follower

    def _on_start(self, event: Start, now: datetime) -> None:
        self._timers["elect"] = now

    def _on_follower_tick(self, event: Tick, now: datetime) -> None:
        if self._due("elect", now) and self._flight_of(LeaderElect) is None:
            self._attempt_started = now
            self._emit(LeaderElect(leader_id=self.client_id, ttl=self._ttl), ELECT_TIMEOUT)

    def _on_elected(self, event: IntentSucceeded, now: datetime) -> None:
        assert self._attempt_started is not None
        if event.result is None:
            self._errors = 0
            self._timers["elect"] = now + uniform(self._rng, self._interval, self._interval + self._jitter)
            return
        self._become_leader(self._new_term(event.result, self._attempt_started), now)

    def _deadline_events(self, now: datetime) -> tuple[TrustExpired, ...]:
        # Trust is local and time-bound: whatever arrives, a leader past its window steps down first.
        if self.state is _S.LEADER and self.term is not None and now >= self.term.trust_until:
            return (TrustExpired(),)
        return ()

    def _on_trust_expired(self, event: TrustExpired, now: datetime) -> None:
        self._step_down(now, resign=True)

    def _become_leader(self, term: Term, now: datetime) -> None:
        if now >= term.trust_until:
            # The attempt took longer than the trust window: the row is ours but can't be trusted.
            self._resign_terms.append(term)
            self._begin_resign(now)
            return
        self._errors = 0
        self.term = term
        self._enter(_S.LEADER)
        self._became = True
        self._timers.pop("elect", None)
        self._timers["reelect"] = now + self._interval
        self._timers["trust"] = term.trust_until

    def _on_elect_failed(self, event: IntentFailed, now: datetime) -> None:
        self._errors += 1
        self._timers["elect"] = now + exponential_backoff(self._errors, ELECT_BACKOFF_RESET, self._rng)

    def _on_follower_notification(self, event: LeadershipNotification, now: datetime) -> None:
        msg = event.payload
        if msg.action == ACTION_RESIGNED and msg.leader_id != self.client_id and "elect" in self._timers:
            wake = now + uniform(self._rng, timedelta(0), ELECT_WAKEUP_JITTER)
            self._timers["elect"] = min(self._timers["elect"], wake)

    # ---------------------------------------------------------------- leader

    def _on_leader_tick(self, event: Tick, now: datetime) -> None:
        # A tick at or past the trust window never gets here: TrustExpired ran first.
        assert self.term is not None
        if self._due("reelect", now) and self._flight_of(LeaderReelect) is None:
            self._attempt_started = now
            timeout = min(ELECT_TIMEOUT, self.term.trust_until - now)
            self._emit(
                LeaderReelect(leader_id=self.client_id, elected_at=self.term.elected_at, ttl=self._ttl),
                timeout,
            )

    def _on_reelected(self, event: IntentSucceeded, now: datetime) -> None:
        assert self._attempt_started is not None and self.term is not None
        if event.result is None:
            self._step_down(now, resign=False)
            return
        term = self._new_term(event.result, self._attempt_started)
        if now >= term.trust_until:
            self._step_down(now, resign=True)
            return
        self.term = term
        self._errors = 0
        self._timers["trust"] = term.trust_until
        self._timers["reelect"] = now + self._interval

    def _on_reelect_failed(self, event: IntentFailed, now: datetime) -> None:
        assert self.term is not None
        remaining = self.term.trust_until - now  # positive: TrustExpired ran first otherwise
        self._errors += 1
        wait = exponential_backoff(self._errors, REELECT_BACKOFF_RESET, self._rng)
        self._timers["reelect"] = now + min(wait, remaining)

    def _on_leader_notification(self, event: LeadershipNotification, now: datetime) -> None:
        if event.payload.action == ACTION_REQUEST_RESIGN:
            self._step_down(now, resign=True)

    def _on_stop_leader(self, event: Stop, now: datetime) -> None:
        self._stop_requested = True
        self._step_down(now, resign=True)

    def _step_down(self, now: datetime, *, resign: bool) -> None:
        assert self.term is not None
        self._lost = True
        self._timers.clear()
        term, self.term = self.term, None
        if resign:
            self._resign_terms.append(term)
            self._begin_resign(now)
        else:
            self._after_leadership(now)

    # ---------------------------------------------------------------- resigning

    def _begin_resign(self, now: datetime) -> None:
        self._enter(_S.RESIGNING)
        self._resign_attempt = 1
        self._send_resign()

    def _send_resign(self) -> None:
        term = self._resign_terms[0]
        timeout = timedelta(seconds=self._resign_attempt)
        self._emit(LeaderResign(leader_id=self.client_id, elected_at=term.elected_at), timeout)

    def _on_resign_tick(self, event: Tick, now: datetime) -> None:
        if self._due("resign", now):
            self._send_resign()

    def _on_resigned(self, event: IntentSucceeded, now: datetime) -> None:
        self._next_resign(now)

    def _on_resign_failed(self, event: IntentFailed, now: datetime) -> None:
        if self._resign_attempt >= RESIGN_MAX_ATTEMPTS:
            self._next_resign(now)  # the TTL will free the row anyway
            return
        wait = exponential_backoff(self._resign_attempt, RESIGN_MAX_ATTEMPTS, self._rng)
        self._timers["resign"] = now + wait
        self._resign_attempt += 1

    def _next_resign(self, now: datetime) -> None:
        self._resign_terms.pop(0)
        if self._resign_terms:
            self._resign_attempt = 1
            self._send_resign()
            return
        self._after_leadership(now)

    def _on_stop_resigning(self, event: Stop, now: datetime) -> None:
        self._stop_requested = True

    def _after_leadership(self, now: datetime) -> None:
        if self._stop_requested:
            self._finish()
            return
        # Back to following at once: this client may win again (Go does the same).
        self._enter(_S.FOLLOWER)
        self._timers["elect"] = now

    # ---------------------------------------------------------------- stop

    def _on_stop_idle(self, event: Stop, now: datetime) -> None:
        self._stop_requested = True
        self._finish()

    def _finish(self) -> None:
        self._enter(_S.STOPPED)
        self._timers.clear()
        self._stopped_now = True

    def _on_late_elected(self, event: IntentSucceeded, now: datetime) -> None:
        if event.result is None:
            return
        assert self._attempt_started is not None
        term = self._new_term(event.result, self._attempt_started)
        self._resign_terms.append(term)
        if self.state is _S.STOPPED:
            self._enter(_S.RESIGNING)
            self._resign_attempt = 1
            self._send_resign()
