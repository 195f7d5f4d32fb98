"""Helpers to run the dashboard for a test or a script: uvicorn in a thread, headless Chromium.

``serve(app)`` runs an ASGI app with uvicorn on 127.0.0.1 and a free port in a
background thread and yields its base URL. ``headless_chromium()`` opens
Debian's Chromium through Debian's chromedriver with Selenium (``pip install
selenium``): the driver's path goes in explicitly, so Selenium never looks for
(or downloads) a browser or driver of its own. Paths: ``RIVER_UI_CHROMIUM`` /
``RIVER_UI_CHROMEDRIVER``, else ``/usr/bin/chromium`` and ``/usr/bin/chromedriver``.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.types import ASGIApp

ENV_CHROMIUM = "RIVER_UI_CHROMIUM"
ENV_CHROMEDRIVER = "RIVER_UI_CHROMEDRIVER"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
DEFAULT_CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


class BrowserUnavailable(RuntimeError):
    """Chromium or chromedriver is not installed where expected."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve(app: ASGIApp, *, host: str = "127.0.0.1", startup_timeout: float = 10.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread until the block ends; yields ``http://host:port``."""
    port = free_port(host)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="river-ui-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver), checked to exist; ``BrowserUnavailable`` otherwise."""
    chromium = os.environ.get(ENV_CHROMIUM, DEFAULT_CHROMIUM)
    driver = os.environ.get(ENV_CHROMEDRIVER, DEFAULT_CHROMEDRIVER)
    missing = [p for p in (chromium, driver) if not (os.path.isfile(p) and os.access(p, os.X_OK))]
    if missing:
        raise BrowserUnavailable(
            f"not found: {', '.join(missing)} (Debian: apt-get install chromium chromium-driver; "
            f"or set {ENV_CHROMIUM} / {ENV_CHROMEDRIVER})"
        )
    return chromium, driver


@contextmanager
def headless_chromium(*, width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A Selenium WebDriver on a headless Chromium with a fresh profile, quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = browser_paths()
    profile = tempfile.mkdtemp(prefix="river-ui-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
