"""A private PgBouncer in front of the suite's Postgres: started by a test, stopped by it.

Never the system's pgbouncer service: each ``PgBouncer`` writes its own config
(``pool_mode`` transaction or session, ``auth_type = trust``, every database
name forwarded to the suite's server by the ``*`` entry) into a temporary
directory, listens on a free loopback port with no Unix socket, and runs in the
foreground as a child process that ``stop()`` terminates.

PgBouncer refuses to run as root; as root it is started with ``-u`` and a
system user that exists (``postgres`` where Postgres is installed, else
``nobody``), which must be able to read the directory, so the directory is
handed to that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

SEARCH = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer")
START_TIMEOUT = 15.0
# The listener probe's wait (seconds; River's 2 s in production) for clients behind the
# transaction pool: there LISTEN is never read, so every client start waits the probe out.
TRANSACTION_POOL_PROBE_TIMEOUT = 0.25


class PgBouncerUnavailable(RuntimeError):
    """No pgbouncer binary, or it would not start (the message says which, with its log)."""


def pgbouncer_binary() -> str | None:
    found = shutil.which("pgbouncer")
    return found or next((p for p in SEARCH if os.access(p, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run_as() -> str | None:
    """The user to drop to with ``-u`` when we are root, else None."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PgBouncerUnavailable("running as root and neither a 'postgres' nor a 'nobody' user exists "
                               "for pgbouncer -u")


class PgBouncer:
    """One pgbouncer process in ``pool_mode`` in front of ``server_url``'s host and port."""

    def __init__(self, server_url: str, *, pool_mode: str = "transaction", pool_size: int = 20) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise PgBouncerUnavailable("pgbouncer is not installed (apt-get install -y pgbouncer)")
        parts = urlsplit(server_url)
        self.server_url = server_url
        self.pool_mode = pool_mode
        self.user = parts.username or "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix=f"river-pgbouncer-{pool_mode}-"))
        self.log = self.dir / "pgbouncer.log"
        self._server = (parts.hostname or "127.0.0.1", parts.port or 5432)
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        # The free port may be taken before pgbouncer binds it: try another, twice.
        for attempt in range(3):
            self.port = _free_port()
            try:
                self._start(binary, pool_size)
                return
            except PgBouncerUnavailable:
                self._terminate()
                if attempt == 2:
                    shutil.rmtree(self.dir, ignore_errors=True)
                    raise

    def _start(self, binary: str, pool_size: int) -> None:
        ini = self.dir / "pgbouncer.ini"
        host, port = self._server
        ini.write_text("\n".join([
            "[databases]",
            f"* = host={host} port={port}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {self.dir / 'users.txt'}",
            f"pool_mode = {self.pool_mode}",
            f"default_pool_size = {pool_size}",
            "max_client_conn = 1000",
            f"logfile = {self.log}",
            f"pidfile = {self.dir / 'pgbouncer.pid'}",
            "ignore_startup_parameters = extra_float_digits",
            # The suite drops its scratch databases WITH (FORCE): check a server after 1 s idle.
            "server_check_delay = 1",
            "",
        ]))
        command = [binary, "-q"]
        user = _run_as()
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chmod(self.dir, 0o755)
            for path in (self.dir, *self.dir.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
            command += ["-u", user]
        self._process = subprocess.Popen([*command, str(ini)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                err = (self._process.stderr.read() if self._process.stderr else b"").decode(errors="replace")
                raise PgBouncerUnavailable(f"pgbouncer exited with {self._process.returncode}: {err}"
                                           f"{self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise PgBouncerUnavailable(f"pgbouncer did not listen on port {self.port} within "
                                   f"{START_TIMEOUT}s{self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return "\n" + "\n".join(self.log.read_text().splitlines()[-10:])
        except OSError:
            return ""

    def url(self, direct_url: str) -> str:
        """``direct_url`` (any database of the same server) through this pgbouncer."""
        parts = urlsplit(direct_url)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{self.port}"))

    def _terminate(self) -> None:
        process: subprocess.Popen[bytes] | None = getattr(self, "_process", None)
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if process.stderr is not None:
            process.stderr.close()

    def stop(self) -> None:
        self._terminate()
        shutil.rmtree(self.dir, ignore_errors=True)
