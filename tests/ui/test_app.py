"""The dashboard through Starlette's TestClient, on SQLite and Postgres: pages, filters,
cursor pages, actions through the admin API, CSRF, read-only mode, authentication, CSP and
escaping."""

from __future__ import annotations

import base64
import html
import re
import warnings
from collections.abc import Iterator

import pytest

from river_protocol.states import JobState
from river_sync import Client
from river_ui import BasicAuth, ConfigurationError, create_app
from river_ui.demo import LEADER_ID, PAUSED_QUEUE, Seeded
from river_ui.security import CONTENT_SECURITY_POLICY, CSRF_COOKIE
from tests.ui.conftest import HOSTILE, IMG, SCRIPT, csrf_token, insert_hostile, queue_paused, state_of

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def web(seeded: tuple[str, Seeded]) -> Iterator[TestClient]:
    with TestClient(create_app(database_url=seeded[0])) as client:
        yield client


@pytest.fixture(scope="module")
def shared_web(shared: tuple[str, Seeded]) -> Iterator[TestClient]:
    with TestClient(create_app(database_url=shared[0])) as client:
        yield client


def cell(page: str, queue: str, state: str) -> str:
    row = re.search(rf'<tr class="queue-row" data-queue="{queue}">(.*?)</tr>', page, re.S)
    assert row, f"no row for queue {queue}"
    match = re.search(rf'class="num count-{state}">(.*?)</td>', row.group(1), re.S)
    assert match
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


# ---------------------------------------------------------------- pages


def test_overview_shows_each_queue_by_state_with_pause_leader_age_and_chart(shared_web: TestClient) -> None:
    response = shared_web.get("/")
    assert response.status_code == 200
    page = response.text
    # demo_rows: 12 available jobs over three queues, 4 scheduled in email, 1 retryable in default
    assert cell(page, "default", "available") == "4"
    assert cell(page, "email", "scheduled") == "4"
    assert cell(page, "default", "retryable") == "1"
    assert cell(page, "email", "pending") == "1"
    reports = re.search(r'data-queue="reports">(.*?)</tr>', page, re.S)
    assert reports and '<span class="paused">paused</span>' in reports.group(1)
    assert PAUSED_QUEUE == "reports"
    assert LEADER_ID in page
    assert re.search(r'<span id="clients"><code title="worker-1">worker-1</code> \(3\)</span>', page)
    assert re.search(r'<td class="age">1[0-2]m \d+s</td>', page)  # the oldest available is ~10-12 minutes old
    assert page.count('<rect class="series-completed"') > 10
    assert '<rect class="series-failed"' in page


def test_job_list_filters_by_state_queue_kind_tag_and_id(
    shared: tuple[str, Seeded], shared_web: TestClient
) -> None:
    _, seeded = shared

    def ids(query: str) -> list[int]:
        response = shared_web.get("/jobs" + query)
        assert response.status_code == 200
        return [int(i) for i in re.findall(r'data-job-id="(\d+)"', response.text)]

    assert ids("?state=retryable") == seeded.ids[JobState.RETRYABLE]
    assert ids("?state=scheduled&queue=email") == sorted(seeded.ids[JobState.SCHEDULED], reverse=True)
    assert ids("?state=available&queue=default&kind=send_email") != []
    assert ids("?tag=billing") == seeded.ids[JobState.RETRYABLE]
    running = seeded.ids[JobState.RUNNING][0]
    assert ids(f"?id={running}") == [running]
    assert ids("?queue=nowhere") == []
    bad = shared_web.get("/jobs?id=abc")
    assert bad.status_code == 400 and "job id must be a number" in bad.text
    # The state is checked by client.jobs.list (river_protocol.admin), as for any caller.
    bad = shared_web.get("/jobs?state=lost")
    assert bad.status_code == 400 and "unknown job state &#39;lost&#39;" in bad.text


def test_job_list_pages_by_cursor_over_every_job_once(
    shared: tuple[str, Seeded], shared_web: TestClient
) -> None:
    _, seeded = shared
    everything = sorted((i for ids in seeded.ids.values() for i in ids), reverse=True)
    seen: list[int] = []
    url: str | None = "/jobs"
    pages = 0
    while url:
        page = shared_web.get(url).text
        seen += [int(i) for i in re.findall(r'data-job-id="(\d+)"', page)]
        match = re.search(r'<a href="([^"]+)" id="next-page">', page)
        url = html.unescape(match.group(1)) if match else None
        assert url is None or ("after=" in url and "offset" not in url.lower())
        pages += 1
    assert seen == everything
    assert pages == len(everything) // 50 + 1


def test_job_page_shows_args_metadata_errors_trace_output_and_timeline(
    shared: tuple[str, Seeded],
    shared_web: TestClient,
) -> None:
    _, seeded = shared
    retryable = seeded.ids[JobState.RETRYABLE][0]
    page = shared_web.get(f"/jobs/{retryable}").text
    assert '<pre id="args">{\n  &#34;account&#34;: &#34;acme&#34;\n}</pre>' in page
    assert "timeout after 30s" in page and "ConnectionRefusedError: [Errno 111] Connection refused" in page
    assert page.index("attempt 1 failed") < page.index("attempt 2 failed")
    assert "created" in page and "scheduled" in page
    completed_with_output = [
        i for i in seeded.ids[JobState.COMPLETED] if 'id="output"' in shared_web.get(f"/jobs/{i}").text
    ]
    assert completed_with_output, "the demo's completed jobs with an output show it"
    missing = shared_web.get("/jobs/987654321")
    assert missing.status_code == 404 and "No job 987654321" in missing.text


def test_periodic_page_lists_the_periodic_jobs_seen(shared_web: TestClient) -> None:
    page = shared_web.get("/periodic").text
    row = re.search(r"<td>cleanup</td>(.*?)</tr>", page, re.S)
    assert row and "hourly_cleanup" in row.group(1) and '<td class="num">3</td>' in row.group(1)


def test_every_response_carries_the_content_security_policy(shared_web: TestClient) -> None:
    for path in ("/", "/jobs", "/jobs/1", "/jobs/987654321", "/periodic", "/static/river_ui.js", "/nowhere"):
        response = shared_web.get(path)
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        assert (
            "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
        )
    forbidden = shared_web.post("/actions/jobs", data={"action": "retry", "job_id": "1"})
    assert forbidden.status_code == 403
    assert forbidden.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_no_page_has_inline_script_and_assets_are_served_from_the_package(shared_web: TestClient) -> None:
    page = shared_web.get("/").text
    assert re.findall(r"<script[^>]*>", page) == ['<script src="http://testserver/static/river_ui.js" defer>']
    assert " on" not in re.sub(r'"[^"]*"', '""', page).lower().replace(" onerror", "X")  # no on*= handlers
    assert "http" not in "".join(re.findall(r'(?:src|href)="(?!http://testserver)([^"]+)"', page)).replace(
        "data:,", ""
    )
    css = shared_web.get("/static/river_ui.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


# ---------------------------------------------------------------- hostile input


def test_hostile_input_is_shown_escaped_everywhere(seeded: tuple[str, Seeded], web: TestClient) -> None:
    url, _ = seeded
    job_id = insert_hostile(url)
    pages = {
        "overview": web.get("/").text,
        "list": web.get("/jobs").text,
        "job": web.get(f"/jobs/{job_id}").text,
        "filtered": web.get("/jobs", params={"kind": f"evil{HOSTILE}", "queue": f"q{HOSTILE}"}).text,
        "workflows": web.get("/workflows").text,
        "workflow": web.get("/workflows/wf_hostile").text,
    }
    for name, page in pages.items():
        assert SCRIPT not in page and "<img" not in page, name
        assert "window.__pwned" in page or name == "overview", name  # shown, as text
        assert "<svg" not in page or "<script" not in page.split("<svg", 1)[1], name
        assert "&lt;script&gt;" in page, name
    assert f'data-job-id="{job_id}"' in pages["filtered"]
    assert (
        html.escape(IMG, quote=True).replace("&#x27;", "&#39;") in pages["job"]
        or "&#34;&gt;&lt;img" in pages["job"]
    )


# ---------------------------------------------------------------- actions


def test_retry_cancel_and_delete_go_through_the_admin_api(
    seeded: tuple[str, Seeded], web: TestClient
) -> None:
    url, ids = seeded
    token = csrf_token(web.get("/jobs").text)
    discarded = ids.ids[JobState.DISCARDED][0]
    response = web.post(
        "/actions/jobs",
        data={"action": "retry", "job_id": str(discarded), "csrf_token": token, "next": f"/jobs/{discarded}"},
        follow_redirects=False,
    )
    assert response.status_code == 303 and response.headers["location"].startswith(
        f"/jobs/{discarded}?msg=retried"
    )
    assert state_of(url, discarded) is JobState.AVAILABLE

    scheduled = ids.ids[JobState.SCHEDULED][:2]
    response = web.post(
        "/actions/jobs", data={"action": "cancel", "job_id": [str(i) for i in scheduled], "csrf_token": token}
    )
    assert response.status_code == 200 and "cancelled 2 jobs" in response.text
    assert [state_of(url, i) for i in scheduled] == [JobState.CANCELLED] * 2

    running, completed = ids.ids[JobState.RUNNING][0], ids.ids[JobState.COMPLETED][0]
    response = web.post(
        "/actions/jobs",
        data={"action": "delete", "job_id": [str(running), str(completed)], "csrf_token": token},
    )
    assert (
        "deleted 1 job" in response.text and f"job {running}" in response.text
    )  # running: refused, said why
    assert state_of(url, completed) is None and state_of(url, running) is JobState.RUNNING
    response = web.post(
        "/actions/jobs", data={"action": "retry", "job_id": str(running), "csrf_token": token}
    )
    assert "retried 0 jobs" in response.text and f"job {running} is running: not retried" in response.text


def test_pause_and_resume_a_queue(seeded: tuple[str, Seeded], web: TestClient) -> None:
    url, _ = seeded
    token = csrf_token(web.get("/").text)
    assert not queue_paused(url, "email")
    page = web.post("/actions/queue", data={"action": "pause", "queue": "email", "csrf_token": token}).text
    assert "paused queue email" in page and queue_paused(url, "email")
    web.post("/actions/queue", data={"action": "resume", "queue": "email", "csrf_token": token})
    assert not queue_paused(url, "email")
    missing = web.post("/actions/queue", data={"action": "pause", "queue": "nope", "csrf_token": token})
    assert "not found" in missing.text


def test_a_post_without_a_valid_csrf_token_is_refused_and_changes_nothing(
    seeded: tuple[str, Seeded],
    web: TestClient,
) -> None:
    url, ids = seeded
    token = csrf_token(web.get("/").text)
    discarded = ids.ids[JobState.DISCARDED][0]
    forged = token.split(".")[0] + "." + "0" * 32
    for data in ({}, {"csrf_token": ""}, {"csrf_token": forged}, {"csrf_token": token + "x"}):
        response = web.post("/actions/jobs", data={"action": "retry", "job_id": str(discarded), **data})
        assert response.status_code == 403, data
        response = web.post("/actions/queue", data={"action": "pause", "queue": "email", **data})
        assert response.status_code == 403, data
    # The right token without its cookie (another site's form posting here) is refused too.
    web.cookies.delete(CSRF_COOKIE)
    response = web.post(
        "/actions/jobs", data={"action": "retry", "job_id": str(discarded), "csrf_token": token}
    )
    assert response.status_code == 403
    assert state_of(url, discarded) is JobState.DISCARDED and not queue_paused(url, "email")
    # A GET never changes anything: the action routes answer only POST.
    assert web.get("/actions/jobs", params={"action": "retry", "job_id": discarded}).status_code == 405


def test_after_an_action_only_a_local_path_is_followed(seeded: tuple[str, Seeded], web: TestClient) -> None:
    token = csrf_token(web.get("/").text)
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"):
        response = web.post(
            "/actions/queue",
            data={"action": "pause", "queue": "email", "csrf_token": token, "next": target},
            follow_redirects=False,
        )
        assert response.status_code == 303 and response.headers["location"].startswith("/?msg="), target


def test_read_only_mode_hides_and_refuses_every_action(seeded: tuple[str, Seeded]) -> None:
    url, ids = seeded
    with TestClient(create_app(database_url=url, read_only=True)) as web:
        pages = [web.get(p).text for p in ("/", "/jobs", f"/jobs/{ids.ids[JobState.DISCARDED][0]}")]
        for page in pages:
            assert 'method="post"' not in page and 'name="action"' not in page and 'id="read-only"' in page
        token = csrf_token(web.get("/jobs").text) if 'name="csrf_token"' in pages[1] else "x.y"
        discarded = ids.ids[JobState.DISCARDED][0]
        response = web.post(
            "/actions/jobs", data={"action": "retry", "job_id": str(discarded), "csrf_token": token}
        )
        assert response.status_code == 403 and "read-only" in response.text
        assert web.post("/actions/queue", data={"action": "pause", "queue": "email"}).status_code == 403
    assert state_of(url, discarded) is JobState.DISCARDED and not queue_paused(url, "email")


# ---------------------------------------------------------------- authentication


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_basic_auth_guards_every_path(shared: tuple[str, Seeded]) -> None:
    app = create_app(database_url=shared[0], auth=BasicAuth("ops", "s3cret"))
    with TestClient(app) as web:
        for path in ("/", "/jobs", "/static/river_ui.css"):
            response = web.get(path)
            assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Basic")
            assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert web.get("/", headers=_basic("ops", "wrong")).status_code == 401
        assert web.get("/", headers={"Authorization": "Basic !!!"}).status_code == 401
        assert web.get("/", headers=_basic("ops", "s3cret")).status_code == 200


def test_basic_auth_from_the_environment() -> None:
    assert BasicAuth.from_env({}) is None
    assert BasicAuth.from_env({"RIVER_UI_USERNAME": "a", "RIVER_UI_PASSWORD": "b"}) == BasicAuth("a", "b")
    with pytest.raises(ConfigurationError, match="both"):
        BasicAuth.from_env({"RIVER_UI_USERNAME": "a"})
    with pytest.raises(ConfigurationError):
        BasicAuth("", "")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_callable_from_the_host_app_decides(shared: tuple[str, Seeded], asynchronous: bool) -> None:
    def allow(request: object) -> bool:
        return getattr(request, "headers", {}).get("x-staff") == "yes"

    async def allow_async(request: object) -> bool:
        return allow(request)

    with TestClient(create_app(database_url=shared[0], auth=allow_async if asynchronous else allow)) as web:
        assert web.get("/").status_code == 403
        assert web.get("/", headers={"x-staff": "yes"}).status_code == 200


def test_create_app_needs_one_database() -> None:
    from river_protocol.errors import ValidationError

    with pytest.raises(ValidationError, match="exactly one"):
        create_app()


def test_mounted_under_a_prefix_links_stay_inside_it(shared: tuple[str, Seeded]) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    host = Starlette(routes=[Mount("/admin/river", app=create_app(database_url=shared[0]))])
    with TestClient(host) as web:
        first = web.get("/admin/river/jobs")
        page = first.text
        cookie = first.headers.get("set-cookie", "")
        assert "Path=/admin/river/" in cookie and "SameSite=strict" in cookie and "HttpOnly" in cookie
        assert 'href="http://testserver/admin/river/static/river_ui.css"' in page
        assert 'action="http://testserver/admin/river/actions/jobs"' in page
        assert web.get("/admin/river/static/river_ui.js").status_code == 200
        assert "set-cookie" not in web.get("/admin/river/").headers  # the cookie's token is kept


def test_a_page_of_the_host_joins_the_navigation_and_the_templates(
    shared: tuple[str, Seeded], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from starlette.routing import Route

    from river_ui import Page

    (tmp_path / "quotas.html").write_text(
        '{% extends "base.html" %}{% block content %}<h1 id="quotas">Quotas: {{ used }}</h1>{% endblock %}'
    )

    async def quotas(request):  # type: ignore[no-untyped-def]
        return request.app.state.river_ui.render(request, "quotas.html", {"used": "3 of <5>"})

    page = Page("Quotas", Route("/quotas", quotas, name="quotas"), "quotas")
    with TestClient(create_app(database_url=shared[0], pages=[page], template_dirs=[tmp_path])) as web:
        overview = web.get("/").text
        assert '<a href="http://testserver/quotas">Quotas</a>' in overview
        response = web.get("/quotas")
        assert '<h1 id="quotas">Quotas: 3 of &lt;5&gt;</h1>' in response.text
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert 'href="http://testserver/jobs">Jobs</a>' in response.text


# ---------------------------------------------------------------- workflows and flow control


def test_workflows_are_listed_with_their_state_and_counts(shared_web: TestClient) -> None:
    page = shared_web.get("/workflows").text
    rows = dict(re.findall(r'data-workflow-id="([^"]+)">(.*?)</tr>', page, re.S))
    assert set(rows) == {"wf_nightly_report", "wf_signup_42"}
    assert "wf-failed" in rows["wf_nightly_report"] and "nightly report" in rows["wf_nightly_report"]
    assert "wf-running" in rows["wf_signup_42"]
    before = re.search(r'data-workflow-id="wf_signup_42".*?title="([^"]+)"', page, re.S)
    assert (
        shared_web.get("/workflows", params={"before": "2000-01-01T00:00:00+00:00"}).text.count(
            "workflow-row"
        )
        == 0
        and before
    )
    bad = shared_web.get("/workflows?before=yesterday")
    assert bad.status_code == 400 and "ISO 8601" in bad.text
    bad = shared_web.get("/workflows?before=2000-01-01T00:00:00")  # refused by client.workflows.list
    assert bad.status_code == 400 and "before must carry its offset, got 2000-01-01T00:00:00" in bad.text


def test_a_workflow_page_draws_its_tasks_as_a_graph(shared_web: TestClient) -> None:
    page = shared_web.get("/workflows/wf_nightly_report").text
    assert re.findall(r'<a href="[^"]+" class="node" data-task="([^"]+)"', page) == [
        "extract",
        "transform_orders",
        "transform_refunds",
        "load",
        "notify",
    ]
    assert page.count('<path class="edge"') == 5
    assert 'class="node-discarded"' in page and 'class="node-cancelled"' in page
    assert "<title>transform_refunds → load</title>" in page
    assert shared_web.get("/workflows/wf_missing").status_code == 404
    assert shared_web.get("/workflows/bad%20id").status_code == 404


def workflow_states(url: str, workflow_id: str) -> dict[str, JobState]:
    client = Client(url, leader_election=False, notifications=False)
    try:
        return {name: job.state for name, job in client.workflows.get(workflow_id).tasks.items()}
    finally:
        client.close()


def test_cancel_and_retry_a_workflow(seeded: tuple[str, Seeded], web: TestClient) -> None:
    url, _ = seeded
    token = csrf_token(web.get("/workflows/wf_nightly_report").text)
    page = web.post(
        "/actions/workflow",
        data={
            "action": "retry",
            "workflow_id": "wf_nightly_report",
            "csrf_token": token,
            "next": "/workflows/wf_nightly_report",
        },
    )
    assert "retried 3 tasks" in page.text
    assert 'data-task="transform_refunds"' in page.text and 'class="node-available"' in page.text
    page = web.post(
        "/actions/workflow", data={"action": "cancel", "workflow_id": "wf_signup_42", "csrf_token": token}
    )
    assert re.search(r"cancelled \d+ tasks", page.text)
    assert workflow_states(url, "wf_nightly_report")["transform_refunds"] is JobState.AVAILABLE
    assert workflow_states(url, "wf_signup_42")["send_welcome"] is JobState.CANCELLED
    refused = web.post("/actions/workflow", data={"action": "cancel", "workflow_id": "wf_nightly_report"})
    assert refused.status_code == 403


def test_the_flow_control_page_shows_limits_and_use(shared_web: TestClient) -> None:
    page = shared_web.get("/limits").text
    rows = dict(re.findall(r'data-queue="([^"]+)">(.*?)</tr>', page.split('id="limits"', 1)[1], re.S))
    assert set(rows) == {"email", "reports"}
    cells = [
        re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", rows["email"], re.S)
    ]
    assert cells[1:4] == ["1", "10", "2"]  # running, global, local
    assert "100 per 1m 0s" in rows["reports"]


def test_a_database_that_fails_gets_a_page_saying_so(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sqlite3

    from river_ui.testing import free_port

    unmigrated = tmp_path / "unmigrated.sqlite3"
    sqlite3.connect(unmigrated).close()
    cases = {
        f"sqlite://{unmigrated}": "river migrate-up",
        f"sqlite://{tmp_path / 'missing.sqlite3'}": "no SQLite database at",
        f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere": "the database is unavailable",
    }
    for url, says in cases.items():
        with TestClient(create_app(database_url=url)) as web:
            for path in ("/", "/jobs", "/workflows"):
                response = web.get(path)
                assert response.status_code == 503, (url, path)
                assert says in response.text and 'id="database-error"' in response.text, (url, path)
                assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_the_hosts_own_client_serves_and_stays_open(shared: tuple[str, Seeded]) -> None:
    from river_protocol.errors import ValidationError

    client = Client(shared[0], leader_election=False, notifications=False)
    try:
        with TestClient(create_app(client=client)) as web:
            assert web.get("/jobs?state=retryable").text.count("job-row") == 1
        assert client.jobs.get(shared[1].ids[JobState.RETRYABLE][0]).state is JobState.RETRYABLE  # still open
        with pytest.raises(ValidationError, match="exactly one"):
            create_app(client=client, database_url=shared[0])
    finally:
        client.close()
