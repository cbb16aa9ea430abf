"""Login/logout (cookie session + CSRF token) and API tokens for scripts."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.deps import TOKEN_SCOPES, path_int, require_user, services
from backend.api.meeting_view import clean_display_name
from backend.db.models import ApiToken, User, utcnow
from backend.db.session import as_utc
from backend.edge.errors import ApiError, field, json_body, not_found
from backend.edge.http_limits import LOGIN_ROUTE, login_locked
from backend.edge.logs import get_logger
from backend.edge.security import (
    DEVICE_COOKIE,
    SESSION_COOKIE,
    CookieSession,
    PasswordBusy,
    hash_password,
    new_token,
    token_hash,
)

log = get_logger(__name__)
_DUMMY_HASH = hash_password("timing-equaliser")
MAX_TOKEN_DAYS = 365
MAX_TOKEN_NAME_CHARS = 100


async def login(request: Request) -> JSONResponse:
    """Log in with a username and password; sets the session cookie.
    ---
    tags: [auth]
    requestBody: {content: {application/json: {schema: {type: object, required: [username, password],
      properties: {username: {type: string}, password: {type: string}}}}}}
    responses:
      200: {description: "{user, csrf_token}"}
      401: {description: wrong credentials}
      429: {description: "too many failed attempts: for the username from this address or this browser, from
        this address, or for the username from everywhere (a browser that logged in as the user before is
        not locked by the others)"}
      503: {description: too many password checks at once}
    """
    svc = services(request)
    body = await json_body(request)
    username = field(body, "username", str)
    password = field(body, "password", str)
    client = request.client.host if request.client else "-"
    device = svc.devices.device_of(request.cookies.get(DEVICE_COOKIE), username)
    limiter = svc.login_limiter
    if not limiter.begin(username, client, device):
        raise login_locked()  # logged once, when the lock began
    async with svc.db.session() as db:
        user = (await db.execute(select(User).where(User.username == username))).scalar_one_or_none()
    try:
        ok = await services(request).passwords.verify(user.password_hash if user else _DUMMY_HASH, password)
    except PasswordBusy as exc:
        raise ApiError(503, "busy", "too many logins at once; retry in a moment") from exc
    if not ok or user is None:
        log.warning("login_failed", username=username[:64], known_device=device is not None)
        if limiter.locked(username, client, device):
            log.warning("login_locked", username=username[:64], known_device=device is not None)
        raise ApiError(401, "unauthenticated", "wrong username or password")
    limiter.succeeded(username, client, device)
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
    response.set_cookie(
        DEVICE_COOKIE,
        svc.devices.dumps(username, device),
        max_age=svc.devices.max_age_s,
        httponly=True,
        samesite="strict",
        secure=svc.settings.cookie_secure,
        path=LOGIN_ROUTE,
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
    async with services(request).db.session() as db:
        user = await db.get(User, principal.user_id)
        display_name = user.display_name if user is not None else None
    user_data = principal.as_dict() | {"display_name": display_name}
    return JSONResponse({"user": user_data, "csrf_token": principal.csrf_token})


async def set_my_name(request: Request) -> JSONResponse:
    """Set the caller's own display name: how captions, the meeting view and the exports label them where
    no meeting-specific name is set (the captions page asks for it the first time they speak).
    ---
    tags: [auth]
    requestBody: {content: {application/json: {schema: {type: object, required: [display_name],
      properties: {display_name: {type: string, maxLength: 100}}}}}}
    responses: {200: {description: "{user}"}, 422: {description: "display_name invalid (errors: [{field}])"}}
    """
    principal = await require_user(request)
    body = await json_body(request)
    name = clean_display_name(field(body, "display_name", str))
    async with services(request).db.session() as db:
        user = await db.get(User, principal.user_id)
        if user is None:
            raise not_found("user")
        user.display_name = name
    log.info("display_name_set", user_id=principal.user_id)
    return JSONResponse({"user": principal.as_dict() | {"display_name": name}})


def _iso(value: datetime | None) -> str | None:
    return as_utc(value).isoformat() if value is not None else None


def token_dict(row: ApiToken, username: str) -> dict[str, Any]:
    """A token as the API shows it: never its secret nor its hash."""
    expires_at = as_utc(row.expires_at) if row.expires_at is not None else None
    return {
        "id": row.id,
        "name": row.name,
        "scope": row.scope,
        "user_id": row.user_id,
        "username": username,
        "created_at": _iso(row.created_at),
        "expires_at": _iso(expires_at),
        "last_used_at": _iso(row.last_used_at),
        "revoked": row.revoked_at is not None,
        "revoked_at": _iso(row.revoked_at),
        "expired": expires_at is not None and expires_at <= utcnow(),
    }


def _token_request(body: dict[str, Any], default_days: int) -> tuple[str, str, int]:
    """(name, scope, days) of a create-token body; 422 naming the field otherwise."""
    name = (field(body, "name", str, required=False) or "").strip() or "script"
    if len(name) > MAX_TOKEN_NAME_CHARS:
        raise ApiError(
            422,
            "invalid",
            f"name: at most {MAX_TOKEN_NAME_CHARS} characters",
            [{"field": "name", "reason": "too long"}],
        )
    scope = field(body, "scope", str, required=False) or "write"
    if scope not in TOKEN_SCOPES:
        raise ApiError(422, "invalid", "scope: read or write", [{"field": "scope", "reason": "choice"}])
    days = field(body, "expires_in_days", int, required=False)
    if days is None:
        days = default_days
    elif not 1 <= days <= MAX_TOKEN_DAYS:
        raise ApiError(
            422,
            "invalid",
            f"expires_in_days: 1-{MAX_TOKEN_DAYS}",
            [{"field": "expires_in_days", "reason": "range"}],
        )
    return name, scope, days


async def create_token(request: Request) -> JSONResponse:
    """Create an API token for scripts (shown once; only its hash is stored). It expires after
    ``expires_in_days`` (default ``CAPTIONS_API_TOKEN_TTL_DAYS``, 90); a ``read`` token may only GET.
    ---
    tags: [auth]
    requestBody: {content: {application/json: {schema: {type: object, properties: {name: {type: string,
      maxLength: 100}, scope: {type: string, enum: [read, write], default: write}, expires_in_days:
      {type: integer, minimum: 1, maximum: 365}}}}}}
    responses:
      201: {description: "{token, id, name, scope, expires_at, ...}: the secret `token` is shown only here"}
      403: {description: "asked with an API token (tokens are created from a logged-in session)"}
      422: {description: "invalid name, scope or expires_in_days (errors: [{field, reason}])"}
    """
    principal = await require_user(request)
    if not principal.via_cookie:  # a token minting tokens could keep a script alive past its expiry
        raise ApiError(403, "forbidden", "API tokens are created from a logged-in session, not with a token")
    body = await json_body(request)
    name, scope, days = _token_request(body, services(request).settings.api_token_ttl_days)
    token = new_token()
    async with services(request).db.session() as db:
        row = ApiToken(
            user_id=principal.user_id,
            name=name,
            token_hash=token_hash(token),
            scope=scope,
            created_at=utcnow(),
            expires_at=utcnow() + timedelta(days=days),
        )
        db.add(row)
        await db.flush()
        data = token_dict(row, principal.username)
    log.info("token_created", token_id=data["id"], user_id=principal.user_id, scope=scope, days=days)
    return JSONResponse({**data, "token": token}, status_code=201)


async def list_tokens(request: Request) -> JSONResponse:
    """The caller's API tokens (an admin sees every user's), revoked and expired ones included; never the
    secrets.
    ---
    tags: [auth]
    responses:
      200: {description: "{tokens: [{id, name, scope, user_id, username, created_at, expires_at,
        last_used_at, revoked, revoked_at, expired}]}"}
    """
    principal = await require_user(request)
    query = select(ApiToken, User.username).join(User, ApiToken.user_id == User.id).order_by(ApiToken.id)
    if not principal.is_admin:
        query = query.where(ApiToken.user_id == principal.user_id)
    async with services(request).db.session() as db:
        rows = (await db.execute(query)).all()
        return JSONResponse({"tokens": [token_dict(row, username) for row, username in rows]})


async def revoke_token(request: Request) -> JSONResponse:
    """Revoke an API token (its owner or an admin): it stops working at once, and the sockets opened with
    its tickets end (``error`` ``token_revoked``, close 1008). Revoking twice is harmless.
    ---
    tags: [auth]
    responses: {200: {description: "{token}"}, 404: {description: no such token of yours}}
    """
    principal = await require_user(request)
    token_id = path_int(request, "token_id")
    async with services(request).db.session() as db:
        found = (
            await db.execute(
                select(ApiToken, User.username)
                .join(User, ApiToken.user_id == User.id)
                .where(ApiToken.id == token_id)
            )
        ).one_or_none()
        if found is None or (not principal.is_admin and found[0].user_id != principal.user_id):
            raise not_found("token")
        row, username = found
        if row.revoked_at is None:
            row.revoked_at = utcnow()
            log.info("token_revoked", token_id=row.id, by_user_id=principal.user_id)
        await db.flush()
        data = token_dict(row, username)
    services(request).hub.end_for_token(token_id)  # other replicas: within CAPTIONS_TOKEN_CHECK_S
    return JSONResponse({"token": data})


routes = [
    Route("/api/auth/login", login, methods=["POST"]),
    Route("/api/auth/logout", logout, methods=["POST"]),
    Route("/api/auth/me", me, methods=["GET"]),
    Route("/api/auth/me", set_my_name, methods=["PATCH"]),
    Route("/api/tokens", list_tokens, methods=["GET"]),
    Route("/api/tokens", create_token, methods=["POST"]),
    Route("/api/tokens/{token_id:int}", revoke_token, methods=["DELETE"]),
]
