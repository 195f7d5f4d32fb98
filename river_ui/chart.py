"""The overview's throughput chart as geometry for an inline SVG drawn on the server.

No script draws it: the template writes the bars this module places, so the
page needs no charting library and works under the strict CSP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH = 150
HEIGHT = 36
# Drawn bottom to top in this order; colours come from the stylesheet (class ``series-NAME``).
STACK = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class Bar:
    series: str
    x: float
    y: float
    width: float
    height: float
    title: str  # the tooltip: bucket start and count


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    peak: int  # the tallest bucket's total, the scale's top
    totals: dict[str, int]  # per series, over the whole span


def stacked_bars(
    series: Mapping[str, Sequence[int]],
    *,
    since: datetime,
    bucket: timedelta,
    width: int = WIDTH,
    height: int = HEIGHT,
) -> Chart:
    """Stacked bars, one column per bucket, scaled so the busiest bucket fills the height."""
    buckets = max((len(v) for v in series.values()), default=0)
    totals = {name: sum(series.get(name, ())) for name in STACK}
    column = [sum(series.get(name, [0] * buckets)[i] for name in STACK) for i in range(buckets)]
    peak = max(column, default=0)
    bars: list[Bar] = []
    if buckets and peak:
        step = width / buckets
        for i in range(buckets):
            base = float(height)
            start = (since + bucket * i).strftime("%H:%M")
            for name in STACK:
                count = series.get(name, [0] * buckets)[i]
                if not count:
                    continue
                h = count / peak * height
                base -= h
                bars.append(
                    Bar(
                        name,
                        round(i * step + 0.5, 2),
                        round(base, 2),
                        round(max(step - 1, 1), 2),
                        round(h, 2),
                        f"{start} {name}: {count}",
                    )
                )
    return Chart(width, height, tuple(bars), peak, totals)
