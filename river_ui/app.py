"""``create_app``: the dashboard as an ASGI application (Starlette, Jinja2 with autoescape).

The app holds one threaded client (``river_sync``) and calls it through
Starlette's thread pool. Why the threaded client rather than the async one:
an async client's pools belong to the event loop that opened them and are
opened and closed by a lifespan, but a sub-application mounted in FastAPI,
Starlette or Django never receives lifespan events; the threaded client is
opened lazily on the first request, from any host (asyncio, trio, a Django
ASGI dispatcher), and needs nothing from the host's loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import URL
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from river_protocol.dashboard import EXACT_COUNT_LIMIT, STATE_ORDER, StateCount, action_outcome, pretty_json
from river_protocol.errors import (
    DatabaseNotMigratedError,
    DatabaseUnavailableError,
    JobNotFoundError,
    QueueNotFoundError,
    RiverError,
    ValidationError,
)
from river_protocol.metadata_keys import OUTPUT
from river_sync import Client
from river_ui import data
from river_ui.chart import stacked_bars
from river_ui.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    AuthCallable,
    BasicAuth,
    Csrf,
    SecurityHeaders,
    is_allowed,
)

log = logging.getLogger(__name__)

JOB_ACTIONS = ("retry", "cancel", "delete")
QUEUE_ACTIONS = ("pause", "resume")
REFRESH_SECONDS = 5
MAX_SELECTION = 500


@dataclass(frozen=True)
class Page:
    """An extra page in the navigation: the place for flow-control limits and workflows.

    ``route`` is any Starlette route, ``name`` its name (the link is ``url_for(name)``). Its
    handler renders with the dashboard's templates and security headers through
    ``request.app.state.river_ui.render(request, "your.html", {...})``; ``your.html`` lives in
    one of ``create_app(template_dirs=...)`` and may extend ``base.html``.
    """

    title: str
    route: BaseRoute
    name: str


class ClientHolder:
    """One threaded client, opened on first use (thread-safe), closed with the app if ours."""

    def __init__(self, database_url: str | None, schema: str | None, client: Client | None) -> None:
        if (database_url is None) == (client is None):
            raise ValidationError("create_app needs exactly one of database_url= or client=")
        self._url, self._schema = database_url, schema
        self._client = client
        self._owned = client is None
        self._lock = threading.Lock()

    def get(self) -> Client:
        with self._lock:
            if self._client is None:
                assert self._url is not None
                self._client = Client(
                    self._url, schema=self._schema, leader_election=False, notifications=False
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._owned and self._client is not None:
                self._client.close()
                self._client = None


class Dashboard:
    """The app's state: the client, the rules of this deployment and the templates."""

    def __init__(
        self,
        *,
        holder: ClientHolder,
        auth: BasicAuth | AuthCallable | None,
        read_only: bool,
        csrf: Csrf,
        pages: Sequence[Page],
        refresh_seconds: int,
        template_dirs: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        self.holder, self.auth, self.read_only, self.csrf = holder, auth, read_only, csrf
        self.pages, self.refresh_seconds = tuple(pages), refresh_seconds
        # The host's own templates (for its pages) first, then the dashboard's, which they extend.
        loaders: list[jinja2.BaseLoader] = (
            [jinja2.FileSystemLoader(list(template_dirs))] if template_dirs else []
        )
        env = jinja2.Environment(
            loader=jinja2.ChoiceLoader([*loaders, jinja2.PackageLoader("river_ui", "templates")]),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        env.filters.update(
            ago=describe_age, ts=format_time, short=short_time, num=format_count, json=pretty_json
        )
        self.templates = Jinja2Templates(env=env)

    def render(
        self, request: Request, template: str, context: dict[str, Any], status_code: int = 200
    ) -> Response:
        token = self.csrf.token_for(request)
        ctx = {
            "read_only": self.read_only,
            "csrf_field": CSRF_FIELD,
            "csrf_token": token,
            "pages": self.pages,
            "refresh_seconds": self.refresh_seconds,
            "states": STATE_ORDER,
            "message": request.query_params.get("msg", ""),
            "error": request.query_params.get("err", ""),
            **context,
        }
        response = self.templates.TemplateResponse(request, template, ctx, status_code=status_code)
        if request.cookies.get(CSRF_COOKIE) != token:
            response.set_cookie(
                CSRF_COOKIE,
                token,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
                path=_cookie_path(request),
            )
        return response


def _cookie_path(request: Request) -> str:
    return str(request.scope.get("root_path") or "") + "/"


def dashboard(request: Request) -> Dashboard:
    state: Dashboard = request.app.state.river_ui
    return state


# ---------------------------------------------------------------- filters


def describe_age(value: timedelta | None) -> str:
    """``1h 5m``-style: the two largest units, enough to read at a glance."""
    if value is None:
        return "—"
    s = max(int(value.total_seconds()), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def format_time(value: datetime | None) -> str:
    return "—" if value is None else value.isoformat(sep=" ", timespec="milliseconds")


def short_time(value: datetime | None) -> str:
    """To the second, in UTC: what a table needs (the full time is in the element's title)."""
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def format_count(value: StateCount | int) -> str:
    if isinstance(value, StateCount):
        if value.at_least:
            return f"> {value.count - 1:,}"
        return ("≈ " if value.estimated else "") + f"{value.count:,}"
    return f"{value:,}"


# ---------------------------------------------------------------- pages


async def overview_page(request: Request) -> Response:
    ui = dashboard(request)
    view = await run_in_threadpool(data.overview, ui.holder.get())
    charts = {q.name: stacked_bars(q.series, since=view.since, bucket=view.bucket) for q in view.queues}
    return ui.render(
        request, "overview.html", {"view": view, "charts": charts, "exact_limit": EXACT_COUNT_LIMIT}
    )


async def jobs_page(request: Request) -> Response:
    ui = dashboard(request)
    flt = data.JobFilter.from_query(request.query_params)
    client = ui.holder.get()
    try:
        page = await run_in_threadpool(data.list_jobs, client, flt)
        problem = ""
    except ValidationError as exc:
        page, problem = None, str(exc)
    queues = await run_in_threadpool(data.all_queues, client)
    next_url = None
    if page is not None and page.next_cursor:
        next_url = request.url_for("jobs").include_query_params(**flt.query(after=page.next_cursor))
    first_url = request.url_for("jobs").include_query_params(**flt.query(after="")) if flt.after else None
    return ui.render(
        request,
        "jobs.html",
        {
            "filter": flt,
            "page": page,
            "problem": problem,
            "queues": queues,
            "next_url": next_url,
            "first_url": first_url,
            "here": _here(request),
        },
        status_code=200 if not problem else 400,
    )


async def job_page(request: Request) -> Response:
    ui = dashboard(request)
    job_id = request.path_params["job_id"]
    try:
        job = await run_in_threadpool(ui.holder.get().jobs.get, job_id)
    except JobNotFoundError:
        return ui.render(request, "not_found.html", {"what": f"job {job_id}"}, status_code=404)
    timeline = sorted(
        [
            (moment, label)
            for moment, label in (
                (job.created_at, "created"),
                (job.scheduled_at, "scheduled"),
                (job.attempted_at, f"attempt {job.attempt} started"),
                (job.finalized_at, f"finalized ({job.state.value})"),
            )
            if moment is not None
        ]
        + [(e.at, f"attempt {e.attempt} failed") for e in job.errors],
        key=lambda item: item[0],
    )
    has_output = OUTPUT in job.metadata
    return ui.render(
        request,
        "job.html",
        {
            "job": job,
            "timeline": timeline,
            "has_output": has_output,
            "output": pretty_json(job.metadata.get(OUTPUT)) if has_output else "",
            "args": pretty_json(job.encoded_args),
            "metadata": pretty_json(job.metadata),
            "here": _here(request),
        },
    )


async def workflows_page(request: Request) -> Response:
    ui = dashboard(request)
    before = request.query_params.get("before", "")
    try:
        flows = await run_in_threadpool(data.list_workflows, ui.holder.get(), before)
        problem = ""
    except ValidationError as exc:
        flows, problem = [], str(exc)
    next_url = None
    if len(flows) == data.PAGE_SIZE and flows[-1].created_at is not None:
        next_url = request.url_for("workflows").include_query_params(before=flows[-1].created_at.isoformat())
    return ui.render(
        request,
        "workflows.html",
        {"workflows": flows, "problem": problem, "next_url": next_url, "paged": bool(before)},
        status_code=400 if problem else 200,
    )


async def workflow_page(request: Request) -> Response:
    ui = dashboard(request)
    workflow_id = request.path_params["workflow_id"]
    try:
        view = await run_in_threadpool(ui.holder.get().workflows.get, workflow_id)
    except (JobNotFoundError, ValidationError):
        return ui.render(request, "not_found.html", {"what": f"workflow {workflow_id}"}, status_code=404)
    return ui.render(
        request,
        "workflow.html",
        {
            "workflow": view,
            "graph": data.workflow_graph(view),
            "summary": view.summary,
            "here": _here(request),
        },
    )


async def limits_page(request: Request) -> Response:
    ui = dashboard(request)
    flows = await run_in_threadpool(ui.holder.get().queues.flow_status)
    return ui.render(request, "limits.html", {"flows": flows})


async def periodic_page(request: Request) -> Response:
    ui = dashboard(request)
    seen = await run_in_threadpool(data.periodic, ui.holder.get())
    return ui.render(request, "periodic.html", {"periodic": seen})


def _here(request: Request) -> str:
    """This page's path and query, to come back to after an action."""
    url = request.url
    return url.path + (f"?{url.query}" if url.query else "")


# ---------------------------------------------------------------- actions


async def _checked_form(request: Request) -> Any:
    ui = dashboard(request)
    if ui.read_only:
        raise HTTPException(403, "this dashboard is read-only")
    form = await request.form()
    if not ui.csrf.check(request, form):
        raise HTTPException(403, "missing or invalid CSRF token; reload the page and try again")
    return form


def _back(request: Request, form: Any, fallback: str, **params: str) -> RedirectResponse:
    target = form.get("next", "")
    # Only a path of this site: never an absolute URL or a scheme-relative one (open redirect).
    if not isinstance(target, str) or not target.startswith("/") or target.startswith("//") or "\\" in target:
        target = str(request.url_for(fallback).path)
    url = (
        URL(target)
        .remove_query_params(["msg", "err"])
        .include_query_params(**{k: v for k, v in params.items() if v})
    )
    return RedirectResponse(str(url), status_code=303)


def job_actions(client: Client, action: str, ids: list[int]) -> tuple[str, str]:
    """Run ``action`` on each job through the admin API; (what was done, what was refused)."""
    method: Callable[[int], Any] = getattr(client.jobs, action)
    done, refused = 0, []
    for job_id in ids:
        try:
            note = action_outcome(action, method(job_id))
        except (RiverError, ValidationError) as exc:
            refused.append(f"job {job_id}: {exc}")
            continue
        if note is None:
            done += 1
        else:
            refused.append(note)
    past = {"retry": "retried", "cancel": "cancelled", "delete": "deleted"}[action]
    return f"{past} {done} job{'s' if done != 1 else ''}", "; ".join(refused)


async def jobs_action(request: Request) -> Response:
    form = await _checked_form(request)
    action = form.get("action")
    if action not in JOB_ACTIONS:
        raise HTTPException(400, f"unknown action {action!r}; use one of {', '.join(JOB_ACTIONS)}")
    try:
        ids = [int(v) for v in form.getlist("job_id")]
    except ValueError:
        raise HTTPException(400, "job_id must be numbers") from None
    if not ids:
        return _back(request, form, "jobs", err="select at least one job")
    if len(ids) > MAX_SELECTION:
        raise HTTPException(400, f"at most {MAX_SELECTION} jobs at once")
    done, refused = await run_in_threadpool(job_actions, dashboard(request).holder.get(), action, ids)
    return _back(request, form, "jobs", msg=done, err=refused)


async def queue_action(request: Request) -> Response:
    form = await _checked_form(request)
    action, name = form.get("action"), form.get("queue")
    if action not in QUEUE_ACTIONS or not isinstance(name, str) or not name:
        raise HTTPException(400, "need action=pause|resume and a queue name")
    queues = dashboard(request).holder.get().queues
    try:
        await run_in_threadpool(queues.pause if action == "pause" else queues.resume, name)
    except (QueueNotFoundError, ValidationError) as exc:
        return _back(request, form, "overview", err=str(exc))
    return _back(request, form, "overview", msg=f"{action}d queue {name}")


async def workflow_action(request: Request) -> Response:
    form = await _checked_form(request)
    action, workflow_id = form.get("action"), form.get("workflow_id")
    if action not in ("cancel", "retry") or not isinstance(workflow_id, str) or not workflow_id:
        raise HTTPException(400, "need action=cancel|retry and a workflow_id")
    workflows = dashboard(request).holder.get().workflows
    try:
        rows = await run_in_threadpool(
            workflows.cancel if action == "cancel" else workflows.retry, workflow_id
        )
    except (RiverError, ValidationError) as exc:
        return _back(request, form, "workflows", err=str(exc))
    past = "cancelled" if action == "cancel" else "retried"
    return _back(request, form, "workflows", msg=f"{past} {len(rows)} task{'s' if len(rows) != 1 else ''}")


async def database_error(request: Request, exc: Exception) -> Response:
    """The database is missing, unreachable or not migrated: say so on a page, with status 503."""
    log.warning("river_ui: the database failed a request for %s: %s", request.url.path, exc)
    text = " ".join(str(exc).split())
    missing_tables = "no such table" in text or ("relation" in text and "does not exist" in text)
    hint = (
        "River's tables are not there: migrate first (river migrate-up --database-url URL)."
        if (missing_tables)
        else ""
    )
    return dashboard(request).render(request, "error.html", {"problem": text, "hint": hint}, status_code=503)


def _database_errors() -> tuple[type[Exception], ...]:
    """What a page may raise when the database fails: ours and the drivers' own."""
    import sqlite3

    import psycopg

    kinds: list[type[Exception]] = [
        DatabaseUnavailableError,
        DatabaseNotMigratedError,
        psycopg.Error,
        sqlite3.Error,
    ]
    try:
        from sqlean import dbapi2  # type: ignore[import-untyped]  # river_db's SQLite when the stdlib's is old
    except ImportError:
        pass
    else:
        kinds.append(dbapi2.Error)
    return tuple(kinds)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)


# ---------------------------------------------------------------- authentication


class RequireAuth:
    """Refuse every request (static files too) the configured ``auth`` does not allow."""

    def __init__(self, app: ASGIApp, auth: BasicAuth | AuthCallable | None) -> None:
        self.app, self.auth = app, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not await is_allowed(self.auth, Request(scope)):
            if isinstance(self.auth, BasicAuth):
                response: Response = PlainTextResponse(
                    "authentication required",
                    status_code=401,
                    headers={"WWW-Authenticate": 'Basic realm="River UI", charset="UTF-8"'},
                )
            else:
                response = PlainTextResponse("forbidden", status_code=403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


# ---------------------------------------------------------------- the factory


def create_app(
    *,
    database_url: str | None = None,
    client: Client | None = None,
    schema: str | None = None,
    auth: BasicAuth | AuthCallable | None = None,
    read_only: bool = False,
    csrf_secret: bytes | None = None,
    pages: Sequence[Page] = (),
    template_dirs: Sequence[str | os.PathLike[str]] = (),
    refresh_seconds: int = REFRESH_SECONDS,
    debug: bool = False,
) -> Starlette:
    """The dashboard as an ASGI app, to serve alone or to mount under a prefix.

    ``database_url`` (Postgres or SQLite) or a threaded ``client`` of the host's (not closed by
    the app). ``auth``: None (anyone who reaches it: keep it on loopback), ``BasicAuth(...)`` /
    ``BasicAuth.from_env()``, or a callable ``(request) -> bool`` (sync or async) of the host app.
    ``read_only`` hides and refuses every action. ``csrf_secret`` signs the CSRF tokens (random
    per app by default; give one when several processes serve the same dashboard).
    ``pages`` adds pages to the navigation (see ``Page``), whose templates are looked up in
    ``template_dirs`` first (they may extend the dashboard's ``base.html``). ``refresh_seconds``:
    how often pages refresh themselves (0: never).
    """
    holder = ClientHolder(database_url, schema, client)
    ui = Dashboard(
        holder=holder,
        auth=auth,
        read_only=read_only,
        csrf=Csrf(csrf_secret),
        pages=pages,
        refresh_seconds=refresh_seconds,
        template_dirs=template_dirs,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await run_in_threadpool(holder.close)

    routes: list[BaseRoute] = [
        Route("/", overview_page, name="overview"),
        Route("/jobs", jobs_page, name="jobs"),
        Route("/jobs/{job_id:int}", job_page, name="job"),
        Route("/actions/jobs", jobs_action, methods=["POST"], name="jobs_action"),
        Route("/actions/queue", queue_action, methods=["POST"], name="queue_action"),
        Route("/periodic", periodic_page, name="periodic"),
        Route("/workflows", workflows_page, name="workflows"),
        Route("/workflows/{workflow_id:str}", workflow_page, name="workflow"),
        Route("/actions/workflow", workflow_action, methods=["POST"], name="workflow_action"),
        Route("/limits", limits_page, name="limits"),
        *(page.route for page in pages),
        Mount("/static", StaticFiles(packages=[("river_ui", "static")]), name="static"),
    ]
    app = Starlette(
        debug=debug,
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(SecurityHeaders), Middleware(RequireAuth, auth=auth)],
        exception_handlers={HTTPException: http_error, **dict.fromkeys(_database_errors(), database_error)},
    )
    app.state.river_ui = ui
    return app
