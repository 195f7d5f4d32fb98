"""tools/dashboard_screenshots.py still makes the guide's screenshots (into a scratch folder)."""

from __future__ import annotations

import importlib.util
import os
import struct
from pathlib import Path

import pytest

pytest.importorskip("selenium")

from river_ui.testing import BrowserUnavailable, browser_paths

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs/guides/dashboard.md"


def load_tool():  # type: ignore[no-untyped-def]
    path = ROOT / "tools/dashboard_screenshots.py"
    spec = importlib.util.spec_from_file_location("dashboard_screenshots", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_makes_every_screenshot_the_guide_shows(tmp_path: Path) -> None:
    try:
        browser_paths()
    except BrowserUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required under CI: {exc}")
        pytest.skip(str(exc))
    tool = load_tool()
    written = tool.take(f"sqlite://{tmp_path / 'demo.sqlite3'}", tmp_path / "out")
    names = sorted(p.name for p in written)
    guide = GUIDE.read_text(encoding="utf-8")
    assert names and all(f"(../images/{name})" in guide for name in names)
    for path in written:
        header = path.read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", header[16:24])
        assert width == tool.WIDTH and height >= 300, path.name
    # And the guide shows nothing the script does not make.
    committed = {p.name for p in (ROOT / "docs/images").glob("dashboard-*.png")}
    assert committed == set(names)
