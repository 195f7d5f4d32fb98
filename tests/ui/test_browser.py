"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium through
Debian's chromedriver (never a downloaded browser; Selenium Manager is never asked). One
browser and one server for the module; the app runs with uvicorn in a thread on 127.0.0.1.

Under CI (``CI`` set) a missing Chromium fails these tests instead of skipping them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("selenium")

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from river_protocol.intents import FullJobRow
from river_protocol.states import JobState
from river_sync import Client
from river_ui import create_app
from river_ui.demo import PAUSED_QUEUE, Seeded, insert_rows, seed_demo
from river_ui.testing import BrowserUnavailable, headless_chromium, serve
from tests.ui.conftest import insert_hostile, queue_paused, state_of

S = JobState


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Seeded]:
    url = f"sqlite://{tmp_path_factory.mktemp('browser') / 'ui.sqlite3'}"
    return url, seed_demo(url)


@pytest.fixture(scope="module")
def base(db: tuple[str, Seeded]) -> Iterator[str]:
    # No self-refresh here: a page swapping its content under a click would make tests flaky.
    with serve(create_app(database_url=db[0], refresh_seconds=0)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.common import selenium_manager

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("Selenium Manager was asked for a browser or driver")

    original = selenium_manager.SeleniumManager.binary_paths
    selenium_manager.SeleniumManager.binary_paths = forbidden  # type: ignore[method-assign,assignment]
    try:
        with headless_chromium() as driver:
            yield driver
    except BrowserUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Chromium is required under CI: {exc}")
        pytest.skip(str(exc))
    finally:
        selenium_manager.SeleniumManager.binary_paths = original  # type: ignore[method-assign]


def accept_confirm(browser: Any) -> None:
    WebDriverWait(browser, 10).until(expected_conditions.alert_is_present()).accept()


def assert_no_script_ran(browser: Any) -> None:
    assert browser.execute_script("return window.__pwned === undefined")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018


def test_overview_shows_jobs_in_every_state(browser: Any, base: str) -> None:
    browser.get(base + "/")
    assert browser.title.startswith("Overview")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.queue-row")
    assert [r.get_attribute("data-queue") for r in rows] == ["default", "email", "reports"]
    for state in JobState:
        cells = browser.find_elements(By.CSS_SELECTOR, f"td.count-{state.value}")
        assert sum(int(c.text.replace(",", "")) for c in cells) > 0, state
    paused = browser.find_element(By.CSS_SELECTOR, f'tr[data-queue="{PAUSED_QUEUE}"] .paused')
    assert paused.text == "paused"
    assert browser.find_elements(By.CSS_SELECTOR, "svg.chart rect.series-completed")
    assert browser.find_element(By.ID, "leader").text.startswith("worker-1")


def test_a_filter_narrows_the_job_list(browser: Any, base: str, db: tuple[str, Seeded]) -> None:
    browser.get(base + "/jobs")
    Select(browser.find_element(By.NAME, "state")).select_by_value("scheduled")
    queue = browser.find_element(By.NAME, "queue")
    queue.clear()
    queue.send_keys("email")
    browser.find_element(By.ID, "apply-filter").click()
    WebDriverWait(browser, 10).until(lambda b: "state=scheduled" in b.current_url)
    shown = [
        int(r.get_attribute("data-job-id")) for r in browser.find_elements(By.CSS_SELECTOR, "tr.job-row")
    ]
    assert shown == sorted(db[1].ids[S.SCHEDULED], reverse=True)
    assert {b.text for b in browser.find_elements(By.CSS_SELECTOR, "tr.job-row .state")} == {"scheduled"}


def test_a_failed_jobs_page_shows_its_trace(browser: Any, base: str, db: tuple[str, Seeded]) -> None:
    job_id = db[1].ids[S.RETRYABLE][0]
    browser.get(f"{base}/jobs/{job_id}")
    errors = browser.find_elements(By.CSS_SELECTOR, ".attempt-error")
    assert len(errors) == 2
    trace = errors[1].find_element(By.CSS_SELECTOR, "pre.trace").text
    assert "Traceback (most recent call last)" in trace and "ConnectionRefusedError" in trace
    assert '"account": "acme"' in browser.find_element(By.ID, "args").text


def test_retry_clicked_on_a_job_page_makes_it_available(
    browser: Any, base: str, db: tuple[str, Seeded]
) -> None:
    url, seeded = db
    job_id = seeded.ids[S.DISCARDED][0]
    browser.get(f"{base}/jobs/{job_id}")
    browser.find_element(By.ID, "retry").click()
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "flash"))
    assert browser.find_element(By.ID, "flash").text == "retried 1 job"
    assert state_of(url, job_id) is JobState.AVAILABLE
    assert browser.find_element(By.CSS_SELECTOR, "h1 .state").text == "available"


def test_cancel_clicked_on_a_selection_cancels_those_jobs(
    browser: Any, base: str, db: tuple[str, Seeded]
) -> None:
    url, seeded = db
    browser.get(f"{base}/jobs?state=scheduled")
    boxes = browser.find_elements(By.CSS_SELECTOR, "input.select")
    chosen = [int(b.get_attribute("value")) for b in boxes[:2]]
    for box in boxes[:2]:
        box.click()
    browser.find_element(By.ID, "cancel-selected").click()
    accept_confirm(browser)
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "flash"))
    assert browser.find_element(By.ID, "flash").text == "cancelled 2 jobs"
    assert [state_of(url, i) for i in chosen] == [JobState.CANCELLED, JobState.CANCELLED]
    untouched = [i for i in seeded.ids[S.SCHEDULED] if i not in chosen]
    assert [state_of(url, i) for i in untouched] == [JobState.SCHEDULED] * len(untouched)


def test_declining_the_confirmation_changes_nothing(browser: Any, base: str, db: tuple[str, Seeded]) -> None:
    url, seeded = db
    job_id = seeded.ids[S.PENDING][0]
    browser.get(f"{base}/jobs/{job_id}")
    browser.find_element(By.ID, "delete").click()
    WebDriverWait(browser, 10).until(expected_conditions.alert_is_present()).dismiss()
    assert state_of(url, job_id) is JobState.PENDING


def test_pausing_a_queue_from_the_overview(browser: Any, base: str, db: tuple[str, Seeded]) -> None:
    url, _ = db
    browser.get(base + "/")
    assert not queue_paused(url, "email")
    browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="email"] button.pause').click()
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "flash"))
    assert queue_paused(url, "email")
    assert browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="email"] .paused').text == "paused"
    browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="email"] button.resume').click()
    WebDriverWait(browser, 10).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, 'tr[data-queue="email"] .active')
    )
    assert not queue_paused(url, "email")


def test_hostile_input_runs_no_script(browser: Any, base: str, db: tuple[str, Seeded]) -> None:
    job_id = insert_hostile(db[0])
    for path in (
        "/",
        "/jobs",
        f"/jobs/{job_id}",
        "/jobs?kind=evil%3Cscript%3E",
        "/workflows",
        "/workflows/wf_hostile",
    ):
        browser.get(base + path)
        assert_no_script_ran(browser)
    # On its own page every field shows the markup as text.
    browser.get(f"{base}/jobs/{job_id}")
    text = browser.find_element(By.TAG_NAME, "body").text
    for shown in ("<script>window.__pwned = 1</script>", '"><img src=x onerror="window.__pwned = 2">'):
        assert text.count(shown) >= 6, shown  # kind, queue, tags, attempted_by, args, metadata, error, trace
    assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
    assert_no_script_ran(browser)


def test_a_post_without_its_csrf_token_is_refused(browser: Any, base: str, db: tuple[str, Seeded]) -> None:
    url, seeded = db
    job_id = seeded.ids[S.DISCARDED][1]
    browser.get(f"{base}/jobs/{job_id}")
    # The form as a forged request would send it: everything but the token.
    browser.execute_script("document.querySelector('#job-actions input[name=csrf_token]').remove()")
    browser.find_element(By.ID, "retry").click()
    WebDriverWait(browser, 10).until(lambda b: "CSRF" in b.page_source)  # survives the navigation
    status = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const body = new URLSearchParams({action: 'retry', job_id: arguments[0]});"
        "fetch('/actions/jobs', {method: 'POST', body: body})"
        ".then(r => done(r.status));",
        str(job_id),
    )
    assert status == 403
    assert state_of(url, job_id) is JobState.DISCARDED


def test_pages_refresh_themselves(browser: Any, db: tuple[str, Seeded], tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'refresh.sqlite3'}"
    seed_demo(url)
    with serve(create_app(database_url=url, refresh_seconds=1)) as live:
        browser.get(live + "/jobs?state=pending&queue=email")
        assert len(browser.find_elements(By.CSS_SELECTOR, "tr.job-row")) == 1
        client = Client(url, leader_election=False, notifications=False)
        try:
            insert_rows(client, [FullJobRow(kind="late", state=S.PENDING, queue="email")])
        finally:
            client.close()
        WebDriverWait(browser, 10).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "tr.job-row")) == 2)
        assert "late" in browser.find_element(By.ID, "jobs").text


def test_a_workflow_graph_links_each_task_to_its_job(browser: Any, base: str) -> None:
    browser.get(base + "/workflows")
    browser.find_element(By.LINK_TEXT, "wf_nightly_report").click()
    WebDriverWait(browser, 10).until(lambda b: b.find_elements(By.ID, "graph"))
    nodes = browser.find_elements(By.CSS_SELECTOR, "#graph a.node")
    assert [n.get_attribute("data-task") for n in nodes] == [
        "extract",
        "transform_orders",
        "transform_refunds",
        "load",
        "notify",
    ]
    refunds = browser.find_element(By.CSS_SELECTOR, '#graph a.node[data-task="transform_refunds"] rect')
    assert refunds.get_attribute("class") == "node-discarded" and refunds.size["width"] > 100
    browser.find_element(By.CSS_SELECTOR, '#graph a.node[data-task="transform_refunds"]').click()
    WebDriverWait(browser, 10).until(lambda b: "/jobs/" in b.current_url)
    assert "refunds API returned 500" in browser.find_element(By.CSS_SELECTOR, ".attempt-error").text


def test_no_page_breaks_its_own_content_security_policy(
    browser: Any, base: str, db: tuple[str, Seeded]
) -> None:
    browser.get_log("browser")  # drop what earlier tests left
    job_id = db[1].ids[S.RETRYABLE][0]
    for path in (
        "/",
        "/jobs",
        f"/jobs/{job_id}",
        "/periodic",
        "/workflows",
        "/workflows/wf_signup_42",
        "/limits",
    ):
        browser.get(base + path)
        assert browser.execute_script("return getComputedStyle(document.body).marginTop") == "0px", (
            path
        )  # CSS on
    problems = [
        entry["message"] for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")
    ]
    assert problems == []
