"""Project sessions: tests, docs, conformance, lint, typecheck, bench."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PY = "3.11"


@nox.session(python=PY)
def tests(session: nox.Session) -> None:
    """The whole test suite (unit, property, conformance, real Postgres and SQLite)."""
    session.install("-e", ".[test]")
    # The suite mostly waits (clients polling, back-offs, subprocesses), so one worker per core
    # halves its wall time; every test has its own scratch database or file, so the workers do
    # not share state. `nox -s tests -- -n 0` runs it in one process.
    session.run("pytest", "-n", "auto", *session.posargs)


@nox.session(python=PY)
def docs(session: nox.Session) -> None:
    """The documentation site, warnings as errors (into ./site, or the directory given after --)."""
    session.install("-e", ".[docs]")
    site_dir = session.posargs[0] if session.posargs else "site"
    session.run("mkdocs", "build", "--strict", "--site-dir", site_dir, env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=PY)
def conformance(session: nox.Session) -> None:
    """River's Go-generated fixtures, as a table per family."""
    session.install("-e", ".")
    session.run("python", "-m", "conformance", *session.posargs)


@nox.session(python=PY)
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "river_protocol", "river_db", "river_sync", "river_anyio", "river_trio", "river_asyncio", "river_tools", "river_otel", "river_ui", "river_prometheus", "conformance", "tests", "examples", "tools")
    # river_sync's generated modules must be what their river_anyio sources make (never hand-edited).
    session.run("python", "tools/async_to_sync.py", "--check")


@nox.session(python=PY)
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[otel,django,ui,prometheus]", "mypy")
    session.run("mypy", "--strict", "river_protocol", "river_db", "river_sync", "river_anyio", "river_trio", "river_asyncio", "river_tools", "river_otel", "river_ui", "river_prometheus")


@nox.session(python=PY)
def bench(session: nox.Session) -> None:
    """Speed figures (printed, never asserted); the peers are compared only here."""
    session.install("-e", ".[test]", "procrastinate", "pgqueuer", "asyncpg")
    session.run("python", "-m", "benchmarks", *session.posargs)
