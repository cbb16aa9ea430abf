"""Limits on HTTP requests, as plain ASGI middleware: how many are handled at once, and what a request body
may weigh, per route.

uvicorn's own ``limit_concurrency`` counts open connections, WebSockets included, and answers every HTTP
request 503 beyond it, the health probes too. So it is only a backstop (``backend.server``); the app counts
HTTP requests itself (``RequestConcurrency``), never counts or refuses ``/healthz`` and ``/readyz``, and caps
WebSockets at their handshakes (``backend.sessions.admission``).

A body is refused with a typed 413 before it is buffered: at once when its declared ``Content-Length`` is
over the route's cap, and as it arrives otherwise (a chunked body is counted chunk by chunk; the read that
crosses the cap raises instead of handing the bytes on). So a request never holds more than its route's cap
in memory, whoever sends it: an anonymous 256 MB login body costs the server nothing (issue 36).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import cookie_parser

from backend.config import Settings
from backend.edge.errors import ApiError, error_response, openai_error_response
from backend.edge.ratelimit import SlidingWindow
from backend.edge.security import DEVICE_COOKIE, LoginRateLimiter

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ANONYMOUS_ROUTES = frozenset(
    {"/api/auth/login", "/api/invites/check", "/api/invites/accept", "/api/viewer-links/open"}
)
"""The routes that need no login: their bodies are a token or a username and password."""
LOGIN_ROUTE = "/api/auth/login"
RATE_LIMITED_ROUTES = frozenset({"/api/invites/check", "/api/invites/accept", "/api/viewer-links/open"})
"""The no-login routes besides the login itself (which limits its failures, ``backend.edge.security``)."""
UPLOAD_ROUTES = re.compile(r"/api/vocabularies/\d+/(?:terms|import)")
DRAFT_ROUTES = re.compile(r"/api/drafts/\d+")
RECORDING_ROUTES = re.compile(r"/v1/audio/transcriptions|/api/meetings/\d+/recordings")
"""Uploaded recordings (``backend.compat``): capped by ``max_recording_bytes``."""
OPENAI_PREFIX = "/v1/audio/"
"""The OpenAI-compatible routes answer in OpenAI's error shape (``errors.openai_error_response``)."""
PROBES = frozenset({"/healthz", "/readyz"})
"""Liveness and readiness: an orchestrator restarts a replica whose probe fails, so they never wait."""
MAX_DRAFT_CHARS = 100_000
"""Longest note kept (characters): some fifty pages of dictation; a longer one is refused, not cut
(``backend.api.drafts``)."""
MAX_DRAFT_BODY_BYTES = 4 * MAX_DRAFT_CHARS + 4096
"""Largest PUT body read (bytes): the longest note in 4-byte UTF-8 characters plus the JSON around it; a
larger body is refused while it arrives."""


def login_locked() -> ApiError:
    """The login's answer while the username or the client address is locked out."""
    return ApiError(429, "rate_limited", "too many failed logins; wait a few minutes")


@dataclass(frozen=True)
class BodyCaps:
    """The largest body each kind of route accepts, bytes."""

    default_bytes: int
    anonymous_bytes: int
    upload_bytes: int
    draft_bytes: int = MAX_DRAFT_BODY_BYTES
    recording_bytes: int = 100 * 1024 * 1024

    @classmethod
    def from_settings(cls, settings: Settings) -> BodyCaps:
        return cls(
            settings.max_body_bytes,
            settings.max_anonymous_body_bytes,
            settings.max_upload_body_bytes,
            recording_bytes=settings.max_recording_bytes,
        )

    def for_path(self, path: str) -> int:
        """The cap of the route at ``path``."""
        if path in ANONYMOUS_ROUTES:
            return self.anonymous_bytes
        if UPLOAD_ROUTES.fullmatch(path):
            return self.upload_bytes
        if DRAFT_ROUTES.fullmatch(path):
            return self.draft_bytes
        if RECORDING_ROUTES.fullmatch(path):
            return self.recording_bytes
        return self.default_bytes


def too_large(max_bytes: int) -> ApiError:
    """The typed 413 of a body over ``max_bytes``."""
    return ApiError(
        413,
        "too_large",
        f"request body over {max_bytes:,} bytes",
        [{"field": "body", "reason": "too long", "max_bytes": max_bytes}],
    )


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodyLimit:
    """Refuses a request body over its route's cap (``BodyCaps``) with 413 ``too_large``."""

    def __init__(self, app: ASGIApp, caps: BodyCaps) -> None:
        self.app = app
        self.caps = caps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.caps.for_path(scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > cap:
            render = openai_error_response if scope["path"].startswith(OPENAI_PREFIX) else error_response
            await render(too_large(cap))(scope, receive, send)  # uvicorn discards the body
            return
        received = 0

        async def capped_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    raise too_large(cap)  # rendered by the app's ApiError handler
            return message

        await self.app(scope, capped_receive, send)


class RequestConcurrency:
    """At most ``max_requests`` HTTP requests in the app at once; beyond, 503 ``busy`` with ``Retry-After``.
    The probes are never counted nor refused. ``active`` is event-loop only."""

    def __init__(self, app: ASGIApp, max_requests: int) -> None:
        self.app = app
        self.max_requests = max_requests
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PROBES:
            await self.app(scope, receive, send)
            return
        if self.active >= self.max_requests:
            busy = ApiError(503, "busy", "too many requests at once; retry in a moment")
            await error_response(busy, {"retry-after": "1"})(scope, receive, send)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1


class ClientRateLimit:
    """At most ``per_minute`` requests per client address (the TCP peer, or what a trusted proxy says) to
    ``RATE_LIMITED_ROUTES`` within a minute; beyond, 429 ``rate_limited`` with ``Retry-After``. Refused
    before anything is read or looked up, so a flood costs little."""

    def __init__(self, app: ASGIApp, per_minute: int) -> None:
        self.app = app
        self.per_minute = per_minute
        self.window = SlidingWindow(60.0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in RATE_LIMITED_ROUTES:
            client = scope["client"][0] if scope.get("client") else "-"
            now = time.monotonic()
            if self.window.recent(client, now) >= self.per_minute:
                wait_s = str(math.ceil(self.window.retry_after_s(client, now)) or 1)
                limited = ApiError(429, "rate_limited", "too many requests from your address; wait a minute")
                await error_response(limited, {"retry-after": wait_s})(scope, receive, send)
                return
            self.window.add(client, now)
        await self.app(scope, receive, send)


class LoginGate:
    """Refuses a login from a locked-out client address before anything else runs: no body is read, no
    route matched, no line logged per attempt, so a flood of refused logins costs the captions little
    (issue 36 item 6). A browser with a genuine device cookie goes on to the login, which counts it on its
    own (``backend.edge.security.LoginRateLimiter``)."""

    def __init__(self, app: ASGIApp, limiter: LoginRateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == LOGIN_ROUTE:
            client = scope["client"][0] if scope.get("client") else "-"
            if self.limiter.client_locked(client) and not self._known_device(scope):
                await error_response(login_locked())(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _known_device(scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"cookie" and DEVICE_COOKIE.encode() in value:
                cookies = cookie_parser(value.decode("latin-1"))
                devices = scope["app"].state.services.devices
                return devices.device_of(cookies.get(DEVICE_COOKIE)) is not None
        return False
