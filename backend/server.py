"""uvicorn with a drain step: live sessions are flushed and persisted BEFORE uvicorn's own shutdown
(which would otherwise close every WebSocket with 1012 at once)."""

from __future__ import annotations

import socket

import uvicorn
from starlette.applications import Starlette

from backend.config import Settings


class DrainingServer(uvicorn.Server):
    """On SIGTERM/SIGINT: stop accepting, drain the app's live sessions, then shut down as uvicorn does."""

    def __init__(self, config: uvicorn.Config, app: Starlette) -> None:
        super().__init__(config)
        self._app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        services = getattr(self._app.state, "services", None)
        if services is not None and not services.hub.draining:
            await services.hub.drain(services.settings.drain_timeout_s)
        await super().shutdown(sockets)


def trusted_proxies(settings: Settings) -> list[str]:
    """The proxies named by ``CAPTIONS_TRUSTED_PROXIES`` (empty: headers of forwarding are ignored)."""
    return [part.strip() for part in settings.trusted_proxies.split(",") if part.strip()]


def connection_backstop(settings: Settings) -> int:
    """uvicorn's ``limit_concurrency``, a backstop only: uvicorn counts every open connection against it,
    WebSockets included, and beyond it answers every HTTP request 503 (/healthz too) while it never refuses
    an upgrade. So it holds every socket our caps admit (speaking and viewer slots), the HTTP requests they
    admit, and room for idle keep-alive connections (issue 36: 354 viewers used to starve HTTP)."""
    sockets = settings.max_sessions + settings.max_viewers
    return sockets + 4 * settings.max_http_requests + 100


def server_config(app: Starlette, settings: Settings, host: str, port: int) -> uvicorn.Config:
    """uvicorn settings required by docs/reliability.md (frame limit, no deflate, pings)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        ws="websockets",
        ws_max_size=settings.max_ws_message_bytes,
        ws_per_message_deflate=False,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        log_level=settings.log_level,
        timeout_graceful_shutdown=int(settings.drain_timeout_s) + 5,
        limit_concurrency=connection_backstop(settings),
        # Forwarded headers only from the proxies the operator named (uvicorn alone trusts 127.0.0.1).
        proxy_headers=bool(trusted_proxies(settings)),
        forwarded_allow_ips=trusted_proxies(settings) or None,
        access_log=False,
    )
