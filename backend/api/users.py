"""User accounts (admins manage them): clinicians and meeting participants are members.

An admin creates a user either with an initial password or with an invite: a one-time link
(``/invite#token=...``: the token rides in the fragment, which browsers never send, so no server log holds
it) that expires; the invitee opens it and sets their own password. Only the token's SHA-256 is stored.
Until then the account has no usable password (its hash is a marker argon2 never accepts)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.deps import path_int, require_admin, services
from backend.db.models import Role, User, UserInvite, utcnow
from backend.db.session import as_utc
from backend.edge.errors import ApiError, field, json_body, not_found
from backend.edge.logs import get_logger
from backend.edge.security import PasswordBusy, new_token, token_hash

log = get_logger(__name__)
MIN_PASSWORD_CHARS = 10
MAX_PASSWORD_CHARS = 1024
"""Longest password accepted: argon2 hashes any length, but a megabyte one is only a way to burn CPU."""
MAX_DISPLAY_NAME_CHARS = 100
INVITE_DEFAULT_HOURS = 72
INVITE_MAX_HOURS = 30 * 24
"""An invite link expires after ``expires_in_hours`` (default 72, at most 30 days), or once used."""
NO_PASSWORD_PREFIX = "invited:"
"""``password_hash`` of an account whose invite is not used yet: not an argon2 hash, so no login matches."""


def user_dict(user: User, invite: UserInvite | None = None) -> dict[str, object]:
    """A user as the API shows it; ``status`` is "active" (has a password) or "invited" (not yet)."""
    invited = user.password_hash.startswith(NO_PASSWORD_PREFIX)
    data: dict[str, Any] = {
        "id": user.id,
        "username": user.username,
        "display_name": user.display_name or user.username,
        "role": user.role.value,
        "status": "invited" if invited else "active",
        "created_at": as_utc(user.created_at).isoformat() if user.created_at else None,
    }
    if invited and invite is not None:
        data["invite_expires_at"] = as_utc(invite.expires_at).isoformat()
        data["invite_expired"] = as_utc(invite.expires_at) <= utcnow()
    return data


def _invalid(name: str, message: str, reason: str = "invalid") -> ApiError:
    return ApiError(422, "invalid", f"{name}: {message}", [{"field": name, "reason": reason}])


def _username(body: dict[str, Any]) -> str:
    username = field(body, "username", str).strip()
    plain = username.replace("-", "").replace("_", "").replace(".", "")
    if not username or len(username) > 64 or not plain.isalnum():
        raise _invalid("username", "1-64 letters, digits, '.', '-', '_'")
    return username


def _display_name(body: dict[str, Any]) -> str | None:
    name = " ".join((field(body, "display_name", str, required=False) or "").split())
    if len(name) > MAX_DISPLAY_NAME_CHARS or any(not c.isprintable() for c in name):
        raise _invalid("display_name", f"at most {MAX_DISPLAY_NAME_CHARS} printable characters")
    return name or None


def _password(body: dict[str, Any]) -> str:
    password = field(body, "password", str)
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise _invalid("password", f"{MIN_PASSWORD_CHARS}-{MAX_PASSWORD_CHARS} characters", "length")
    return password


def _invite_hours(body: dict[str, Any]) -> int:
    hours = field(body, "expires_in_hours", int, required=False)
    if hours is None:
        return INVITE_DEFAULT_HOURS
    if not 1 <= hours <= INVITE_MAX_HOURS:
        raise _invalid("expires_in_hours", f"1-{INVITE_MAX_HOURS}", "range")
    return hours


async def _hash(request: Request, password: str) -> str:
    try:
        return await services(request).passwords.hash(password)
    except PasswordBusy as exc:
        raise ApiError(503, "busy", "too many password checks at once; retry in a moment") from exc


def _new_invite(user_id: int, created_by: int, hours: int) -> tuple[UserInvite, str]:
    token = new_token()
    row = UserInvite(
        user_id=user_id,
        token_hash=token_hash(token),
        created_by=created_by,
        created_at=utcnow(),
        expires_at=utcnow() + timedelta(hours=hours),
    )
    return row, token


def _invite_answer(row: UserInvite, token: str) -> dict[str, Any]:
    return {
        "token": token,
        "path": f"/invite#token={token}",
        "expires_at": as_utc(row.expires_at).isoformat(),
    }


async def list_users(request: Request) -> JSONResponse:
    """Every user account, with whether it still waits for its invite to be used.
    ---
    tags: [users]
    responses: {200: {description: "{users: [{id, username, display_name, role, status, created_at,
      invite_expires_at?, invite_expired?}]}"}}
    """
    await require_admin(request)
    async with services(request).db.session() as db:
        users = (await db.execute(select(User).order_by(User.id))).scalars().all()
        invites = (
            await db.execute(select(UserInvite).where(UserInvite.used_at.is_(None)).order_by(UserInvite.id))
        ).scalars()
        latest = {invite.user_id: invite for invite in invites}
        return JSONResponse({"users": [user_dict(u, latest.get(u.id)) for u in users]})


async def create_user(request: Request) -> JSONResponse:
    """Create a user (role admin or member) with an initial ``password``, or with ``invite: true`` a one-time
    link the admin sends; the secret link is in this answer only.
    ---
    tags: [users]
    requestBody: {content: {application/json: {schema: {type: object, required: [username], properties:
      {username: {type: string}, display_name: {type: string, maxLength: 100}, role: {type: string,
      enum: [admin, member]}, password: {type: string, minLength: 10}, invite: {type: boolean},
      expires_in_hours: {type: integer, minimum: 1, maximum: 720}}}}}}
    responses:
      201: {description: "{user, invite?: {token, path, expires_at}}"}
      409: {description: username taken}
      422: {description: "invalid field (errors: [{field, reason}]); exactly one of password or invite"}
    """
    admin = await require_admin(request)
    body = await json_body(request)
    username, display_name = _username(body), _display_name(body)
    role = field(body, "role", str, required=False) or "member"
    if role not in {r.value for r in Role}:
        raise _invalid("role", "admin or member", "choice")
    invite = field(body, "invite", bool, required=False) or False
    if invite == ("password" in body and body["password"] is not None):
        raise _invalid("password", "give an initial password or ask for an invite link (not both)", "choice")
    hours = _invite_hours(body) if invite else 0
    password_hash = NO_PASSWORD_PREFIX + new_token(12) if invite else await _hash(request, _password(body))
    try:
        async with services(request).db.session() as db:
            user = User(
                username=username, display_name=display_name, password_hash=password_hash, role=Role(role)
            )
            db.add(user)
            await db.flush()
            answer: dict[str, Any] = {}
            row = None
            if invite:
                row, token = _new_invite(user.id, admin.user_id, hours)
                db.add(row)
                await db.flush()
                answer["invite"] = _invite_answer(row, token)
            answer["user"] = user_dict(user, row)
    except IntegrityError as exc:
        raise ApiError(409, "conflict", f"username {username!r} is taken") from exc
    log.info("user_created", user_id=answer["user"]["id"], by_user_id=admin.user_id, invite=invite)
    return JSONResponse(answer, status_code=201)


async def reinvite_user(request: Request) -> JSONResponse:
    """A new invite link for a user who has not set a password yet; earlier links stop working.
    ---
    tags: [users]
    responses: {201: {description: "{user, invite: {token, path, expires_at}}"}, 404: {description: no such
      user}, 409: {description: the user already has a password}}
    """
    admin = await require_admin(request)
    body = await json_body(request) if await request.body() else {}
    hours = _invite_hours(body)
    async with services(request).db.session() as db:
        user = await db.get(User, path_int(request, "user_id"))
        if user is None:
            raise not_found("user")
        if not user.password_hash.startswith(NO_PASSWORD_PREFIX):
            raise ApiError(409, "conflict", "this user has set a password already")
        await db.execute(
            update(UserInvite)
            .where(UserInvite.user_id == user.id, UserInvite.used_at.is_(None))
            .values(used_at=utcnow())
        )
        row, token = _new_invite(user.id, admin.user_id, hours)
        db.add(row)
        await db.flush()
        answer = {"user": user_dict(user, row), "invite": _invite_answer(row, token)}
    return JSONResponse(answer, status_code=201)


async def _live_invite(request: Request, token: str) -> tuple[UserInvite, User]:
    """The unused, unexpired invite ``token`` and its user; 410 ``invite_invalid`` otherwise (one answer for
    unknown, used and expired links, so a guess learns nothing)."""
    async with services(request).db.session() as db:
        found = (
            await db.execute(
                select(UserInvite, User)
                .join(User, User.id == UserInvite.user_id)
                .where(UserInvite.token_hash == token_hash(token))
            )
        ).one_or_none()
    if found is None or found[0].used_at is not None or as_utc(found[0].expires_at) <= utcnow():
        raise ApiError(
            410, "invite_invalid", "this invite link is not valid: it was used, it expired or it is wrong"
        )
    return found[0], found[1]


async def check_invite(request: Request) -> JSONResponse:
    """Who an invite link is for (the invite page shows it before asking for a password).
    ---
    tags: [users]
    requestBody: {content: {application/json: {schema: {type: object, required: [token], properties:
      {token: {type: string}}}}}}
    responses: {200: {description: "{username, display_name, expires_at}"}, 410: {description: "invalid"}}
    """
    invite, user = await _live_invite(request, field(await json_body(request), "token", str))
    return JSONResponse(
        {
            "username": user.username,
            "display_name": user.display_name or user.username,
            "expires_at": as_utc(invite.expires_at).isoformat(),
        }
    )


async def accept_invite(request: Request) -> JSONResponse:
    """Set the invited user's password with the link's token; the link is then spent.
    ---
    tags: [users]
    requestBody: {content: {application/json: {schema: {type: object, required: [token, password],
      properties: {token: {type: string}, password: {type: string, minLength: 10}}}}}}
    responses: {200: {description: "{user}: log in with the new password"}, 410: {description: "invalid"},
      422: {description: password too short}}
    """
    body = await json_body(request)
    invite, user = await _live_invite(request, field(body, "token", str))
    password_hash = await _hash(request, _password(body))
    async with services(request).db.session() as db:
        spent = await db.execute(
            update(UserInvite)
            .where(UserInvite.id == invite.id, UserInvite.used_at.is_(None))
            .values(used_at=utcnow())
        )
        if spent.rowcount != 1:  # type: ignore[attr-defined]  # used by a concurrent request just now
            raise ApiError(410, "invite_invalid", "this invite link was used already")
        await db.execute(
            update(User)
            .where(User.id == user.id)
            .values(password_hash=password_hash, session_epoch=User.session_epoch + 1)
        )
        fresh = await db.get(User, user.id)
        data = user_dict(fresh) if fresh else {}
    log.info("invite_accepted", user_id=user.id)
    return JSONResponse({"user": data})


routes = [
    Route("/api/users", list_users, methods=["GET"]),
    Route("/api/users", create_user, methods=["POST"]),
    Route("/api/users/{user_id:int}/invite", reinvite_user, methods=["POST"]),
    Route("/api/invites/check", check_invite, methods=["POST"]),
    Route("/api/invites/accept", accept_invite, methods=["POST"]),
]
