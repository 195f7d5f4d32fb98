"""Client logic that does not wait, shared by ``river_sync.Client`` and ``river_anyio``'s client.

The two clients differ in how they wait (threads and locks / trio tasks); what
they build from their arguments and what they make of a machine's output is
the same and lives here once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from river_db.events import Event
from river_protocol.client_core import EVENT_FOR_QUEUE, LeaderElectionConfig, event_kind_for_completion
from river_protocol.errors import ValidationError
from river_protocol.machines.completer import CompleterOutput
from river_protocol.machines.producer import ProducerOutput


@dataclass(frozen=True, slots=True)
class ProducerStats:
    """One queue's producer: whether it is alive (started, fetching, its task or thread running)
    and when its last claim answered (None: none yet)."""

    queue: str
    state: str  # the producer machine's state: new, starting, running, stopping, stopped
    alive: bool
    paused: bool
    last_fetched_at: datetime | None
    claim_failures: int  # claims failed in a row since the last that answered


@dataclass(slots=True)
class ClientStats:
    running: int = 0
    timed_out: int = 0  # runs whose token was set by their job timeout
    stuck: int = 0  # runs still going 10 s after their timeout
    stuck_now: int = 0  # of those, still running now
    producers: tuple[ProducerStats, ...] = ()  # one per queue worked, by queue name


def producer_stats(queue: str, runner: Any) -> ProducerStats:
    """``runner``'s producer as seen now; read from any thread (it only reads attributes)."""
    machine = runner.machine
    state = machine.state.value
    running = runner.started and not runner.done.is_set()
    return ProducerStats(
        queue=queue, state=state, alive=running and state == "running", paused=bool(machine.paused),
        last_fetched_at=machine.last_fetched_at, claim_failures=machine.claim_failures,
    )


def health_report(client_state: str, stats: ClientStats, now: datetime) -> tuple[bool, dict[str, Any]]:
    """Whether a worker process is healthy, and the JSON-ready report saying why.

    Healthy: the client has started and every producer is alive. A paused queue or one with
    every slot taken does not fetch, so how long ago a producer last fetched is reported
    for the reader to judge, never judged here.
    """
    producers = [
        {
            "queue": p.queue, "state": p.state, "alive": p.alive, "paused": p.paused,
            "last_fetched_at": p.last_fetched_at.isoformat() if p.last_fetched_at is not None else None,
            "seconds_since_fetch": (round((now - p.last_fetched_at).total_seconds(), 3)
                                    if p.last_fetched_at is not None else None),
            "claim_failures": p.claim_failures,
        }
        for p in stats.producers
    ]
    healthy = client_state == "started" and all(p.alive for p in stats.producers)
    return healthy, {
        "status": "ok" if healthy else "failing", "client_state": client_state,
        "running_jobs": stats.running, "producers": producers,
    }


def election_config(
    value: bool | LeaderElectionConfig, disabled: bool = False
) -> LeaderElectionConfig | None:
    """The ``leader_election`` and ``leader_election_disabled`` arguments as a config (None: this
    client never leads). ``leader_election_disabled=True`` is Go's ``LeaderElectionDisabled``,
    the same as ``leader_election=False``; with election settings beside it, it contradicts them."""
    if not isinstance(disabled, bool):
        raise ValidationError(f"leader_election_disabled must be a bool, got {disabled!r}")
    if isinstance(value, LeaderElectionConfig):
        if disabled:
            raise ValidationError(
                "leader_election_disabled=True contradicts the leader_election settings given"
            )
        return value
    if not isinstance(value, bool):
        raise ValidationError(f"leader_election must be a bool or a LeaderElectionConfig, got {value!r}")
    return LeaderElectionConfig() if value and not disabled else None


def accepts_triggers(runner: Any) -> bool:
    """Whether a producer takes fetch triggers and control messages yet."""
    # Before its start upsert answered a producer accepts no triggers; its own start
    # fetch covers anything announced meanwhile (Go subscribes only after that upsert).
    return runner.machine.state.value not in ("new", "starting")


def report_producer_output(queue: str, out: ProducerOutput, publish: Callable[[Event], None],
                           log: logging.Logger) -> None:
    """Publish a producer's queue events, answer the control messages it settled, and log a failed
    start or claim."""
    for ack in out.acks:
        ack.set()  # threading.Event or trio.Event: the admin call waiting on it returns
    for qe in out.queue_events:
        publish(Event(EVENT_FOR_QUEUE[qe.kind], queue=qe.queue, metadata=qe.metadata))
    if out.start_error is not None:
        log.error("river: producer for queue %r failed to start: %s", queue, out.start_error)
    retry = out.start_failure
    if retry is not None:
        log.warning("river: producer for queue %r failed to start (%d in a row): %s; retrying in %.1f s",
                    queue, retry.consecutive, retry.error, retry.retry_in.total_seconds())
    failure = out.claim_failure
    if failure is not None:
        log.log(logging.WARNING if failure.repeated else logging.DEBUG,
                "river: claiming jobs of queue %r failed (%d in a row): %s",
                queue, failure.consecutive, failure.error)
    if out.reconciled_job_ids:
        log.warning("river: a claim on queue %r failed but had committed; put %d job(s) back to"
                    " available: %s", queue, len(out.reconciled_job_ids), list(out.reconciled_job_ids))


def report_completer_output(out: CompleterOutput, publish_all: Callable[[list[Event]], None],
                            log: logging.Logger) -> None:
    """Publish the completions' events and log the outcomes that could not be recorded.

    An event names the outcome the stored row bears out, so a subscriber never hears of one
    the database did not record; a row finalized elsewhere meanwhile is announced by its state
    (``event_kind_for_completion``).
    """
    events: list[Event] = []
    append = events.append
    for completion in out.completions:
        job, persisted = completion.job, completion.persisted
        if persisted is None:
            log.info(
                "river: job %d was no longer running (now %s); its outcome (%s) was not recorded",
                job.id, job.state.value, completion.reason.value,
            )
        kind = event_kind_for_completion(persisted, job.state)
        if kind is not None:
            append(Event(kind, job, job.queue))
    if events:
        publish_all(events)
    for missing in out.missing:
        log.info("river: job %d was deleted before its outcome was recorded", missing.update.id)
    for dropped in out.dropped:
        log.error("river: the outcome of job %d (%s) could not be recorded: %s; the job stays running "
                  "until River's rescuer takes it", dropped.update.id, dropped.reason.value, dropped.error)
