"""Who may look, and what a change request must carry.

- ``BasicAuth``: HTTP basic credentials, given or read from ``RIVER_UI_USERNAME`` /
  ``RIVER_UI_PASSWORD``; or the host app passes any callable ``(request) -> bool``
  (sync or async), e.g. its own session check.
- CSRF: a random token in a cookie (``SameSite=Strict``, ``HttpOnly``) signed with the
  app's secret; every POST form carries the same token. A POST whose form token is
  missing, unsigned or different from the cookie's is refused with 403 before anything
  runs.
- Every response carries a Content-Security-Policy allowing scripts and styles from
  the app's own origin only (no inline script, no inline style, nothing from a CDN),
  and is not to be framed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import inspect
import ipaddress
import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ENV_USERNAME = "RIVER_UI_USERNAME"
ENV_PASSWORD = "RIVER_UI_PASSWORD"
CSRF_COOKIE = "river_ui_csrf"
CSRF_FIELD = "csrf_token"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
)

AuthCallable = Callable[[Request], bool | Awaitable[bool]]


class ConfigurationError(ValueError):
    """The dashboard was configured in a way that cannot work (e.g. half of the credentials)."""


@dataclass(frozen=True)
class BasicAuth:
    """HTTP basic authentication against one username and password."""

    username: str
    password: str = ""

    def __post_init__(self) -> None:
        if not self.username or not self.password:
            raise ConfigurationError("BasicAuth needs a non-empty username and password")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> BasicAuth | None:
        """Credentials from ``RIVER_UI_USERNAME`` and ``RIVER_UI_PASSWORD``; None when neither is set."""
        env = os.environ if environ is None else environ
        username, password = env.get(ENV_USERNAME, ""), env.get(ENV_PASSWORD, "")
        if not username and not password:
            return None
        if not username or not password:
            raise ConfigurationError(f"set both {ENV_USERNAME} and {ENV_PASSWORD}, or neither")
        return cls(username, password)

    def check(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        username, sep, password = decoded.partition(":")
        # Both compared whatever the first gives, in constant time.
        ok_user = hmac.compare_digest(username.encode(), self.username.encode())
        ok_password = hmac.compare_digest(password.encode(), self.password.encode())
        return bool(sep) and ok_user and ok_password


async def is_allowed(auth: BasicAuth | AuthCallable | None, request: Request) -> bool:
    if auth is None:
        return True
    if isinstance(auth, BasicAuth):
        return auth.check(request)
    result = auth(request)
    if inspect.isawaitable(result):
        result = await result
    return bool(result)


class SecurityHeaders:
    """ASGI middleware adding ``SECURITY_HEADERS`` to every HTTP response (errors included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ---------------------------------------------------------------- CSRF


class Csrf:
    """Signed double-submit tokens: the cookie and the form field must hold the same signed token."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _sign(self, nonce: str) -> str:
        return hmac.new(self._secret, nonce.encode(), hashlib.sha256).hexdigest()[:32]

    def new_token(self) -> str:
        nonce = secrets.token_urlsafe(18)
        return f"{nonce}.{self._sign(nonce)}"

    def valid(self, token: str) -> bool:
        nonce, _, signature = token.partition(".")
        return bool(nonce) and hmac.compare_digest(signature, self._sign(nonce))

    def token_for(self, request: Request) -> str:
        """The request's cookie token when it is ours, else a new one (the response sets it)."""
        token = request.cookies.get(CSRF_COOKIE, "")
        return token if self.valid(token) else self.new_token()

    def check(self, request: Request, form: Any) -> bool:
        cookie = request.cookies.get(CSRF_COOKIE, "")
        sent = form.get(CSRF_FIELD, "")
        if not isinstance(sent, str) or not cookie or not self.valid(cookie):
            return False
        return hmac.compare_digest(cookie, sent)


# ---------------------------------------------------------------- where to listen


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): reachable from this machine only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def check_bind(host: str, auth: object, *, allow_unauthenticated_remote: bool = False) -> None:
    """Refuse to listen beyond loopback without authentication, unless that is declared deliberate."""
    if auth is None and not is_loopback(host) and not allow_unauthenticated_remote:
        raise ConfigurationError(
            f"refusing to serve the dashboard on {host} without authentication: anyone who reaches it "
            f"could retry, cancel and delete jobs. Set {ENV_USERNAME} and {ENV_PASSWORD}, bind to "
            "127.0.0.1, or pass --allow-unauthenticated-remote if that is deliberate (e.g. behind an "
            "authenticating proxy)"
        )
