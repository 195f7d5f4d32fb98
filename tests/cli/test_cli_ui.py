"""``river ui``: where it listens, when it refuses, and a real server answering."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from river_tools.cli import ui as cli_ui
from river_tools.cli.main import main
from river_ui.demo import seed_demo
from river_ui.security import BasicAuth, ConfigurationError, check_bind, is_loopback
from river_ui.testing import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite://{tmp_path / 'ui.sqlite3'}"
    seed_demo(url)
    return url


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(cli_ui, "run_server", lambda app, **kw: calls.append({"app": app, **kw}))
    monkeypatch.delenv("RIVER_UI_USERNAME", raising=False)
    monkeypatch.delenv("RIVER_UI_PASSWORD", raising=False)
    return calls


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.4", "example.com", ""))
    check_bind("0.0.0.0", BasicAuth("a", "b"))
    check_bind("0.0.0.0", None, allow_unauthenticated_remote=True)
    with pytest.raises(ConfigurationError, match="without authentication"):
        check_bind("0.0.0.0", None)


def test_listens_on_loopback_by_default(db: str, served: list[dict[str, Any]]) -> None:
    assert main(["ui", "--database-url", db]) == 0
    (call,) = served
    assert (call["host"], call["port"], call["root_path"]) == ("127.0.0.1", 8000, "")


def test_refuses_another_address_without_authentication(
    db: str,
    served: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["ui", "--database-url", db, "--host", "0.0.0.0"]) == 2
    assert "refusing to serve the dashboard on 0.0.0.0 without authentication" in capsys.readouterr().err
    assert served == []


def test_serves_another_address_with_authentication_or_when_told_it_is_deliberate(
    db: str,
    served: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["ui", "--database-url", db, "--host", "0.0.0.0", "--allow-unauthenticated-remote"]) == 0
    monkeypatch.setenv("RIVER_UI_USERNAME", "ops")
    monkeypatch.setenv("RIVER_UI_PASSWORD", "pw")
    assert main(["ui", "--database-url", db, "--host", "0.0.0.0", "--port", "9001", "--read-only"]) == 0
    assert [c["host"] for c in served] == ["0.0.0.0", "0.0.0.0"] and served[1]["port"] == 9001
    assert served[1]["app"].state.river_ui.read_only
    assert served[1]["app"].state.river_ui.auth == BasicAuth("ops", "pw")


def test_bad_settings_are_usage_errors(
    db: str,
    served: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    assert main(["ui", "--database-url", db, "--port", "70000"]) == 2
    monkeypatch.setenv("RIVER_UI_USERNAME", "ops")
    assert main(["ui", "--database-url", db]) == 2
    assert "set both RIVER_UI_USERNAME and RIVER_UI_PASSWORD" in capsys.readouterr().err
    monkeypatch.delenv("RIVER_UI_USERNAME")
    assert main(["ui", "--database-url", f"sqlite://{tmp_path / 'missing.sqlite3'}"]) == 1
    assert "no SQLite database" in capsys.readouterr().err
    assert served == []


def test_river_ui_serves_the_dashboard(db: str) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RIVER_UI_USERNAME", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "river_tools.cli", "ui", "--database-url", db, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs", timeout=2) as response:
                    page = response.read().decode()
                    assert response.status == 200
                    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "river ui did not answer"
                time.sleep(0.1)
        assert 'data-job-id="' in page
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert f"River UI on http://127.0.0.1:{port}/ (no auth)" in out
