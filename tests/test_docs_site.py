"""The documentation site (issue 18.2): ``mkdocs build --strict`` passes, so CI fails on a broken page.

``nox -s docs`` runs the same build; running it here puts it in the README's test
command, which ``.ci/run`` runs. ``--strict`` turns every warning into an error: a
nav entry or a link to a missing page, a snippet include of a missing file, an API
reference directive (``::: package.name``) that names nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TIMEOUT = 300


def build_command(site_dir: Path) -> list[str]:
    return [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(build_command(site_dir), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return site_dir


def page(site: Path, name: str) -> str:
    return (site / name / "index.html").read_text(encoding="utf-8")


def nav_pages() -> list[str]:
    """The Markdown files mkdocs.yml's nav lists (read as text: the file has a !!python tag)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s+- (?:[^:\n]+: )?([\w./-]+\.md)\s*$", nav, flags=re.MULTILINE)


def test_nav_reader_sees_titled_and_untitled_entries() -> None:
    pages = [f"docs/{name}" for name in nav_pages()]
    assert pages[0] == "docs/index.md"
    assert {"docs/api/index.md", "docs/getting-started/sqlite.md"} <= set(pages)


def test_every_page_is_in_the_nav() -> None:
    # mkdocs only mentions an omitted page; a reference page left out of the nav is unreachable.
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(nav_pages()) == on_disk


def test_site_builds_strictly_with_the_api_reference(site: Path) -> None:
    sync = page(site, "api/river_sync")
    # The reference is generated from the docstrings: the client's methods are there.
    assert 'id="river_sync.Client.insert"' in sync and 'id="river_sync.testing.require_inserted"' in sync
    assert 'id="river_trio.Client.insert"' in page(site, "api/river_trio")
    assert 'id="river_protocol.options.InsertOpts"' in page(site, "api/river_protocol")


@pytest.mark.parametrize("package", ["river_sync", "river_trio", "river_asyncio"])
def test_each_client_shows_its_whole_constructor_and_no_testing_seams(site: Path, package: str) -> None:
    import html
    import importlib
    import inspect

    client = importlib.import_module(package).Client
    params = [p for p in inspect.signature(client.__init__).parameters if p != "self"]
    text = page(site, f"api/{package}")
    heading = text.index(f'id="{package}.Client"')
    signature = html.unescape(re.sub(r"<[^>]+>", "", text[heading:text.index("Bases:", heading)]))
    # One parameter after each "(" or top-level ","; mkdocstrings breaks the signature into lines
    # only when a formatter (ruff or black) is installed, so line breaks are not relied on.
    shown = re.findall(r"[(,]\s*(\w+):", signature)
    assert shown == params  # every parameter, in order (the heading merges ClientBase.__init__)
    # The testing-only attributes of Client (testing_claim_hook, testing_*_interval...) are seams
    # for this project's own tests, not API.
    assert "testing_" not in text


def test_the_home_page_shows_install_and_a_first_job_and_the_design_page_the_packages(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "There is no published package yet" in home and "A first job" in home
    assert "<th>may import</th>" not in home  # the package table lives on the design page
    design = page(site, "design")
    assert "<th>may import</th>" in design and "<code>river_protocol</code>" in design


def test_included_files_and_diagrams_render(site: Path) -> None:
    changelog = page(site, "changelog")
    assert "0.1.0" in changelog and "Keep a Changelog" in changelog
    assert "basic_worker.py" in page(site, "examples")
    assert 'class="mermaid"' in page(site, "state-diagrams")
    assert "Client" in page(site, "guides/client")


def test_the_client_table_lives_in_the_client_guide(site: Path) -> None:
    assert "<code>unique_key_rules</code>" in page(site, "guides/client")


def test_the_asyncio_guide_shows_the_fastapi_examples_own_code(site: Path) -> None:
    asyncio_guide = page(site, "guides/asyncio")
    # Included from examples/fastapi_app/storefront/app.py (its snippet markers are not shown).
    assert "create_app" in asyncio_guide and "place_order" in asyncio_guide
    assert "--8&lt;--" not in asyncio_guide and "[start:" not in asyncio_guide
