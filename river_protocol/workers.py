"""The ``Workers`` registry: which callable works which job kind (Go's ``river.Workers``).

Two ways to register, both keyed by the args type's ``kind``::

    workers = Workers()

    @workers.job(SendEmail, timeout=timedelta(seconds=30))
    def send_email(ctx, args: SendEmail) -> None: ...

    class ResizeWorker:
        args_type = ResizeImage
        def work(self, ctx, args: ResizeImage) -> None: ...
    workers.add(ResizeWorker())

A function taking a single parameter receives only the args; with two it gets
``(ctx, args)``. A worker class may define ``timeout(job) -> timedelta | None``
and ``next_retry(job) -> datetime | None`` like Go's ``Timeout``/``NextRetry``.
Args decode with ``golang.encoding_json.decode_args``, i.e. the way Go's
``json.Unmarshal`` fills the matching struct.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from river_protocol.args import kind_of
from river_protocol.errors import ValidationError
from river_protocol.golang.encoding_json import decode_args
from river_protocol.job import JobRow
from river_protocol.options import validate_kind

F = TypeVar("F", bound=Callable[..., Any])

TimeoutFor = Callable[[JobRow], "timedelta | None"]
NextRetryFor = Callable[[JobRow], "datetime | None"]


def _positional_arity(fn: Callable[..., Any]) -> int:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return 2
    params = [
        p for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values()):
        return 2
    return len(params)


@dataclass(frozen=True, slots=True)
class WorkerEntry:
    """One registered kind. ``call(ctx, args)`` runs the worker whatever its arity."""

    kind: str
    args_type: type
    fn: Callable[..., Any]
    takes_context: bool
    timeout_for: TimeoutFor | None = None
    next_retry_for: NextRetryFor | None = None

    def decode(self, job: JobRow) -> Any:
        """The job's args as ``args_type`` (raises ``ValidationError`` when they don't fit)."""
        return decode_args(self.args_type, job.encoded_args)

    def call(self, ctx: Any, args: Any) -> Any:
        return self.fn(ctx, args) if self.takes_context else self.fn(args)

    @property
    def ctx_call(self) -> Callable[[Any, Any], Any]:
        """What ``call`` runs, as a ``(ctx, args)`` callable: ``fn`` itself when it takes ctx (a
        chain built once per worker then calls it with no layer between), else ``call``."""
        return self.fn if self.takes_context else self.call

    def timeout(self, job: JobRow) -> timedelta | None:
        return None if self.timeout_for is None else self.timeout_for(job)

    def next_retry(self, job: JobRow) -> datetime | None:
        return None if self.next_retry_for is None else self.next_retry_for(job)


def _constant(value: Any) -> Callable[[JobRow], Any]:
    return lambda job: value


class Workers:
    """Kind → worker. Registering a kind twice is an error, as in Go."""

    def __init__(self) -> None:
        self._entries: dict[str, WorkerEntry] = {}

    def job(
        self,
        args_type: type,
        *,
        timeout: timedelta | None = None,
        next_retry: NextRetryFor | None = None,
    ) -> Callable[[F], F]:
        """Decorator registering a function ``fn(ctx, args)`` or ``fn(args)`` for ``args_type``."""

        def register(fn: F) -> F:
            arity = _positional_arity(fn)
            if arity not in (1, 2):
                raise ValidationError(
                    f"worker {getattr(fn, '__qualname__', fn)!r} must take (args) or (ctx, args), "
                    f"it takes {arity} positional parameters"
                )
            self._register(WorkerEntry(
                kind=kind_of(args_type), args_type=args_type, fn=fn, takes_context=arity == 2,
                timeout_for=None if timeout is None else _constant(timeout), next_retry_for=next_retry,
            ))
            return fn

        return register

    def add(self, worker: Any, args_type: type | None = None) -> None:
        """Register an object with ``work(ctx, args)`` (``args_type`` defaults to its attribute)."""
        args_type = args_type or getattr(worker, "args_type", None)
        if not isinstance(args_type, type):
            raise ValidationError(
                f"{type(worker).__qualname__} needs an args_type (a class attribute or the argument)"
            )
        work = getattr(worker, "work", None)
        if not callable(work):
            raise ValidationError(f"{type(worker).__qualname__} has no work(ctx, args) method")
        timeout = getattr(worker, "timeout", None)
        next_retry = getattr(worker, "next_retry", None)
        self._register(WorkerEntry(
            kind=kind_of(args_type), args_type=args_type, fn=work, takes_context=_positional_arity(work) != 1,
            timeout_for=timeout if callable(timeout) else None,
            next_retry_for=next_retry if callable(next_retry) else None,
        ))

    def _register(self, entry: WorkerEntry) -> None:
        validate_kind(entry.kind)
        if entry.kind in self._entries:
            raise ValidationError(f"worker for kind {entry.kind!r} is already registered")
        self._entries[entry.kind] = entry

    def get(self, kind: str) -> WorkerEntry | None:
        return self._entries.get(kind)

    def __contains__(self, kind: object) -> bool:
        return kind in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self._entries)
