"""Request-scoped helpers: the service container, the authenticated user, CSRF checks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request

from backend.db.models import ApiToken, Role, User, utcnow
from backend.db.session import as_utc
from backend.edge.errors import ApiError
from backend.edge.security import SESSION_COOKIE, csrf_matches, token_hash

if TYPE_CHECKING:
    from backend.services import Services

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
TOKEN_SCOPES = ("read", "write")
"""API token scopes: "read" may call safe methods only, "write" anything its user may."""
LAST_USED_STEP = timedelta(minutes=1)
"""``api_tokens.last_used_at`` is rewritten only when it is older than this: one write a minute per token."""


def services(request: Request) -> Services:
    """The process's service container (set up by the app's lifespan)."""
    return request.app.state.services


@dataclass(frozen=True)
class Principal:
    """Who is calling: the user, and how they authenticated."""

    user_id: int
    username: str
    role: Role
    via_cookie: bool
    csrf_token: str | None
    token_id: int | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    def as_dict(self) -> dict[str, object]:
        return {"id": self.user_id, "username": self.username, "role": self.role.value}


async def authenticate(request: Request) -> Principal | None:
    """The caller from a bearer API token or the signed session cookie; None when anonymous.

    A token that is unknown, revoked or expired is a 401 saying which; a read-only token on an unsafe
    method is a 403."""
    svc = services(request)
    header = request.headers.get("authorization", "")
    async with svc.db.session() as db:
        if header.lower().startswith("bearer "):
            return await _token_principal(db, header[7:].strip(), request.method)
        cookie = request.cookies.get(SESSION_COOKIE)
        session = svc.session_codec.loads(cookie) if cookie else None
        if session is None:
            return None
        user = await db.get(User, session.user_id)
        if user is None or user.session_epoch != session.epoch:  # logged out since
            return None
        return Principal(user.id, user.username, user.role, via_cookie=True, csrf_token=session.csrf_token)


async def _token_principal(db: AsyncSession, token: str, method: str) -> Principal:
    """The user of a live API token (its ``last_used_at`` refreshed in ``db``'s transaction)."""
    found = (
        await db.execute(
            select(ApiToken, User)
            .join(User, ApiToken.user_id == User.id)
            .where(ApiToken.token_hash == token_hash(token))
        )
    ).one_or_none()
    if found is None:
        raise ApiError(401, "unauthenticated", "invalid API token")
    row, user = found
    now = utcnow()
    if row.revoked_at is not None:
        raise ApiError(401, "unauthenticated", "API token revoked")
    if row.expires_at is not None and as_utc(row.expires_at) <= now:
        raise ApiError(401, "unauthenticated", "API token expired")
    if row.scope != "write" and method not in SAFE_METHODS:
        raise ApiError(403, "read_only_token", "read-only token: it may not change anything")
    if row.last_used_at is None or now - as_utc(row.last_used_at) >= LAST_USED_STEP:
        row.last_used_at = now
    return Principal(user.id, user.username, user.role, via_cookie=False, csrf_token=None, token_id=row.id)


async def api_token_principal(svc: Services, token: str, method: str = "POST") -> Principal:
    """The user of a live API token given outside an ``Authorization: Bearer`` header (the compatible
    sockets' keys); ``ApiError`` 401/403 as for a request with ``method``."""
    async with svc.db.session() as db:
        return await _token_principal(db, token, method)


async def require_user(request: Request) -> Principal:
    """The authenticated caller; 401 when anonymous, 403 on a cookie request without a valid CSRF token."""
    principal = await authenticate(request)
    if principal is None:
        raise ApiError(401, "unauthenticated", "log in first")
    if (
        principal.via_cookie
        and request.method not in SAFE_METHODS
        and not csrf_matches(principal.csrf_token or "", request.headers.get("x-csrf-token"))
    ):
        raise ApiError(403, "csrf", "missing or wrong X-CSRF-Token header")
    return principal


async def require_admin(request: Request) -> Principal:
    principal = await require_user(request)
    if not principal.is_admin:
        raise ApiError(403, "forbidden", "admins only")
    return principal


MAX_ID = 2**31 - 1
"""Largest row id: ids are 32-bit INTEGER columns (PostgreSQL rejects larger values in a query)."""


def is_id(value: object) -> bool:
    """True for an int (not a bool) that can be a row id."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID


def path_int(request: Request, name: str) -> int:
    """An integer path parameter; 404 when it is no int or beyond any row id."""
    value = request.path_params[name]
    if not is_id(value):
        raise ApiError(404, "not_found", f"{name} not found")
    return value
