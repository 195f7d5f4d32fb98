"""Hypothesis strategies for River's protocol values.

Every strategy draws values that River itself would accept or produce, so a
property test built on them exercises real behaviour instead of validation
errors. Each one is typed and usable as ``@given(...)`` argument::

    from hypothesis import given
    from river_protocol.testing import strategies as rst

    @given(rst.job_rows(state=JobState.RETRYABLE))
    def test_retry_is_in_the_future(row): ...

Bounds are keyword-only; defaults keep values in the ranges River stores
(``smallint`` attempts, int64 JSON integers, datetimes between 2000 and 2100).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

from river_protocol.args import arg_field
from river_protocol.constants import MAX_ATTEMPTED_BY
from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import encode
from river_protocol.intents import SetStateUpdate
from river_protocol.job import AttemptError, JobRow
from river_protocol.machines.base import Event, Stop, Tick
from river_protocol.machines.completer import CompletionReason, Submit
from river_protocol.machines.elector import LeadershipNotification
from river_protocol.machines.elector import Start as ElectorStart
from river_protocol.machines.notifications import (
    ACTION_CANCEL,
    ACTION_METADATA_CHANGED,
    ACTION_PAUSE,
    ACTION_REQUEST_RESIGN,
    ACTION_RESIGNED,
    ACTION_RESUME,
    ControlPayload,
    LeadershipPayload,
)
from river_protocol.machines.producer import ControlMessage, InsertNotification, TriggerFetch
from river_protocol.machines.producer import Start as ProducerStart
from river_protocol.options import MAX_SMALLINT, InsertOpts
from river_protocol.outcomes import Cancel, Completed, Discard, Failed, Interrupted, Outcome, Snooze
from river_protocol.states import FINALIZED_STATES, JobState
from river_protocol.unique import REQUIRED_UNIQUE_STATES, STATE_BITS, UniqueOpts

__all__ = [
    "Clock",
    "FinishJob",
    "NestedSampleArgs",
    "ReleaseSlot",
    "Reply",
    "SampleAddress",
    "SampleArgs",
    "args_values",
    "aware_datetimes",
    "clocks",
    "cron_expressions",
    "event_sequences",
    "insert_opts",
    "invalid_unique_opts",
    "job_kinds",
    "job_rows",
    "job_states",
    "json_values",
    "outcomes",
    "queue_names",
    "tags",
    "unique_opts",
]

MIN_DATETIME = datetime(2000, 1, 1)
MAX_DATETIME = datetime(2100, 1, 1)

# Fixed offsets and DST zones: unique-key buckets and cron fire times depend on the zone.
_ZONES: tuple[tzinfo, ...] = (
    UTC,
    timezone(timedelta(hours=5, minutes=30)),
    timezone(timedelta(hours=-8)),
    ZoneInfo("America/New_York"),
    ZoneInfo("Europe/Berlin"),
    ZoneInfo("Australia/Lord_Howe"),
)

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------- time


def aware_datetimes(
    *,
    min_value: datetime = MIN_DATETIME,
    max_value: datetime = MAX_DATETIME,
    timezones: SearchStrategy[tzinfo] | None = None,
) -> SearchStrategy[datetime]:
    """Timezone-aware datetimes (never naive, never a non-existent local time).

    ``min_value``/``max_value`` are naive bounds on the local wall time, as in
    ``hypothesis.strategies.datetimes``. The default zones mix UTC, fixed
    offsets and DST zones (including a half-hour DST shift)::

        @given(aware_datetimes(timezones=st.just(UTC)))
    """
    zones = timezones if timezones is not None else st.sampled_from(_ZONES)
    return st.datetimes(min_value=min_value, max_value=max_value, timezones=zones, allow_imaginary=False)


@dataclass(frozen=True, slots=True)
class Clock:
    """A start instant and the strictly positive steps a test advances it by."""

    start: datetime
    advances: tuple[timedelta, ...]

    def instants(self) -> list[datetime]:
        """``start`` followed by each advanced instant, strictly increasing."""
        out = [self.start]
        for step in self.advances:
            out.append(out[-1] + step)
        return out

    @property
    def end(self) -> datetime:
        return self.instants()[-1]


def clocks(
    *,
    min_steps: int = 0,
    max_steps: int = 20,
    max_advance: timedelta = timedelta(hours=1),
    start: SearchStrategy[datetime] | None = None,
) -> SearchStrategy[Clock]:
    """A ``Clock``: a start (``aware_datetimes()`` by default) and 0 < advance <= ``max_advance`` steps::

        @given(clocks(max_steps=5))
        def test(clock):
            for now in clock.instants(): machine.handle(Tick(), now)
    """
    if max_advance <= timedelta(0):
        raise ValidationError(f"max_advance must be positive, got {max_advance}")
    step = st.timedeltas(min_value=timedelta(microseconds=1), max_value=max_advance)
    return st.builds(
        Clock,
        start=start if start is not None else aware_datetimes(),
        advances=st.lists(step, min_size=min_steps, max_size=max_steps).map(tuple),
    )


# ---------------------------------------------------------------- names


def job_states(*, finalized: bool | None = None) -> SearchStrategy[JobState]:
    """Job states; ``finalized=True``/``False`` keeps only finalized / non-finalized ones."""
    states = [s for s in JobState if finalized is None or s.finalized == finalized]
    return st.sampled_from(states)


def job_kinds() -> SearchStrategy[str]:
    """Kinds a worker may register (``KIND_RE``), at most 127 characters."""
    return st.from_regex(r"\A[a-z][a-z0-9_]{1,20}(\.[a-z0-9_]{1,10})?\Z", fullmatch=True)


def queue_names() -> SearchStrategy[str]:
    """Valid queue names: lowercase alphanumerics joined by single ``_`` or ``-``."""
    return st.from_regex(r"\A[a-z0-9]{1,8}([_-][a-z0-9]{1,8}){0,2}\Z", fullmatch=True)


def tags() -> SearchStrategy[str]:
    """Valid job tags (``TAG_RE``): three or more word characters or inner hyphens."""
    return st.from_regex(r"\A[a-z][a-z0-9_-]{1,14}[a-z0-9]\Z", fullmatch=True)


# ---------------------------------------------------------------- JSON and args

_KEYS = st.from_regex(r"\A[a-z_][a-z0-9_]{0,11}\Z", fullmatch=True)
# Lone surrogates have no UTF-8 form; Go would store them as U+FFFD.
_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20)


def json_values(*, max_leaves: int = 12) -> SearchStrategy[Any]:
    """JSON values Go's encoder round-trips: int64 integers, finite floats, text without surrogates."""
    scalars: SearchStrategy[Any] = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=_INT64_MIN, max_value=_INT64_MAX),
        st.floats(allow_nan=False, allow_infinity=False),
        _TEXT,
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)
        ),
        max_leaves=max_leaves,
    )


@dataclass(frozen=True)
class SampleAddress:
    """Nested struct of ``NestedSampleArgs``; ``zip`` is its unique member."""

    street: str = ""
    zip: str = arg_field(json="zip", unique=True, default="")


@dataclass(frozen=True)
class SampleArgs:
    """A typical args struct: one unique field, a renamed field and an ``omitempty`` one."""

    kind: ClassVar[str] = "river_testing_sample"
    customer_id: int = arg_field(json="customer_id", unique=True, default=0)
    email: str = arg_field(json="email_address", default="")
    note: str = arg_field(omitempty=True, default="")
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class NestedSampleArgs:
    """Args with a nested struct whose unique member is addressed as ``address.zip``."""

    kind: ClassVar[str] = "river_testing_nested"
    account: str = arg_field(unique=True, default="")
    address: SampleAddress = dataclasses.field(default_factory=SampleAddress)
    amount: float = 0.0


def _sample_args() -> SearchStrategy[SampleArgs]:
    return st.builds(
        SampleArgs,
        customer_id=st.integers(min_value=_INT64_MIN, max_value=_INT64_MAX),
        email=_TEXT,
        note=_TEXT,
        labels=st.lists(_TEXT, max_size=3).map(tuple),
    )


def _nested_args() -> SearchStrategy[NestedSampleArgs]:
    return st.builds(
        NestedSampleArgs,
        account=_TEXT,
        address=st.builds(SampleAddress, street=_TEXT, zip=_TEXT),
        amount=st.floats(allow_nan=False, allow_infinity=False),
    )


def args_values(*, dicts: bool = True, dataclass_args: bool = True) -> SearchStrategy[Any]:
    """Job args: JSON-object dicts of Go-encodable values, and/or ``SampleArgs``/``NestedSampleArgs``.

    Every value encodes with ``river_protocol.golang.encoding_json.encode_args``::

        @given(args_values(dataclass_args=False))
        def test(args): assert encode_args(args).startswith(b"{")
    """
    options: list[SearchStrategy[Any]] = []
    if dicts:
        options.append(st.dictionaries(_KEYS, json_values(), max_size=6))
    if dataclass_args:
        options += [_sample_args(), _nested_args()]
    if not options:
        raise ValidationError("args_values needs dicts or dataclass_args")
    return st.one_of(options)


# ---------------------------------------------------------------- job rows


def _attempt_errors(
    draw: DrawFn, count: int, attempt: int, earliest: datetime, latest: datetime
) -> tuple[AttemptError, ...]:
    attempts = sorted(draw(st.lists(st.integers(1, attempt), min_size=count, max_size=count)))
    out = []
    for n in attempts:
        at = draw(st.datetimes(min_value=earliest.replace(tzinfo=None),
                               max_value=latest.replace(tzinfo=None), timezones=st.just(UTC)))
        trace = draw(st.sampled_from(["", "trace"]))
        out.append(AttemptError(at=at, attempt=n, error=draw(_TEXT), trace=trace))
    return tuple(out)


@st.composite
def _job_row(
    draw: DrawFn,
    state: SearchStrategy[JobState],
    min_attempt: int,
    max_attempt: int,
    min_max_attempts: int,
    max_max_attempts: int,
    id_strategy: SearchStrategy[int],
) -> JobRow:
    chosen = draw(state)
    max_attempts = draw(st.integers(min_max_attempts, max_max_attempts))
    low = min_attempt
    if chosen in (JobState.RUNNING, JobState.RETRYABLE):
        low = max(low, 1)  # running was claimed; retryable failed an attempt
    # Pending rows wait for something else to make them available: never attempted.
    high = 0 if chosen is JobState.PENDING else min(max_attempt, max_attempts)
    if low > high:
        reject()  # this state cannot meet the attempt bounds; job_rows checks fixed states upfront
    attempt = draw(st.integers(low, high))

    # A UTC timeline: created <= attempted <= finalized.
    created = draw(st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2090, 1, 1),
                                timezones=st.just(UTC)))
    attempted_at = created + draw(st.timedeltas(timedelta(0), timedelta(days=30))) if attempt else None
    last = attempted_at or created
    finalized_at = last + draw(st.timedeltas(timedelta(0), timedelta(hours=1))) if chosen.finalized else None
    scheduled_at = created + draw(st.timedeltas(timedelta(days=-1), timedelta(days=60)))

    attempted_by: tuple[str, ...] = ()
    if attempt:
        attempted_by = tuple(draw(st.lists(st.from_regex(r"\Aclient_[a-z0-9]{1,6}\Z", fullmatch=True),
                                           min_size=1, max_size=min(attempt, MAX_ATTEMPTED_BY))))
    min_errors = 1 if chosen is JobState.RETRYABLE else 0
    # The attempt a running job is on has not failed yet.
    max_errors = attempt - 1 if chosen is JobState.RUNNING else attempt
    n_errors = draw(st.integers(min_errors, max_errors)) if attempt else 0
    errors = _attempt_errors(draw, n_errors, attempt, created, finalized_at or last) if n_errors else ()

    metadata: dict[str, Any] = draw(st.dictionaries(_KEYS, json_values(max_leaves=3), max_size=3))
    metadata.pop("snoozes", None)
    metadata.pop("cancel_attempted_at", None)

    unique_key: bytes | None = None
    unique_states: int | None = None
    if draw(st.booleans()):
        unique_key = draw(st.binary(min_size=32, max_size=32))
        extra = draw(st.sets(st.sampled_from(list(STATE_BITS.values()))))
        unique_states = sum({STATE_BITS[s] for s in REQUIRED_UNIQUE_STATES} | extra)

    return JobRow(
        id=draw(id_strategy),
        kind=draw(job_kinds()),
        encoded_args=encode(draw(st.dictionaries(_KEYS, json_values(max_leaves=4), max_size=3))),
        state=chosen,
        queue=draw(st.one_of(st.just("default"), queue_names())),
        priority=draw(st.integers(1, 4)),
        attempt=attempt,
        max_attempts=max_attempts,
        attempted_at=attempted_at,
        attempted_by=attempted_by,
        created_at=created,
        finalized_at=finalized_at,
        scheduled_at=scheduled_at,
        errors=errors,
        metadata=metadata,
        tags=tuple(draw(st.lists(tags(), max_size=3))),
        unique_key=unique_key,
        unique_states=unique_states,
    )


def job_rows(
    *,
    state: JobState | SearchStrategy[JobState] | None = None,
    min_attempt: int = 0,
    max_attempt: int = 30,
    min_max_attempts: int = 1,
    max_max_attempts: int = 25,
    ids: SearchStrategy[int] | None = None,
) -> SearchStrategy[JobRow]:
    """Internally consistent ``JobRow`` values, as River could have stored them.

    Guarantees: ``finalized_at`` is set iff the state is finalized;
    ``attempt <= max_attempts``; ``len(errors) <= attempt`` and every error's
    ``attempt`` is in ``1..attempt``; attempted rows have ``attempted_at`` and
    a non-empty ``attempted_by`` (unattempted rows have neither); running and
    retryable rows have been attempted, retryable ones failed at least once;
    pending rows were never attempted; unique rows' ``unique_states`` keep
    River's required states. ``state`` is a state, a strategy, or any state::

        @given(job_rows(state=JobState.RUNNING, min_max_attempts=3))
    """
    if state is None:
        states: SearchStrategy[JobState] = job_states()
    elif isinstance(state, JobState):
        states = st.just(state)
        low = max(min_attempt, 1) if state in (JobState.RUNNING, JobState.RETRYABLE) else min_attempt
        high = 0 if state is JobState.PENDING else min(max_attempt, max_max_attempts)
        if low > high:
            raise ValidationError(
                f"no {state.value} row has attempt in [{min_attempt}, {max_attempt}] "
                f"with max_attempts <= {max_max_attempts}"
            )
    else:
        states = state
    if not 1 <= min_max_attempts <= max_max_attempts <= MAX_SMALLINT:
        raise ValidationError(
            "max_attempts bounds must satisfy "
            f"1 <= {min_max_attempts} <= {max_max_attempts} <= {MAX_SMALLINT}"
        )
    if not 0 <= min_attempt <= max_attempt:
        raise ValidationError(f"attempt bounds must satisfy 0 <= {min_attempt} <= {max_attempt}")
    id_strategy = ids if ids is not None else st.integers(1, _INT64_MAX)
    return _job_row(states, min_attempt, max_attempt, min_max_attempts, max_max_attempts, id_strategy)


# ---------------------------------------------------------------- outcomes

OutcomeKind = type[Completed] | type[Snooze] | type[Cancel] | type[Discard] | type[Failed] | type[Interrupted]
ALL_OUTCOME_KINDS: tuple[OutcomeKind, ...] = (Completed, Snooze, Cancel, Discard, Failed, Interrupted)


def outcomes(
    *,
    kinds: Sequence[OutcomeKind] = ALL_OUTCOME_KINDS,
    max_snooze: timedelta = timedelta(hours=2),
) -> SearchStrategy[Outcome]:
    """Work outcomes: the ways a worker's run can end (``kinds`` restricts them).

    Snooze delays span both sides of the 5 s scheduler interval::

        @given(outcomes(kinds=(Failed, Snooze)))
    """
    by_kind: dict[OutcomeKind, SearchStrategy[Outcome]] = {
        Completed: st.just(Completed()),
        Snooze: st.builds(
            Snooze,
            delay=st.one_of(st.timedeltas(timedelta(0), timedelta(seconds=6)),
                            st.timedeltas(timedelta(0), max_snooze)),
            nanos=st.integers(0, 999),
        ),
        Cancel: st.builds(Cancel, error=st.one_of(st.none(), _TEXT)),
        Discard: st.builds(Discard, error=_TEXT),
        Failed: st.builds(Failed, error=_TEXT, trace=st.sampled_from(["", "Traceback: boom"])),
        Interrupted: st.just(Interrupted()),
    }
    chosen = [by_kind[k] for k in kinds]
    if not chosen:
        raise ValidationError("outcomes needs at least one kind")
    return st.one_of(chosen)


# ---------------------------------------------------------------- options


def _by_state(draw: DrawFn) -> tuple[JobState, ...]:
    optional = [s for s in JobState if s not in REQUIRED_UNIQUE_STATES]
    chosen = list(REQUIRED_UNIQUE_STATES) + draw(st.lists(st.sampled_from(optional), unique=True))
    return tuple(draw(st.permutations(chosen)))


@st.composite
def _unique_opts(draw: DrawFn, non_empty: bool) -> UniqueOpts:
    by_state: tuple[JobState, ...] | None = None
    if draw(st.booleans()):
        by_state = _by_state(draw)
    opts = UniqueOpts(
        by_args=draw(st.booleans()),
        by_period=draw(st.one_of(st.none(), st.timedeltas(timedelta(seconds=1), timedelta(days=2)))),
        by_queue=draw(st.booleans()),
        by_state=by_state,
        exclude_kind=draw(st.booleans()),
    )
    if non_empty and opts.is_empty():
        # Empty draws are common enough that filtering would waste examples.
        return dataclasses.replace(opts, by_args=True)
    if opts.exclude_kind and not (opts.by_args or opts.by_period or opts.by_queue):
        # River refuses exclude_kind without another part of the key.
        return dataclasses.replace(opts, exclude_kind=False)
    return opts


def unique_opts(*, non_empty: bool = False) -> SearchStrategy[UniqueOpts]:
    """``UniqueOpts`` River accepts (``validate()`` passes): periods >= 1 s, custom states
    always holding the required four. ``non_empty=True`` makes every value actually unique."""
    return _unique_opts(non_empty)


@st.composite
def _invalid_unique_opts(draw: DrawFn) -> UniqueOpts:
    if draw(st.integers(0, 3)) == 0:
        required: tuple[JobState, ...] = tuple(REQUIRED_UNIQUE_STATES)
        return UniqueOpts(by_state=draw(st.sampled_from([None, required])), exclude_kind=True)
    if draw(st.booleans()):
        return UniqueOpts(
            by_args=draw(st.booleans()),
            by_period=draw(st.timedeltas(timedelta(microseconds=1), timedelta(microseconds=999_999))),
        )
    missing = draw(st.lists(st.sampled_from(REQUIRED_UNIQUE_STATES), min_size=1, unique=True))
    kept = [s for s in JobState if s not in missing]
    states = draw(st.lists(st.sampled_from(kept), min_size=1, unique=True))
    return UniqueOpts(by_args=draw(st.booleans()), by_state=tuple(states))


def invalid_unique_opts() -> SearchStrategy[UniqueOpts]:
    """``UniqueOpts`` that ``validate()`` rejects: a period under one second, custom
    states missing a required one (River would let a duplicate in while the original runs),
    or ``exclude_kind`` with no args, period or queue in the key."""
    return _invalid_unique_opts()


@st.composite
def _insert_opts(draw: DrawFn, unique: SearchStrategy[UniqueOpts | None]) -> InsertOpts:
    metadata = draw(st.one_of(st.none(), st.dictionaries(_KEYS, json_values(max_leaves=4), max_size=3)))
    return InsertOpts(
        max_attempts=draw(st.one_of(st.just(0), st.integers(1, MAX_SMALLINT))),
        priority=draw(st.integers(0, 4)),
        queue=draw(st.one_of(st.just(""), queue_names())),
        scheduled_at=draw(st.one_of(st.none(), aware_datetimes())),
        tags=draw(st.one_of(st.none(), st.lists(tags(), max_size=4).map(tuple))),
        metadata=metadata,
        pending=draw(st.booleans()),
        unique_opts=draw(unique),
    )


def insert_opts(*, unique: SearchStrategy[UniqueOpts | None] | None = None) -> SearchStrategy[InsertOpts]:
    """``InsertOpts`` that resolve without error (zero values mean "not set", as in Go).

    ``unique`` overrides the unique options drawn (default: none or ``unique_opts()``)::

        @given(insert_opts(unique=st.none()))
    """
    return _insert_opts(unique if unique is not None else st.one_of(st.none(), unique_opts()))


# ---------------------------------------------------------------- cron

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@st.composite
def _cron_field(draw: DrawFn, low: int, high: int, names: tuple[str, ...], question: bool) -> str:
    def value(v: int) -> str:
        use_name: bool = bool(names) and draw(st.booleans())
        if use_name:
            name = names[v - low]
            spelled: str = draw(st.sampled_from([name, name.lower(), name.capitalize()]))
            return spelled
        return str(v)

    def element() -> str:
        form = draw(st.sampled_from(["star", "value", "range", "star_step", "range_step", "start_step"]))
        step = draw(st.integers(1, high - low + 1))
        a = draw(st.integers(low, high))
        b = draw(st.integers(a, high))
        if form == "star":
            return draw(st.sampled_from(["*", "?"] if question else ["*"]))
        if form == "value":
            return value(a)
        if form == "range":
            return f"{value(a)}-{value(b)}"
        if form == "star_step":
            return f"*/{step}"
        if form == "range_step":
            return f"{value(a)}-{value(b)}/{step}"
        return f"{value(a)}/{step}"

    return ",".join(element() for _ in range(draw(st.integers(1, 3))))


@st.composite
def _cron(draw: DrawFn) -> str:
    fields = [
        draw(_cron_field(0, 59, (), False)),
        draw(_cron_field(0, 23, (), False)),
        draw(_cron_field(1, 31, (), True)),
        draw(_cron_field(1, 12, _MONTHS, False)),
        draw(_cron_field(0, 6, _DAYS, True)),
    ]
    return " ".join(fields)


def cron_expressions() -> SearchStrategy[str]:
    """Valid five-field cron expressions (minute hour day-of-month month day-of-week), as
    ``robfig/cron`` v3 ``ParseStandard`` accepts them: ``*``/``?``, values, ranges, steps,
    lists and month/day names in any case. Some never fire (``30 2 31 2 *``); ``parse_cron``
    accepts them and ``next`` returns ``None``::

        @given(cron_expressions())
        def test(expr): parse_cron(expr)
    """
    return _cron()


# ---------------------------------------------------------------- machine event sequences


@dataclass(frozen=True, slots=True)
class Reply:
    """Placeholder step: answer one intent the machine has in flight.

    ``pick`` selects among the intents in flight (modulo their count), ``ok``
    chooses success or failure, and ``variant`` decides the result the harness
    builds (e.g. how many rows a claim returns, or whether an elect won).
    """

    ok: bool = True
    pick: int = 0
    variant: int = 0
    fatal: bool = False


@dataclass(frozen=True, slots=True)
class FinishJob:
    """Placeholder step for a producer: one of its running jobs (``pick``, modulo) finished."""

    pick: int = 0


@dataclass(frozen=True, slots=True)
class ReleaseSlot:
    """Placeholder step for a producer: a stuck job's slot is released."""

    pick: int = 0


Step = Event | Reply | FinishJob | ReleaseSlot
MachineName = Literal["producer", "completer", "elector"]

_ADVANCES = st.one_of(
    st.just(timedelta(0)),
    st.timedeltas(timedelta(0), timedelta(milliseconds=200)),
    st.timedeltas(timedelta(0), timedelta(seconds=20)),
)
_replies = st.builds(Reply, ok=st.booleans(), pick=st.integers(0, 7), variant=st.integers(0, 1 << 16),
                     fatal=st.sampled_from([False, False, False, True]))


def _producer_steps(queue: str) -> SearchStrategy[Step]:
    control = st.builds(
        ControlPayload,
        action=st.sampled_from([ACTION_CANCEL, ACTION_PAUSE, ACTION_RESUME, ACTION_METADATA_CHANGED]),
        queue=st.sampled_from([queue, "*", "other"]),
        job_id=st.integers(1, 40),
        metadata=st.just(b'{"k":1}'),
    )
    return st.one_of(
        st.just(Tick()), _replies, _replies,
        st.builds(FinishJob, pick=st.integers(0, 7)),
        st.builds(ReleaseSlot, pick=st.integers(0, 7)),
        st.builds(InsertNotification, queue=st.sampled_from([queue, "other"])),
        st.just(TriggerFetch()),
        st.builds(ControlMessage, payload=control),
        st.just(Stop()),
    )


_REASONS = st.sampled_from(list(CompletionReason))


def _completer_steps() -> SearchStrategy[Step]:
    update = st.builds(
        SetStateUpdate,
        id=st.integers(1, 30),
        state=st.sampled_from([JobState.COMPLETED, JobState.RETRYABLE, JobState.AVAILABLE,
                               *sorted(FINALIZED_STATES)]),
    )
    return st.one_of(
        st.just(Tick()), _replies, _replies,
        st.builds(Submit, update=update, reason=_REASONS),
        st.just(Stop()),
    )


def _elector_steps(client_id: str) -> SearchStrategy[Step]:
    note = st.builds(
        LeadershipPayload,
        action=st.sampled_from([ACTION_RESIGNED, ACTION_REQUEST_RESIGN]),
        leader_id=st.sampled_from([client_id, "other", ""]),
    )
    return st.one_of(
        st.just(Tick()), _replies, _replies,
        st.builds(LeadershipNotification, payload=note),
        st.just(Stop()),
    )


def event_sequences(
    machine: MachineName,
    *,
    max_size: int = 40,
    queue: str = "default",
    client_id: str = "client_a",
) -> SearchStrategy[list[tuple[Step, timedelta]]]:
    """``(step, advance)`` pairs for ``river_protocol.testing.harness.drive``.

    A step is a machine event or a placeholder (``Reply``, ``FinishJob``,
    ``ReleaseSlot``) the harness resolves against the machine's current state,
    since intent results must name the very intent object in flight. The clock
    moves forward by ``advance`` before the step (ticks for deadlines passed on
    the way are delivered by the harness). Producer and elector sequences open
    with ``Start``; stop events may appear anywhere::

        @given(event_sequences("elector"))
        def test(steps): drive(Elector("client_a", random.Random(0)), steps, start=T0)
    """
    first: list[Event]
    if machine == "producer":
        body, first = _producer_steps(queue), [ProducerStart()]
    elif machine == "completer":
        body, first = _completer_steps(), []
    elif machine == "elector":
        body, first = _elector_steps(client_id), [ElectorStart()]
    else:
        raise ValidationError(f"unknown machine {machine!r}; expected producer, completer or elector")
    opening: list[tuple[Step, timedelta]] = [(e, timedelta(0)) for e in first]
    pairs = st.lists(st.tuples(body, _ADVANCES), max_size=max_size)
    return pairs.map(lambda rest: opening + list(rest))

