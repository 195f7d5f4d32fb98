"""The adapter as River's harness runs it: a child process spoken to in JSON-RPC lines."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]
ANSWER_TIMEOUT = 60.0


class AdapterFailed(AssertionError):
    """The adapter answered with an error (``code``, ``message``)."""

    def __init__(self, method: str, error: dict[str, Any]) -> None:
        super().__init__(f"{method}: {error}")
        self.code = error["code"]
        self.message = error["message"]


class AdapterProcess:
    """``python -m river_tools.conformance_adapter`` with the harness's environment."""

    def __init__(self, driver: str, database_url: str, application_name: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RIVER_CONFORMANCE_DRIVER": driver,
               "RIVER_CONFORMANCE_DATABASE_URL": database_url,
               "RIVER_CONFORMANCE_APPLICATION_NAME": application_name}
        self.application_name = application_name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "river_tools.conformance_adapter"], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
        )
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self._next_id = 0
        self._lock = threading.Lock()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def send_line(self, line: str) -> dict[str, Any]:
        """Write one raw line; return the decoded answer line."""
        decoded: dict[str, Any] = json.loads(self.send_raw(line))
        return decoded

    def send_raw(self, line: str) -> str:
        """Write one raw line; return the answer line as it came."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        try:
            answer = self._lines.get(timeout=ANSWER_TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no answer to {line[:200]!r}; stderr:\n{self.stderr}") from None
        if answer is None:
            raise AssertionError(f"the adapter exited; stderr:\n{self.stderr}")
        return answer

    def call_raw(self, method: str, params: Any = None) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            answer = self.send_line(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                                "params": {} if params is None else params}))
        assert answer["id"] == request_id, answer
        assert answer["jsonrpc"] == "2.0", answer
        return answer

    def call(self, method: str, params: Any = None) -> Any:
        answer = self.call_raw(method, params)
        if "error" in answer:
            raise AdapterFailed(method, answer["error"])
        return answer["result"]

    def error_code(self, method: str, params: Any = None) -> int:
        answer = self.call_raw(method, params)
        assert "error" in answer, f"{method} succeeded: {answer}"
        assert "result" not in answer
        code: int = answer["error"]["code"]
        return code

    def insert(self, *jobs: dict[str, Any], **params: Any) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = self.call("insert", {"jobs": list(jobs), **params})["results"]
        return results

    def close(self) -> int:
        """Close stdin, as the harness does, and wait for the exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(
                f"the adapter did not exit after stdin closed; stderr:\n{self.stderr}") from None


def echo(message: str, behavior: str = "", **opts: Any) -> dict[str, Any]:
    job: dict[str, Any] = {"behavior": behavior, "message": message}
    if opts:
        job["opts"] = opts
    return job


def wait_for(what: str, condition: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class ScenarioSchema:
    """A schema of its own, as the harness gives each scenario, reached through the URL's search path."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.name = "river_conformance_" + uuid.uuid4().hex[:12]
        self.conn = psycopg.connect(base_url, autocommit=True)
        self.conn.execute(f'CREATE SCHEMA "{self.name}"')
        self.conn.execute(f'SET search_path TO "{self.name}"')
        separator = "&" if "?" in base_url else "?"
        self.adapter_url = f"{base_url}{separator}options=-c%20search_path%3D{self.name}"

    def job(self, job_id: int) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT state::text, attempt, attempted_by, metadata::text, kind, queue, errors "
            "FROM river_job WHERE id = %s", (job_id,)).fetchone()
        if row is None:
            return None
        return {"state": row[0], "attempt": row[1], "attempted_by": row[2], "metadata": json.loads(row[3]),
                "kind": row[4], "queue": row[5], "errors": row[6] or []}

    def wait_job(self, job_id: int, *states: str, timeout: float = 15.0) -> dict[str, Any]:
        wanted = states or ("completed", "cancelled", "discarded")

        def reached() -> dict[str, Any] | None:
            job = self.job(job_id)
            return job if job is not None and job["state"] in wanted else None

        found: dict[str, Any] = wait_for(f"job {job_id} in {wanted}", reached, timeout)
        return found

    def insert_raw(
        self, args: str, *, metadata: str = "{}", attempt: int = 0, errors: tuple[str, ...] = ()
    ) -> int:
        """A job row written outside River (no notification), as the harness's InsertRaw does,
        in a queue nothing works; returns its id."""
        row = self.conn.execute(
            "INSERT INTO river_job (args, kind, max_attempts, metadata, queue, state, attempt, errors)"
            " VALUES (%s::jsonb, 'conformance_echo', 25, %s::jsonb, 'nowhere', 'available', %s,"
            " %s::jsonb[]) RETURNING id", (args, metadata, attempt, list(errors) or None)).fetchone()
        assert row is not None
        return int(row[0])

    def drop(self) -> None:
        self.conn.execute(f'DROP SCHEMA "{self.name}" CASCADE')
        self.conn.close()


@contextmanager
def adapter_in_schema(
    base_url: str, *, migrate: bool = True
) -> Iterator[tuple[AdapterProcess, ScenarioSchema]]:
    schema = ScenarioSchema(base_url)
    name = "river-conformance-python-" + uuid.uuid4().hex[:8]
    adapter = AdapterProcess("postgres", schema.adapter_url, name)
    try:
        if migrate:
            adapter.call("migrate")
        yield adapter, schema
    finally:
        status = adapter.close()
        schema.drop()
        assert status == 0, f"the adapter exited with {status}; stderr:\n{adapter.stderr}"
