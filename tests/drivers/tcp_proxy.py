"""A loopback TCP proxy a test can cut and restore: a database outage without touching the server.

The Postgres server is shared with other test runs, so an outage is simulated
in front of it: ``cut()`` closes every forwarded connection (clients see their
server vanish mid-session) and stops listening (new connections are refused);
``restore()`` listens on the same port again.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._lock = threading.Lock()
        self._commands: list[tuple[str, threading.Event]] = []
        self._peers: dict[socket.socket, socket.socket] = {}
        self._listener: socket.socket | None = None
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listen()
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="tcp-proxy", daemon=True)
        self._thread.start()

    @classmethod
    def in_front_of(cls, url: str) -> tuple[TcpProxy, str]:
        """A proxy for a Postgres URL's server, and the same URL pointing at the proxy."""
        parts = urlsplit(url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 5432)
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return proxy, urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{proxy.port}"))

    # ---------------------------------------------------------------- control (test thread)

    def cut(self) -> None:
        self._command("cut")

    def restore(self) -> None:
        self._command("restore")

    def close(self) -> None:
        self._command("cut")
        self._running = False
        self._wake_w.send(b"x")
        self._thread.join(5)
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._peers) // 2

    def _command(self, name: str) -> None:
        done = threading.Event()
        with self._lock:
            self._commands.append((name, done))
        self._wake_w.send(b"x")
        if not done.wait(5):
            raise TimeoutError(f"proxy did not carry out {name!r}")

    # ---------------------------------------------------------------- the loop (proxy thread)

    def _listen(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._sel.register(listener, selectors.EVENT_READ, "accept")

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            peer = self._peers.pop(sock, None)
            if peer is not None:
                self._peers.pop(peer, None)
        for s in (sock, peer):
            if s is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(s)
            s.close()

    def _run_commands(self) -> None:
        self._wake_r.recv(4096)
        with self._lock:
            commands, self._commands = self._commands, []
        for name, done in commands:
            if name == "cut":
                if self._listener is not None:
                    self._sel.unregister(self._listener)
                    self._listener.close()
                    self._listener = None
                with self._lock:
                    socks = list(self._peers)
                for sock in socks:
                    self._drop(sock)
            elif name == "restore" and self._listener is None:
                self._listen()
            done.set()

    def _accept(self) -> None:
        if self._listener is None:  # cut earlier in the same round of events
            return
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection(self._target, timeout=5)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(True)
        with self._lock:
            self._peers[client] = upstream
            self._peers[upstream] = client
        self._sel.register(client, selectors.EVENT_READ, "pipe")
        self._sel.register(upstream, selectors.EVENT_READ, "pipe")

    def _pipe(self, sock: socket.socket) -> None:
        with self._lock:
            peer = self._peers.get(sock)
        if peer is None:
            return
        try:
            data = sock.recv(65536)
            if data:
                peer.sendall(data)
                return
        except OSError:
            pass
        self._drop(sock)

    def _loop(self) -> None:
        while self._running:
            for key, _ in self._sel.select():
                kind: Any = key.data
                if kind == "wake":
                    self._run_commands()
                elif kind == "accept":
                    self._accept()
                else:
                    self._pipe(key.fileobj)  # type: ignore[arg-type]
