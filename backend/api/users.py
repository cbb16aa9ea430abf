"""User accounts (admins manage them): clinicians and meeting participants are members."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend.api.deps import require_admin, services
from backend.api.errors import ApiError, field, json_body
from backend.db.models import Role, User
from backend.security import PasswordBusy

MIN_PASSWORD_CHARS = 10


def user_dict(user: User) -> dict[str, object]:
    return {"id": user.id, "username": user.username, "role": user.role.value}


async def list_users(request: Request) -> JSONResponse:
    """Every user account.
    ---
    tags: [users]
    responses: {200: {description: "{users: [...]}"}}
    """
    await require_admin(request)
    async with services(request).db.session() as db:
        users = (await db.execute(select(User).order_by(User.id))).scalars().all()
        return JSONResponse({"users": [user_dict(u) for u in users]})


async def create_user(request: Request) -> JSONResponse:
    """Create a user (role admin or member).
    ---
    tags: [users]
    requestBody: {content: {application/json: {schema: {type: object, required: [username, password],
      properties: {username: {type: string}, password: {type: string}, role: {type: string,
      enum: [admin, member]}}}}}}
    responses: {201: {description: "{user}"}, 409: {description: username taken}, 422: {description: invalid}}
    """
    await require_admin(request)
    body = await json_body(request)
    username = field(body, "username", str).strip()
    password = field(body, "password", str)
    role = field(body, "role", str, required=False) or "member"
    if (
        not username
        or len(username) > 64
        or not username.replace("-", "").replace("_", "").replace(".", "").isalnum()
    ):
        raise ApiError(
            422, "invalid", "username: 1-64 letters, digits, '.', '-', '_'", [{"field": "username"}]
        )
    if len(password) < MIN_PASSWORD_CHARS:
        raise ApiError(
            422, "invalid", f"password: at least {MIN_PASSWORD_CHARS} characters", [{"field": "password"}]
        )
    if role not in {r.value for r in Role}:
        raise ApiError(422, "invalid", "role: admin or member", [{"field": "role"}])
    try:
        password_hash = await services(request).passwords.hash(password)
    except PasswordBusy as exc:
        raise ApiError(503, "busy", "too many password checks at once; retry in a moment") from exc
    try:
        async with services(request).db.session() as db:
            user = User(username=username, password_hash=password_hash, role=Role(role))
            db.add(user)
            await db.flush()
            data = user_dict(user)
    except IntegrityError as exc:
        raise ApiError(409, "conflict", f"username {username!r} is taken") from exc
    return JSONResponse({"user": data}, status_code=201)


routes = [
    Route("/api/users", list_users, methods=["GET"]),
    Route("/api/users", create_user, methods=["POST"]),
]
