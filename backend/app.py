"""The ASGI application: REST API, WebSocket protocol, pages, health and metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.exc import OperationalError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.schemas import SchemaGenerator
from starlette.staticfiles import StaticFiles

from backend.api import auth, drafts, live, meeting_view, meetings, privacy, transcripts, users, vocabularies
from backend.compat import openai_api, recordings
from backend.compat.deepgram_ws import listen_endpoint
from backend.config import REPO_ROOT, Settings, engine_config, get_settings
from backend.db.session import Database
from backend.edge.errors import (
    ApiError,
    api_error_handler,
    engine_unavailable_handler,
    http_error_handler,
    storage_unavailable_handler,
)
from backend.edge.http_limits import BodyCaps, BodyLimit, ClientRateLimit, LoginGate, RequestConcurrency
from backend.edge.logs import configure_logging, get_logger
from backend.edge.security import DeviceCodec, LoginRateLimiter, SessionCodec
from backend.engine.contract import CaptionEngine
from backend.meeting_view.viewer_ws import viewer_endpoint
from backend.services import EngineUnavailable, Services, ensure_admin, secret_key
from backend.sessions.dictations import SWEEP_S, sweep_idle_dictations
from backend.sessions.ladder import Rung, run_ladder
from backend.sessions.live import LiveSession
from backend.sessions.token_watch import watch_api_tokens
from backend.sessions.ws import websocket_endpoint
from biasing.terms import TermLimits

log = get_logger(__name__)
FRONTEND = REPO_ROOT / "frontend"
PAGES = {
    "/": "index.html",
    "/dictation": "dictation.html",
    "/admin": "admin.html",
    "/meeting": "meeting.html",
    "/invite": "invite.html",
    "/transcripts": "transcript.html",
}

schemas = SchemaGenerator(
    {
        "openapi": "3.0.0",
        "info": {"title": "Captions API", "version": "1"},
        "components": {
            "securitySchemes": {
                "cookie": {"type": "apiKey", "in": "cookie", "name": "captions_session"},
                "bearer": {"type": "http", "scheme": "bearer"},
            }
        },
    }
)


async def healthz(_request: Request) -> JSONResponse:
    """Liveness: the process answers.
    ---
    tags: [operations]
    responses: {200: {description: alive}}
    """
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    """Readiness: model loaded and warmed, database reachable, not draining, capacity left, not lagging.
    ---
    tags: [operations]
    responses: {200: {description: ready}, 503: {description: "not ready; checks say why"}}
    """
    svc: Services = request.app.state.services
    await svc.persist.recheck()
    checks = svc.readiness() | {"database": await svc.db.ping()}
    return JSONResponse(
        {"ready": all(checks.values()), "checks": checks}, status_code=200 if all(checks.values()) else 503
    )


async def metrics(request: Request) -> Response:
    """Prometheus metrics.
    ---
    tags: [operations]
    responses: {200: {description: Prometheus text format}}
    """
    svc: Services = request.app.state.services
    m = svc.metrics
    m.lag_s.set(svc.hub.max_lag_s())
    m.engine_ready.set(1 if svc.engine.ready else 0)
    stats = svc.engine.stats()
    m.batch_streams.set(stats.last_batch_streams)
    m.step_ms.set(stats.last_step_ms)
    m.queue_wait_ms.set(stats.queue_wait_ms)
    for outcome, count in stats.final_pass_outcomes:
        m.final_pass_finals.labels(outcome=outcome).set(count)
    m.final_pass_ms.set(stats.final_pass_last_ms)
    m.final_pass_backlog.set(stats.final_pass_backlog)
    for decoding, ms in stats.decoding_ms_per_audio_s:
        m.decoding_ms_per_audio_s.labels(decoding=decoding).set(ms)
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> Response:
    """This document.
    ---
    tags: [operations]
    responses: {200: {description: OpenAPI 3 document}}
    """
    return JSONResponse(schemas.get_schema(routes=request.app.routes))


def _page(name: str) -> Any:
    async def page(_request: Request) -> Response:
        path = FRONTEND / name
        if not path.is_file():
            raise HTTPException(404, f"{name} is missing")
        return FileResponse(path, headers={"cache-control": "no-cache"})

    page.__name__ = f"page_{Path(name).stem}"
    return page


def build_engine(settings: Settings) -> CaptionEngine:
    """The real batched decoder for ``settings.model`` (the bundled model by default)."""
    from backend.engine import Engine

    return Engine(engine_config(settings))


async def _start_engine(engine: CaptionEngine) -> None:
    try:
        await engine.start()
    except Exception:
        log.exception("engine_start_failed")  # /readyz stays 503 and says "engine": false
        raise
    log.info("engine_ready")


async def watch_load(svc: Services) -> None:
    """The degradation ladder on this replica: the engine's second pass, the gauge, the speakers' pages."""

    def changed(rung: Rung) -> None:
        svc.engine.second_pass_enabled = rung < Rung.SECOND_PASS_OFF
        svc.metrics.load_rung.set(int(rung))
        svc.metrics.load_rung_changes.labels(rung=rung.label).inc()
        log.warning("load_rung", rung=int(rung), state=rung.label, sessions=len(svc.hub.sessions))
        for session in list(svc.hub.sessions.values()):
            session.tell_load(svc.ladder.snapshot())

    def shed(session: LiveSession) -> None:
        log.warning("session_shed", session_id=session.session_id, sessions=len(svc.hub.sessions))
        session.shed()

    await run_ladder(svc.ladder, lambda: list(svc.hub.sessions.values()), changed, shed)


def create_app(settings: Settings | None = None, engine: CaptionEngine | None = None) -> Starlette:
    """The application. ``engine`` defaults to the real NeMo engine; tests may pass a double."""
    settings = settings or get_settings()

    login_limiter = LoginRateLimiter(
        settings.login_max_failures,
        settings.login_window_s,
        settings.login_max_failures_per_client,
        settings.login_max_failures_per_user,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        configure_logging(settings.log_level)
        db = Database(settings.database_url)
        await ensure_admin(settings, db)
        asr = engine if engine is not None else build_engine(settings)
        app.state.services = services = Services(
            settings=settings,
            db=db,
            engine=asr,
            session_codec=SessionCodec(secret_key(settings), settings.session_max_age_s),
            login_limiter=login_limiter,
            devices=DeviceCodec(secret_key(settings), settings.login_device_days * 86400),
            term_limits=TermLimits(max_terms=settings.max_terms_per_vocabulary),
        )
        app.state.recordings = jobs = recordings.RecordingJobs()
        # The model loads in the background: /healthz answers at once, /readyz once the engine is warm.
        services.engine_startup = asyncio.create_task(_start_engine(asr), name="engine-start")
        token_watch = asyncio.create_task(
            watch_api_tokens(db, services.hub, settings.token_check_s), name="token-watch"
        )
        dictation_sweep = asyncio.create_task(
            sweep_idle_dictations(db, services.hub, SWEEP_S), name="dictation-sweep"
        )
        ladder = asyncio.create_task(watch_load(services), name="load-ladder")
        background = [token_watch, dictation_sweep, ladder]
        if settings.retention_days is not None:  # off by default
            background.append(
                asyncio.create_task(
                    privacy.sweep_retention(services, settings.retention_days, settings.retention_check_s),
                    name="retention",
                )
            )
        log.info("service_started", host=settings.host, port=settings.port, model=settings.model)
        try:
            yield
        finally:
            for task in background:
                task.cancel()
            if not services.engine_startup.done():
                services.engine_startup.cancel()
            await asyncio.gather(services.engine_startup, *background, return_exceptions=True)
            if not app.state.services.hub.draining:
                await app.state.services.hub.drain(settings.drain_timeout_s)
            await jobs.close()
            await asr.stop()
            await db.dispose()
            services.passwords.close()

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"], include_in_schema=False),
        *auth.routes,
        *users.routes,
        *vocabularies.routes,
        *meetings.routes,
        *privacy.routes,
        *meeting_view.routes,
        *transcripts.routes,
        *drafts.routes,
        *live.routes,
        *openai_api.routes,
        *recordings.routes,
        WebSocketRoute("/ws", websocket_endpoint),
        WebSocketRoute("/ws/view", viewer_endpoint),
        WebSocketRoute("/v1/listen", listen_endpoint),
        *[Route(path, _page(name), methods=["GET"], include_in_schema=False) for path, name in PAGES.items()],
        Mount("/static", StaticFiles(directory=FRONTEND / "static", check_dir=False), name="static"),
    ]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(RequestConcurrency, max_requests=settings.max_http_requests),
            Middleware(ClientRateLimit, per_minute=settings.anonymous_requests_per_minute),
            Middleware(LoginGate, limiter=login_limiter),
            Middleware(BodyLimit, caps=BodyCaps.from_settings(settings)),
        ],
        exception_handlers={
            ApiError: api_error_handler,
            HTTPException: http_error_handler,
            EngineUnavailable: engine_unavailable_handler,
            OperationalError: storage_unavailable_handler,
        },
    )
