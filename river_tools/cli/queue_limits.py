"""The flow-control limits as ``river queues`` reads and prints them (``--rate 100/60s``,
``global 2, rate 100/1m0s``), kept apart from the commands so each piece is testable alone."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Any

from river_protocol.flow_control import QueueLimits
from river_protocol.flow_intents import QueueFlowStatus

UNSET: Any = object()  # an option not given: the limit keeps its value
_PERIOD_RE = re.compile(r"^(\d+)(ms|s|m|h)$")
_UNITS = {"ms": timedelta(milliseconds=1), "s": timedelta(seconds=1), "m": timedelta(minutes=1),
          "h": timedelta(hours=1)}


def parse_limit(text: str) -> int | None:
    """A limit option: a positive integer, or ``none`` to remove the limit."""
    if text.lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or none, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a limit must be at least 1, got {value}")
    return value


def parse_rate(text: str) -> tuple[int | None, timedelta | None]:
    """``N/PERIOD`` (``100/60s``, ``5/250ms``, ``1000/1h``), or ``none`` for no rate limit."""
    if text.lower() == "none":
        return None, None
    allowed, sep, period = text.partition("/")
    match = _PERIOD_RE.match(period.strip())
    if not sep or match is None:
        raise argparse.ArgumentTypeError(f"expected N/PERIOD such as 100/60s or 5/250ms, got {text!r}")
    count = parse_limit(allowed.strip())
    length = int(match.group(1)) * _UNITS[match.group(2)]
    if length <= timedelta(0):
        raise argparse.ArgumentTypeError(f"the period must be positive, got {period!r}")
    return count, length


def merge(current: QueueLimits, *, global_limit: Any = UNSET, local_limit: Any = UNSET,
          rate: str | None = None) -> QueueLimits:
    """``current`` with the limits given replaced (``UNSET`` keeps one)."""
    values: dict[str, Any] = {"global_limit": current.global_limit, "local_limit": current.local_limit,
                              "rate_allowed": current.rate_allowed, "rate_period": current.rate_period}
    if global_limit is not UNSET:
        values["global_limit"] = global_limit
    if local_limit is not UNSET:
        values["local_limit"] = local_limit
    if rate is not None:
        values["rate_allowed"], values["rate_period"] = parse_rate(rate)
    return QueueLimits(**values)


def _period(period: timedelta) -> str:
    ms = period // timedelta(milliseconds=1)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def describe_limits(limits: QueueLimits | QueueFlowStatus) -> str:
    """``global 2, local 1, rate 100/1m`` (``none`` when no limit is set)."""
    lim = limits.limits if isinstance(limits, QueueFlowStatus) else limits
    parts = []
    if lim.global_limit is not None:
        parts.append(f"global {lim.global_limit}")
    if lim.local_limit is not None:
        parts.append(f"local {lim.local_limit}")
    if lim.rate_allowed is not None and lim.rate_period is not None:
        parts.append(f"rate {lim.rate_allowed}/{_period(lim.rate_period)}")
    return ", ".join(parts) or "none"


def describe_busiest(status: QueueFlowStatus) -> str:
    """The busiest partitions with their running counts: ``[7]=2 [3]=1``."""
    return " ".join(f"{u.key.replace(' ', '')}={u.running}" for u in status.busiest) or "-"


def flow_json(status: QueueFlowStatus) -> dict[str, Any]:
    lim = status.limits
    return {
        "global_limit": lim.global_limit, "local_limit": lim.local_limit,
        "rate_allowed": lim.rate_allowed, "rate_period_ms": lim.rate_period_ms,
        "concurrency_partition": status.concurrency_partition.as_json(),
        "rate_partition": status.rate_partition.as_json(),
        "running": status.running,
        "busiest_partitions": [{"key": u.key, "running": u.running} for u in status.busiest],
    }
