"""The throughput chart's geometry (river_ui.chart)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from river_ui.chart import stacked_bars

SINCE = datetime(2026, 1, 2, 11, 0, tzinfo=UTC)


def test_bars_stack_per_bucket_and_the_busiest_bucket_fills_the_height() -> None:
    chart = stacked_bars(
        {"completed": (2, 0, 4), "failed": (2, 0, 0), "cancelled": (0, 0, 0)},
        since=SINCE,
        bucket=timedelta(minutes=2),
        width=30,
        height=40,
    )
    assert chart.peak == 4 and chart.totals == {"completed": 6, "failed": 2, "cancelled": 0}
    first = [b for b in chart.bars if b.x < 10]
    assert [(b.series, b.y, b.height) for b in first] == [("completed", 20.0, 20.0), ("failed", 0.0, 20.0)]
    assert first[0].title == "11:00 completed: 2"
    third = [b for b in chart.bars if b.x > 20]
    assert [(b.series, b.y, b.height, b.title) for b in third] == [
        ("completed", 0.0, 40.0, "11:04 completed: 4")
    ]
    assert all(b.width == 9.0 for b in chart.bars)  # a pixel between columns


def test_an_idle_hour_draws_no_bars() -> None:
    chart = stacked_bars({"completed": (0, 0)}, since=SINCE, bucket=timedelta(minutes=30))
    assert chart.bars == () and chart.peak == 0
    assert stacked_bars({}, since=SINCE, bucket=timedelta(minutes=1)).bars == ()
