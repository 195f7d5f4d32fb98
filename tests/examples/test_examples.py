"""Every example runs to completion on the embedded SQLite default and on Postgres.

Examples are run as their users run them: ``python examples/<name>.py [URL]``
in a subprocess, and their output is checked for what each one demonstrates.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from river_tools import demo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TIMEOUT = 60  # seconds; each example finishes in a few

# What each example must print (in order), whatever the database.
EXPECTED: dict[str, list[str | frozenset[str]]] = {
    "basic_worker": ["sorted strings: ['bear', 'tiger', 'whale']", "job 1 is completed"],
    "graceful_shutdown": [
        "sending SIGTERM: soft stop", "quick job 1 finished during the soft stop",
        "sending SIGTERM again: hard stop", "endless job 2 cancelled by the hard stop",
        "client stopped (hard stop)", "job 1 (quick): completed, attempt 1",
        "job 2 (endless): available, attempt 0",
    ],
    "cancellation": ["(cause: remote_cancel)", "job 1 is cancelled: JobCancelError: job cancelled remotely"],
    "transactions": ["order 1 committed", "order 2 rolled back: payment declined",
                     "orders: [1]; receipt jobs for orders: [1]"],
    "unique_jobs": [
        "account 1: inserted job 1 (skipped: False)", "account 1 again: job 1 (skipped: True)",
        # Postgres spends a sequence value on the skipped insert: later ids differ by database.
        "account 2: inserted job", "(skipped: False)", "rebuild in search: job", "(skipped: False)",
        "rebuild in archive: job", "(skipped: False)", "rebuild in search: job", "(skipped: True)",
        "rows in the database: 4",
    ],
    "periodic_jobs": ["this client is the leader", "heartbeat job 1 (periodic job 'heartbeat')",
                      "heartbeat job 3"],
    "events": [
        frozenset({
            "job_completed: job 1 resize_image -> completed",
            "job_failed: job 2 resize_image -> discarded error: ValueError: cannot resize dance.gif",
            "job_snoozed: job 3 resize_image -> available",
        }),
        "job_completed: job 3 resize_image -> completed",
        "queue_paused: queue default", "queue_resumed: queue default", "events dropped: 0",
    ],
    "mixed_deployment": [
        "follower (leader election off):", "python: scored lead 1",
        "job 1 score_lead      queue python   completed", "job 2 send_invoice    queue default  available",
        "job 3 send_invoice    queue python   available",
        "leader: enqueued nightly_rollup into queue default for the Go service",
        "nightly_rollup  queue default  available",
    ],
}
SQLITE_ONLY = {
    "sqlite": ["job 1 completed: output {'thumbnail': 'thumbs/1.jpg'}", "journal mode: wal",
               '1 thumbnail completed {"photo_id":1}'],
    "custom_schema": ["custom_schema: skipped: schemas need Postgres"],
}
POSTGRES_ONLY = {
    "sqlite": ["sqlite: skipped"],
    "custom_schema": ["invoiced customer 7 (job 1 in schema billing_river)",
                      "river_job tables in schemas: ['billing_river']"],
}

# River's OpenTelemetry middleware: each request's trace runs through the insert into the job.
EXPECTED["otel_tracing"] = [
    "job 1 carries river_py:otel: traceparent 00-", "job 2 carries river_py:otel: traceparent 00-",
    # Success leaves a span's status unset (OpenTelemetry's rule for instrumentation libraries).
    "POST /orders/1 [internal, UNSET]", "insert default [producer, UNSET]",
    "work charge_card [consumer, UNSET] outcome=completed", "call the payment provider [internal, UNSET]",
    "POST /orders/2 [internal, UNSET]", "insert default [producer, UNSET]",
    "work charge_card [consumer, ERROR] outcome=cancel", "call the payment provider [internal, ERROR]",
    "river.insert.count kind=charge_card outcome=inserted: 2",
    "river.work.count kind=charge_card outcome=cancel: 1",
    "river.work.count kind=charge_card outcome=completed: 1",
]

# The trio client: the timeout cancels the job's scope; the soft stop waits for a running job.
EXPECTED["trio_worker"] = [
    "page huge: cancelled by its 1 s timeout", "stopping the client (soft stop) while the digest job runs",
    "digest of 3 pages built (the soft stop waited for it)", "client stopped cleanly",
    "job 1 fetch home: completed", "job 2 fetch about: completed",
    "job 3 fetch huge: discarded (context deadline exceeded)",
]


def run_example(name: str, *args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "RIVER_DATABASE_URL"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def assert_in_order(output: str, expected: list[str | frozenset[str]]) -> None:
    """Each text after the previous one; a frozenset's texts all come next, in any order
    (jobs that run concurrently finish in any order)."""
    position = 0
    for item in expected:
        group = sorted(item) if isinstance(item, frozenset) else [item]
        ends = []
        for text in group:
            found = output.find(text, position)
            assert found >= 0, f"expected {text!r} after position {position} in:\n{output}"
            ends.append(found + len(text))
        position = max(ends)


def test_every_example_is_covered() -> None:
    names = {p.stem for p in EXAMPLES.glob("*.py")}
    assert names == set(EXPECTED) | set(SQLITE_ONLY)


@pytest.mark.parametrize("name", sorted({**EXPECTED, **SQLITE_ONLY}))
def test_example_on_the_sqlite_default(name: str, tmp_path: Path) -> None:
    output = run_example(name, cwd=tmp_path)
    assert_in_order(output, EXPECTED.get(name) or SQLITE_ONLY[name])
    assert list(tmp_path.iterdir()) == []  # the default database lives in a temporary directory


@pytest.mark.parametrize("name", sorted({**EXPECTED, **POSTGRES_ONLY}))
def test_example_on_postgres(name: str, scratch_pg_url: str, tmp_path: Path) -> None:
    output = run_example(name, scratch_pg_url, cwd=tmp_path)
    assert_in_order(output, EXPECTED.get(name) or POSTGRES_ONLY[name])


def test_example_reads_the_url_from_the_environment(tmp_path: Path) -> None:
    db = tmp_path / "from-env.sqlite3"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "basic_worker.py")],
        cwd=tmp_path, env={**os.environ, "RIVER_DATABASE_URL": f"sqlite://{db}"},
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert db.exists()


# ---------------------------------------------------------------- the README demo


# The periodic job's id depends on when the leader is elected: the table is checked line by line.
DEMO_SECTIONS = [
    "inserting jobs:", "skipped as a duplicate of job", "what happened:", "all jobs ended as expected",
]
DEMO_LINES = [
    "say_hello       completed  1/25      -",
    "upload_report   completed  2/25      attempt 1: ConnectionError: storage service unavailable",
    "ship_order      completed  1/25      -",
    "snoozed 1 time(s), no attempt used",
    "charge_card     cancelled  1/25      attempt 1: JobCancelError: card expired",
    "send_welcome    completed  1/25      -",
    "nightly_digest  completed  1/25      -",
    "inserted by the leader for periodic job 'nightly_digest'",
]


def assert_demo_output(output: str) -> None:
    assert_in_order(output, DEMO_SECTIONS)
    report = output[output.index("what happened:"):]
    for line in DEMO_LINES:
        assert line in report, f"{line!r} missing from:\n{report}"
    assert "<-- expected" not in report


def test_demo_module_on_its_default_sqlite_file(tmp_path: Path) -> None:
    (tmp_path / demo.DEFAULT_DATABASE).write_text("left over from an earlier run")
    env = {k: v for k, v in os.environ.items() if k != "RIVER_DATABASE_URL"}
    proc = subprocess.run([sys.executable, "-m", "river_tools.demo"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_demo_output(proc.stdout)
    assert (tmp_path / demo.DEFAULT_DATABASE).stat().st_size > 1000  # recreated as a real database


def test_demo_main_on_postgres_runs_again_on_the_same_database(
    scratch_pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The second run finds the first one's jobs (its unique job, its periodic job) and works its own.
    for _ in range(2):
        assert demo.main(["--database-url", scratch_pg_url]) == 0
        output = capsys.readouterr().out
        assert output.startswith(f"database: {scratch_pg_url} (")
        assert_demo_output(output)
        report = output[output.index("what happened:"):]
        assert report.count("  nightly_digest  ") == 1 and report.count("  send_welcome  ") == 1


def test_demo_failure_names_each_unfinished_job_and_why() -> None:
    from datetime import UTC, datetime

    from river_protocol.job import AttemptError, JobRow
    from river_protocol.states import JobState

    done = JobRow(id=3, kind="say_hello", encoded_args=b"{}", state=JobState.COMPLETED, attempt=1)
    stuck = JobRow(id=4, kind="upload_report", encoded_args=b"{}", state=JobState.RETRYABLE, attempt=1,
                   errors=(AttemptError(at=datetime.now(UTC), attempt=1, error="ConnectionError: down"),))
    message = demo.unfinished_message([done, stuck], {3, 4, 5})
    assert message.splitlines() == [
        f"demo: jobs still unfinished after {demo.DEADLINE_SECONDS:g} s:",
        "  job 4 upload_report is retryable (attempt 1/25; last error: ConnectionError: down)",
        "  jobs [5] are gone from the database (deleted by another process?)",
        "  the periodic job nightly_digest was never inserted: this client was not elected leader "
        "(is another client leading on this database?)",
    ]


def test_demo_report_flags_an_unexpected_state() -> None:
    from river_protocol.job import JobRow
    from river_protocol.states import JobState

    out = io.StringIO()
    row = JobRow(id=1, kind="say_hello", encoded_args=b"{}", state=JobState.DISCARDED, attempt=25)
    expected = [demo.Expectation(1, "completes", JobState.COMPLETED)]
    assert demo.report([row], expected, demo.Console(out)) is False
    assert "<-- expected completed" in out.getvalue()
