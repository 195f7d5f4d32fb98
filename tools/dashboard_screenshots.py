"""Redo the dashboard guide's screenshots (docs/images/dashboard-*.png).

    python tools/dashboard_screenshots.py [--database-url URL] [--out docs/images]

Fills a scratch SQLite database with ``river_ui.demo``'s jobs (or uses the database given,
which it migrates and fills too), serves the dashboard with uvicorn on 127.0.0.1 and takes
each page with the same headless Chromium the browser tests use (``river_ui.testing``):
Debian's chromium and chromedriver, nothing downloaded.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from river_protocol.states import JobState  # noqa: E402
from river_ui import create_app  # noqa: E402
from river_ui.demo import seed_demo  # noqa: E402
from river_ui.testing import headless_chromium, serve  # noqa: E402

WIDTH, HEIGHT = 1280, 760


def pages(retryable: int) -> list[tuple[str, str]]:
    """(file name, path) of each page the guide shows."""
    return [
        ("dashboard-overview.png", "/"),
        ("dashboard-jobs.png", "/jobs?queue=email"),
        ("dashboard-job.png", f"/jobs/{retryable}"),
        ("dashboard-periodic.png", "/periodic"),
        ("dashboard-workflow.png", "/workflows/wf_nightly_report"),
        ("dashboard-limits.png", "/limits"),
    ]


def take(database_url: str, out: Path) -> list[Path]:
    seeded = seed_demo(database_url)
    retryable = seeded.ids[JobState.RETRYABLE][0]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with serve(create_app(database_url=database_url, refresh_seconds=0)) as base, headless_chromium(
        width=WIDTH, height=HEIGHT
    ) as browser:
        for name, path in pages(retryable):
            browser.get(base + path)
            # The whole page, up to a screen and a half: set the window to the document's height.
            height = browser.execute_script(
                "return document.getElementById('live').getBoundingClientRect().bottom + window.scrollY"
            )
            # The window's frame takes part of its size: add what the page does not get.
            frame = browser.execute_script("return window.outerHeight - window.innerHeight")
            browser.set_window_size(WIDTH, min(max(int(height) + 16, 300), HEIGHT * 3 // 2) + int(frame))
            target = out / name
            browser.save_screenshot(str(target))
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="a database to fill and show (default: a scratch SQLite file)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        url = args.database_url or f"sqlite://{Path(scratch) / 'dashboard-demo.sqlite3'}"
        for path in take(url, args.out):
            print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
