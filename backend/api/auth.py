"""Login/logout (cookie session + CSRF token) and API tokens for scripts."""

from __future__ import annotations

from sqlalchemy import select, update
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.deps import require_user, services
from backend.api.errors import ApiError, field, json_body
from backend.db.models import ApiToken, User
from backend.logs import get_logger
from backend.security import (
    SESSION_COOKIE,
    CookieSession,
    PasswordBusy,
    hash_password,
    new_token,
    token_hash,
)

log = get_logger(__name__)
_DUMMY_HASH = hash_password("timing-equaliser")


async def login(request: Request) -> JSONResponse:
    """Log in with a username and password; sets the session cookie.
    ---
    tags: [auth]
    requestBody: {content: {application/json: {schema: {type: object, required: [username, password],
      properties: {username: {type: string}, password: {type: string}}}}}}
    responses:
      200: {description: "{user, csrf_token}"}
      401: {description: wrong credentials}
      429: {description: too many failed attempts (per username and per client address)}
      503: {description: too many password checks at once}
    """
    svc = services(request)
    body = await json_body(request)
    username = field(body, "username", str)
    password = field(body, "password", str)
    client = request.client.host if request.client else "-"
    if not svc.login_limiter.begin(username, client):
        log.warning("login_blocked", username=username)
        raise ApiError(429, "rate_limited", "too many failed logins; wait a few minutes")
    async with svc.db.session() as db:
        user = (await db.execute(select(User).where(User.username == username))).scalar_one_or_none()
    try:
        ok = await services(request).passwords.verify(user.password_hash if user else _DUMMY_HASH, password)
    except PasswordBusy as exc:
        raise ApiError(503, "busy", "too many logins at once; retry in a moment") from exc
    if not ok or user is None:
        log.warning("login_failed", username=username)
        raise ApiError(401, "unauthenticated", "wrong username or password")
    svc.login_limiter.succeeded(username, client)
    csrf = new_token(24)
    response = JSONResponse(
        {"user": {"id": user.id, "username": user.username, "role": user.role.value}, "csrf_token": csrf}
    )
    response.set_cookie(
        SESSION_COOKIE,
        svc.session_codec.dumps(CookieSession(user.id, csrf, user.session_epoch)),
        max_age=svc.settings.session_max_age_s,
        httponly=True,
        samesite="strict",
        secure=svc.settings.cookie_secure,
        path="/",
    )
    log.info("login", user_id=user.id)
    return response


async def logout(request: Request) -> JSONResponse:
    """End the cookie session: every cookie session of the user stops working (all browsers).
    ---
    tags: [auth]
    responses: {200: {description: logged out}}
    """
    principal = await require_user(request)
    if principal.via_cookie:
        async with services(request).db.session() as db:
            await db.execute(
                update(User).where(User.id == principal.user_id).values(session_epoch=User.session_epoch + 1)
            )
    response = JSONResponse({"ok": True})
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def me(request: Request) -> JSONResponse:
    """The logged-in user and the session's CSRF token.
    ---
    tags: [auth]
    responses: {200: {description: "{user, csrf_token}"}, 401: {description: not logged in}}
    """
    principal = await require_user(request)
    return JSONResponse({"user": principal.as_dict(), "csrf_token": principal.csrf_token})


async def create_token(request: Request) -> JSONResponse:
    """Create an API token for scripts (shown once; only its hash is stored).
    ---
    tags: [auth]
    requestBody: {content: {application/json: {schema: {type: object, properties: {name: {type: string}}}}}}
    responses: {201: {description: "{token, id, name}"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    name = field(body, "name", str, required=False) or "script"
    token = new_token()
    async with services(request).db.session() as db:
        row = ApiToken(user_id=principal.user_id, name=name[:100], token_hash=token_hash(token))
        db.add(row)
        await db.flush()
        token_id = row.id
    return JSONResponse({"id": token_id, "name": name, "token": token}, status_code=201)


routes = [
    Route("/api/auth/login", login, methods=["POST"]),
    Route("/api/auth/logout", logout, methods=["POST"]),
    Route("/api/auth/me", me, methods=["GET"]),
    Route("/api/tokens", create_token, methods=["POST"]),
]
