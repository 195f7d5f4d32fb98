"""The guides' Python code blocks run as written (docs/guides/trio.md, docs/guides/asyncio.md).

Each page's ``python`` blocks run in order as one script, in a fresh interpreter,
against a migrated scratch Postgres database (one per module: each check counts
only its page's kinds). The names the pages leave to the
reader are given: ``url`` and ``DATABASE_URL``, and the placeholder URL
``postgresql://localhost/app`` is replaced by the scratch one. A page's
``CHECKS`` then run in the same script (the FastAPI app is called through
Starlette's ``TestClient``, which runs its lifespan). A block that only includes
a file's section (``--8<-- "path:section"``) shows code tested where it lives;
the site build (``--strict``) fails when the section is missing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.drivers.test_client_support import migrated_pg_fixture  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER_URL = "postgresql://localhost/app"
FENCE_RE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)
INCLUDE_RE = re.compile(r'^--8<-- "([^"]+)"$')

PRELUDE = """\
import os
url = DATABASE_URL = os.environ["DOCS_DATABASE_URL"]
"""

TRIO_MODULES = """
trio_modules = [name for name in sys.modules if name == "trio" or name.startswith("trio.")]
assert not trio_modules, trio_modules
"""

CHECKS = {
    "docs/guides/trio.md": """
import river_sync
with river_sync.Client(url) as reader:
    assert len(reader.jobs.list(kinds=["fetch_page"]).jobs) == 1
print("checked")
""",
    "docs/guides/asyncio.md": """
import sys
""" + TRIO_MODULES + """
from fastapi.testclient import TestClient

with TestClient(app) as http:  # runs the lifespan: the working client starts and stops with it
    response = http.post("/images/7/resize")
    assert response.status_code == 200, response.text
    job_id = response.json()["job_id"]

import river_sync
with river_sync.Client(url) as reader:
    assert reader.jobs.get(job_id).kind == "resize_image"
    assert len(reader.jobs.list(kinds=["resize_image"]).jobs) == 2  # the first block's and this one
""" + TRIO_MODULES + """
print("checked")
""",
}


def python_blocks(markdown: str) -> tuple[list[str], list[str]]:
    """The page's runnable ``python`` blocks, and the file sections its include-only blocks name."""
    runnable, included = [], []
    for block in FENCE_RE.findall(markdown):
        lines = [line for line in block.splitlines() if line.strip()]
        names = [m.group(1) for m in map(INCLUDE_RE.match, lines) if m]
        if names and len(names) == len(lines):
            included.extend(names)
        else:
            runnable.append(block)
    return runnable, included


def page_script(page: str) -> str:
    runnable, _ = python_blocks((ROOT / page).read_text(encoding="utf-8"))
    code = "\n\n".join(block.replace(f'"{PLACEHOLDER_URL}"', "url") for block in runnable)
    return PRELUDE + "\n" + code + "\n" + CHECKS[page]


def test_python_blocks_separates_includes() -> None:
    text = '```python\nx = 1\n```\n\n```python\n--8<-- "a.py:s"\n```\n```text\nno\n```\n'
    assert python_blocks(text) == (["x = 1\n"], ["a.py:s"])


def test_page_script_gives_the_placeholder_url_as_url() -> None:
    script = page_script("docs/guides/asyncio.md")
    assert PLACEHOLDER_URL not in script and 'Client(url, workers=workers' in script


@pytest.mark.postgres
@pytest.mark.parametrize("page", sorted(CHECKS))
def test_the_pages_python_blocks_run(page: str, _migrated_pg: str, tmp_path: Path) -> None:
    script = tmp_path / "page.py"
    script.write_text(page_script(page))
    env = {**os.environ, "DOCS_DATABASE_URL": _migrated_pg, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("checked")


@pytest.mark.parametrize("page", sorted(CHECKS))
def test_included_sections_exist(page: str) -> None:
    _, included = python_blocks((ROOT / page).read_text(encoding="utf-8"))
    for name in included:
        path, _, section = name.partition(":")
        text = (ROOT / path).read_text(encoding="utf-8")
        assert f"--8<-- [start:{section}]" in text and f"--8<-- [end:{section}]" in text, name
