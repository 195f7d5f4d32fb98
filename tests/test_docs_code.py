"""The documentation's Python code blocks run as written, and print what they should (issue 29 §6).

Every ``python`` block of the README, the docs home page, the getting-started
pages and the guides is one of:

- run: a page's runnable blocks, in order, make one script, which a fresh
  interpreter runs **twice** (``runpy``) on the same database: the second run
  is a reader's second try, and a snippet must not go quiet because its first
  job is still there. Each run's output is checked line by line against
  ``PAGES``;
- a pytest module (``<!-- docs-test: pytest -->`` on the line before the
  fence): the page's such blocks make one test file, run by pytest with the
  project's plugin, every test passing;
- include-only (``--8<-- "path:section"``): code tested where it lives; the
  site build (``--strict``) fails when the section is missing;
- skipped, with the reason on the line before the fence:
  ``<!-- docs-test: skip: needs a Django project's settings -->``.

``test_every_block_is_run_or_skipped_with_a_reason`` keeps it so: a new page or
block is run or says why not.

Databases: a page whose code names a Postgres URL on localhost (the
placeholder ``postgresql://localhost/app`` and the like) or uses the name
``url`` the page leaves to the reader runs on SQLite and on the test Postgres
server, the URL replaced by a migrated, emptied scratch database's (``url`` and
``DATABASE_URL`` are given). A page whose code opens its own SQLite file
(``sqlite://jobs.sqlite3``) runs on SQLite, in an empty working directory.
``PAGES[page].setup`` gives the names a guide's fragment leaves to the reader,
and ``check`` asserts what the page did, then prints ``checked``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.drivers.test_client_support import migrated_pg_fixture  # noqa: F401  (the _migrated_pg fixture)

ROOT = Path(__file__).resolve().parents[1]
DOC_PAGES = sorted(
    [ROOT / "README.md", ROOT / "docs/index.md", *(ROOT / "docs/getting-started").glob("*.md"),
     *(ROOT / "docs/guides").glob("*.md")]
)
FENCE_OPEN_RE = re.compile(r"^[ \t]*```python\b.*$")
INCLUDE_RE = re.compile(r'^--8<-- "([^"]+)"$')
MARKER_RE = re.compile(r"^\s*<!-- docs-test: (?P<what>skip|pytest)(?::\s*(?P<reason>.*?))?\s*-->\s*$")
# A Postgres URL on localhost in a code block is the reader's own database: the test's replaces it.
PLACEHOLDER_RE = re.compile(r"""(["'])postgres(?:ql)?://localhost/\w+\1""")

PRELUDE = """\
import os
url = DATABASE_URL = os.environ["DOCS_DATABASE_URL"]
"""

# Runs the page's script twice in one interpreter: the second run finds the first one's rows.
RUNNER = """\
import runpy, sys
for run in (1, 2):
    print(f"=== run {run}", flush=True)
    runpy.run_path(sys.argv[1], run_name="__main__")
    sys.stdout.flush()
"""

TRIO_MODULES = """
import sys
trio_modules = [name for name in sys.modules if name == "trio" or name.startswith("trio.")]
assert not trio_modules, trio_modules
"""


@dataclass(frozen=True)
class Page:
    """How a page's blocks run and what each run prints (one regex per line, in order)."""

    prints: tuple[str, ...] = ()
    databases: tuple[str, ...] = ("sqlite", "postgres")
    setup: str = ""
    check: str = ""
    pytest_passed: int = 0  # for a page of pytest blocks: how many tests pass


PAGES: dict[str, Page] = {
    "README.md": Page(prints=(r"sending 'hi' to customer 42", r"job \d+ completed")),
    "docs/index.md": Page(prints=(r"hello, world \(job \d+, attempt 1\)",), databases=("sqlite",)),
    "docs/getting-started/sqlite.md": Page(
        prints=(r"\['bear', 'tiger', 'whale'\] job \d+ attempt 1",), databases=("sqlite",)),
    "docs/getting-started/postgres.md": Page(prints=(r"sending 'hi' to customer 42 \(job \d+\)",)),
    "docs/guides/trio.md": Page(prints=(r"fetched home \(job \d+\)",)),
    "docs/guides/asyncio.md": Page(
        prints=(r"resized image 42 \(job \d+\)", r"resized image 7 \(job \d+\)", "checked"),
        check=TRIO_MODULES + """
from fastapi.testclient import TestClient

import time

import river_sync

with TestClient(app) as http, river_sync.Client(url) as reader:  # the lifespan runs the working client
    response = http.post("/images/7/resize")
    assert response.status_code == 200, response.text
    job_id = response.json()["job_id"]
    deadline = time.monotonic() + 10
    while reader.jobs.get(job_id).state.value != "completed":  # worked by the app's own client
        assert time.monotonic() < deadline, reader.jobs.get(job_id)
        time.sleep(0.05)
    assert reader.jobs.get(job_id).kind == "resize_image"
""" + TRIO_MODULES + """
print("checked")
"""),
    "docs/guides/client.md": Page(
        prints=("checked",),
        setup="""
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from river_sync import InsertOpts, UniqueOpts, WorkContext, Workers, arg_field


@dataclass
class SendEmail:
    kind: ClassVar[str] = "send_email"
    customer_id: int


workers = Workers()
""",
        check="""
from river_sync.testing import work_once

assert work_once(workers, SendEmail(customer_id=1)).state.value == "completed"
opts = Report(day="2026-12-06").insert_opts()
assert (opts.queue, opts.max_attempts, opts.unique_opts.by_args) == ("reports", 3, True)
from river_sync import EventKind

with worker.subscribe([EventKind.JOB_COMPLETED]) as done, worker, inserter:  # the low-latency pair works
    job = inserter.insert(SendEmail(customer_id=7)).job
    assert done.get(timeout=10).job.id == job.id
print("checked")
"""),
    "docs/guides/unique-jobs.md": Page(prints=(r"True True",)),
    "docs/guides/metrics.md": Page(
        prints=(r"runs completed here: 1; completed jobs in the database: [12]", "checked"),
        check="""
from fastapi.testclient import TestClient

with TestClient(app) as http:
    scraped = http.get("/metrics/")
    assert scraped.status_code == 200, scraped.text
    line = 'river_jobs_worked_total{kind="send_report",outcome="completed",queue="default"} 1.0'
    assert line in scraped.text, scraped.text
assert callable(prometheus_metrics)
print("checked")
"""),
    "docs/guides/workflows.md": Page(prints=(
        r"sent album 1 with 1 pages",
        r"\['thumb_1.jpg', 'thumb_2.jpg', 'thumb_3.jpg'\]",
        r"\['thumb_0.jpg', 'thumb_1.jpg', 'thumb_2.jpg'\]",
        r"sent album 7 with 3 pages",
        r"thumb_-1 discarded - photo -1 does not exist",
        r"album cancelled - workflow dependency 'thumb_-1' was discarded",
        r"email cancelled - workflow dependency 'album' was cancelled",
        r"thumb_5.jpg",
        r"still available",
    )),
    "docs/guides/periodic-jobs.md": Page(prints=(r"heartbeat \(job \d+\)",)),
    # The page migrates the python line itself and runs a limited client to the end.
    "docs/guides/flow-control.md": Page(
        prints=(r"called the partner for customers \[0, 0, 1, 1, 2, 2\]", r"partner_api: global 10, local 2",
                "checked"),
        check="""
with Client(url) as reader:  # the page's client has stopped and closed its database
    job = reader.jobs.list(kinds=["charge_customer"]).jobs[-1]
assert job.queue == "billing" and "river_py:sequence" in job.metadata, job
opts = RefundCustomer(customer_id=7, cents=1).insert_opts()
assert list(opts.sequence.by_args) == ["customer_id"]
print("checked")
"""),
    "docs/guides/opentelemetry.md": Page(
        prints=("checked",),
        check="""
from dataclasses import dataclass
from typing import ClassVar


@dataclass
class Ping:
    kind: ClassVar[str] = "otel_ping"


with sync_client:  # the insert goes through the middleware
    assert sync_client.insert(Ping()).job.kind == "otel_ping"
print("checked")
"""),
    "docs/guides/transactions.md": Page(
        prints=("checked",),
        databases=("postgres",),
        setup="""
import uuid
from dataclasses import dataclass
from typing import ClassVar

import sqlalchemy as sa

from river_sync import Client


@dataclass
class SendReceiptArgs:
    kind: ClassVar[str] = "send_receipt"
    order_id: int


engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
with engine.begin() as conn:
    conn.execute(sa.text("CREATE TABLE IF NOT EXISTS orders (id bigint PRIMARY KEY, total_cents int)"))
client = Client(url)
order_id = uuid.uuid4().int % 2**62
""",
        check="""
from river_sync.testing import require_inserted

with engine.connect() as conn:
    total = conn.execute(sa.text("SELECT total_cents FROM orders WHERE id = :id"), {"id": order_id}).scalar()
assert total == 4200
assert require_inserted(client, SendReceiptArgs, args=SendReceiptArgs(order_id=order_id))
client.close()
print("checked")
"""),
    "docs/guides/testing.md": Page(pytest_passed=5),
}


# ---------------------------------------------------------------- reading the pages


@dataclass(frozen=True)
class Block:
    code: str
    marker: str | None  # "skip", "pytest" or None
    reason: str | None
    line: int


def python_blocks(markdown: str) -> list[Block]:
    """Every ``python`` fence of ``markdown`` (indented ones too, dedented), with its marker."""
    lines = markdown.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opened = FENCE_OPEN_RE.match(lines[i])
        if not opened:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        i += 1
        previous = next((line for line in reversed(lines[:start]) if line.strip()), "")
        marker = MARKER_RE.match(previous)
        code = textwrap.dedent("\n".join(body)) + "\n"  # a block in a list item is indented
        blocks.append(Block(code, marker and marker.group("what"), marker and marker.group("reason"),
                            start + 1))
    return blocks


def is_include(block: Block) -> bool:
    lines = [line for line in block.code.splitlines() if line.strip()]
    return bool(lines) and all(INCLUDE_RE.match(line) for line in lines)


def runnable(page: str) -> list[Block]:
    return [b for b in python_blocks((ROOT / page).read_text(encoding="utf-8"))
            if b.marker is None and not is_include(b)]


def page_script(page: str) -> str:
    code = "\n\n".join(PLACEHOLDER_RE.sub("url", block.code) for block in runnable(page))
    spec = PAGES[page]
    return PRELUDE + spec.setup + "\n" + code + "\n" + spec.check


def pytest_module(page: str) -> str:
    blocks = [b for b in python_blocks((ROOT / page).read_text(encoding="utf-8")) if b.marker == "pytest"]
    return "\n\n".join(block.code for block in blocks)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------- the readers themselves


def test_python_blocks_reads_markers_indents_and_includes() -> None:
    text = textwrap.dedent("""\
        ```python
        x = 1
        ```

        <!-- docs-test: skip: needs a web server -->
        ```python
        serve()
        ```
        - a list item:

            ```python
            y = 2
            ```

        ```python
        --8<-- "a.py:s"
        ```
        ```text
        no
        ```
        """)
    blocks = python_blocks(text)
    assert [(b.code, b.marker, b.reason) for b in blocks] == [
        ("x = 1\n", None, None), ("serve()\n", "skip", "needs a web server"), ("y = 2\n", None, None),
        ('--8<-- "a.py:s"\n', None, None)]
    assert [is_include(b) for b in blocks] == [False, False, False, True]


def test_page_script_gives_the_placeholder_url_as_url() -> None:
    script = page_script("docs/guides/asyncio.md")
    assert "postgresql://localhost" not in script and "Client(url, workers=workers" in script
    assert "Client(url, workers=workers" in page_script("README.md")


def test_every_block_is_run_or_skipped_with_a_reason() -> None:
    pages = {_rel(p) for p in DOC_PAGES}
    assert set(PAGES) <= pages
    for path in DOC_PAGES:
        page = _rel(path)
        for block in python_blocks(path.read_text(encoding="utf-8")):
            where = f"{page}:{block.line}"
            if block.marker == "skip":
                assert block.reason and len(block.reason) > 10, f"{where}: a skip says why"
            elif block.marker == "pytest":
                assert PAGES.get(page, Page()).pytest_passed, f"{where}: PAGES gives the pytest count"
            elif not is_include(block):
                assert page in PAGES and PAGES[page].prints, f"{where}: runs, so PAGES says what it prints"


# ---------------------------------------------------------------- the pages


def _page_runs() -> list[object]:
    runs: list[object] = []
    for page, spec in sorted(PAGES.items()):
        if not spec.prints:
            continue
        for db in spec.databases:
            marks = [pytest.mark.postgres] if db == "postgres" else []
            runs.append(pytest.param(page, db, marks=marks, id=f"{page}-{db}"))
    return runs


@pytest.mark.parametrize(("page", "database"), _page_runs())
def test_the_pages_python_blocks_run_twice_and_print(
    page: str, database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if database == "postgres":
        url = request.getfixturevalue("_migrated_pg")
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("TRUNCATE river_job, river_queue, river_leader RESTART IDENTITY")
    else:
        from river_db.migrator import Migrator

        url = f"sqlite:///{tmp_path}/river.sqlite3"
        with Migrator(url) as migrator:
            migrator.migrate_up()
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    (workdir / "page.py").write_text(page_script(page))
    (workdir / "runner.py").write_text(RUNNER)
    env = {**os.environ, "DOCS_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "runner.py", "page.py"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = proc.stdout.split("=== run ")[1:]
    assert len(runs) == 2, proc.stdout
    for run in runs:
        number, *printed = run.rstrip("\n").split("\n")
        expected = PAGES[page].prints
        assert len(printed) == len(expected), f"run {number}: {printed}\n{proc.stderr}"
        for line, pattern in zip(printed, expected, strict=True):
            assert re.fullmatch(pattern, line), f"run {number}: {line!r} is not {pattern!r}"


@pytest.mark.parametrize("page", sorted(p for p, spec in PAGES.items() if spec.pytest_passed))
def test_the_pages_pytest_example_passes(page: str, tmp_path: Path) -> None:
    (tmp_path / "test_page_example.py").write_text(pytest_module(page))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "test_page_example.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{PAGES[page].pytest_passed} passed" in proc.stdout, proc.stdout


@pytest.mark.parametrize("page", [_rel(p) for p in DOC_PAGES])
def test_included_sections_exist(page: str) -> None:
    for block in python_blocks((ROOT / page).read_text(encoding="utf-8")):
        if not is_include(block):
            continue
        for line in block.code.split("\n"):
            if not line.strip():
                continue
            name = INCLUDE_RE.match(line).group(1)  # type: ignore[union-attr]
            path, _, section = name.partition(":")
            text = (ROOT / path).read_text(encoding="utf-8")
            assert f"--8<-- [start:{section}]" in text and f"--8<-- [end:{section}]" in text, name
