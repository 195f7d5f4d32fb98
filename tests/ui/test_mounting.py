"""The dashboard guide's mounting examples, run as written: the Django dispatcher (``mysite/asgi.py``:
Django and the dashboard behind one ASGI application, the dashboard open to Django's staff sessions
only) and the FastAPI mount under a prefix."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("django")

from river_ui.demo import seed_demo

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs/guides/dashboard.md"

SETTINGS = """
SECRET_KEY = "test"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "django.sqlite3"}}
ROOT_URLCONF = "mysite.urls"
ALLOWED_HOSTS = ["*"]
USE_TZ = True
"""
URLS = """
from django.http import HttpResponse
from django.urls import path

urlpatterns = [path("hello/", lambda request: HttpResponse("django here"))]
"""
CHILD = """
import os, warnings
warnings.simplefilter("ignore")
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
django.setup()
from importlib import import_module
from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.core.management import call_command
call_command("migrate", verbosity=0)
users = get_user_model().objects
staff = users.create_user("staff", password="x", is_staff=True)
plain = users.create_user("plain", password="x")

def session_for(user):
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session.create()
    return session.session_key

from starlette.testclient import TestClient
from mysite.asgi import application
with TestClient(application) as web:
    print("django", web.get("/hello/").text)
    print("anonymous", web.get("/river/").status_code)
    web.cookies.set(settings.SESSION_COOKIE_NAME, session_for(plain))
    print("plain", web.get("/river/").status_code)
    web.cookies.set(settings.SESSION_COOKIE_NAME, session_for(staff))
    page = web.get("/river/jobs")
    print("staff", page.status_code, "data-job-id" in page.text, "/river/static/river_ui.css" in page.text)
"""


def guide_asgi_block() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(# mysite/asgi\.py\n.*?)```", text, re.S)
    assert len(blocks) == 1, "the guide's Django block starts with '# mysite/asgi.py'"
    return str(blocks[0])


def test_the_guides_django_dispatcher_serves_both_and_admits_staff_only(tmp_path: Path) -> None:
    site = tmp_path / "mysite"
    site.mkdir()
    (site / "__init__.py").write_text("")
    (site / "settings.py").write_text(SETTINGS)
    (site / "urls.py").write_text(URLS)
    (site / "asgi.py").write_text(guide_asgi_block())
    river_url = f"sqlite://{tmp_path / 'river.sqlite3'}"
    seed_demo(river_url)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "DATABASE_URL": river_url}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "django django here",
        "anonymous 403",
        "plain 403",
        "staff 200 True True",
    ]


def test_the_guides_fastapi_mount_serves_under_its_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastapi")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # starlette's nudge towards httpx2, not ours to act on
        from starlette.testclient import TestClient

    text = GUIDE.read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(import os\n\nfrom fastapi import .*?)```", text, re.S)
    river_url = f"sqlite://{tmp_path / 'river.sqlite3'}"
    seed_demo(river_url)
    monkeypatch.setenv("DATABASE_URL", river_url)
    namespace: dict[str, object] = {}
    exec(compile(block, str(GUIDE), "exec"), namespace)
    with TestClient(namespace["app"]) as web:  # type: ignore[arg-type]
        assert web.get("/admin/river/jobs").status_code == 403
        page = web.get("/admin/river/jobs", headers={"x-forwarded-user": "alice"})
        assert page.status_code == 200 and "http://testserver/admin/river/static/river_ui.js" in page.text
