"""Admins create users with a password or an invite link (item 6): the link is one-time, expires, is stored
hashed, and lets the invitee set a password; nobody can log in to an invited account before that."""

from __future__ import annotations

import asyncio
import hashlib
import threading

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.testclient import TestClient

from backend.config import Settings
from tests.support.server import ADMIN_PASSWORD

PASSWORD = "long enough pw"


def _sql(database_url: str, statement: str) -> list[tuple]:
    """Run ``statement`` on the test database in its own thread and loop; the rows it returns."""

    async def run() -> list[tuple]:
        engine = create_async_engine(database_url)
        async with engine.begin() as connection:
            result = await connection.execute(text(statement))
            rows = [tuple(r) for r in result] if result.returns_rows else []
        await engine.dispose()
        return rows

    out: list[list[tuple]] = []
    worker = threading.Thread(target=lambda: out.append(asyncio.run(run())))
    worker.start()
    worker.join()
    return out[0]


def _login(client: TestClient, username: str, password: str) -> int:
    client.cookies.clear()
    return client.post("/api/auth/login", json={"username": username, "password": password}).status_code


def test_create_with_a_password_and_list(admin: TestClient) -> None:
    body = {"username": "nurse", "display_name": "  Nurse   Ana ", "role": "member", "password": PASSWORD}
    created = admin.post("/api/users", json=body)
    assert created.status_code == 201, created.text
    user = created.json()["user"]
    assert (user["username"], user["display_name"], user["role"], user["status"]) == (
        "nurse",
        "Nurse Ana",
        "member",
        "active",
    )
    assert "invite" not in created.json()
    listed = {u["username"]: u for u in admin.get("/api/users").json()["users"]}
    assert listed["admin"]["display_name"] == "admin" and listed["nurse"]["status"] == "active"
    assert _login(admin, "nurse", PASSWORD) == 200


def test_invite_link_sets_the_password_once(admin: TestClient, settings: Settings) -> None:
    created = admin.post(
        "/api/users", json={"username": "doctor", "display_name": "Dr Okafor", "invite": True}
    )
    assert created.status_code == 201, created.text
    invite = created.json()["invite"]
    token = invite["token"]
    assert invite["path"] == f"/invite#token={token}" and len(token) >= 40
    assert created.json()["user"]["status"] == "invited"
    stored = _sql(settings.database_url, "SELECT token_hash FROM user_invites")
    assert stored == [(hashlib.sha256(token.encode()).hexdigest(),)]

    assert _login(admin, "doctor", "") == 401 and _login(admin, "doctor", "invited:") == 401
    checked = admin.post("/api/invites/check", json={"token": token})
    assert checked.status_code == 200 and checked.json()["display_name"] == "Dr Okafor"
    short = admin.post("/api/invites/accept", json={"token": token, "password": "short"})
    assert short.status_code == 422 and short.json()["error"]["errors"][0]["field"] == "password"
    accepted = admin.post("/api/invites/accept", json={"token": token, "password": PASSWORD})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["user"]["status"] == "active"
    again = admin.post("/api/invites/accept", json={"token": token, "password": "another long pw"})
    assert again.status_code == 410 and again.json()["error"]["code"] == "invite_invalid"
    assert admin.post("/api/invites/check", json={"token": token}).status_code == 410
    assert _login(admin, "doctor", PASSWORD) == 200
    assert _login(admin, "doctor", "another long pw") == 401


def test_expired_wrong_and_replaced_links_are_refused(admin: TestClient, settings: Settings) -> None:
    first = admin.post("/api/users", json={"username": "gp", "invite": True, "expires_in_hours": 1}).json()
    user_id = first["user"]["id"]
    second = admin.post(f"/api/users/{user_id}/invite", json={})
    assert second.status_code == 201
    old, new = first["invite"]["token"], second.json()["invite"]["token"]
    assert admin.post("/api/invites/check", json={"token": old}).status_code == 410  # replaced
    assert admin.post("/api/invites/check", json={"token": new + "x"}).status_code == 410  # wrong
    _sql(settings.database_url, "UPDATE user_invites SET expires_at = '2020-01-01 00:00:00+00:00'")
    expired = admin.post("/api/invites/accept", json={"token": new, "password": PASSWORD})
    assert expired.status_code == 410
    listed = {u["username"]: u for u in admin.get("/api/users").json()["users"]}
    assert listed["gp"]["status"] == "invited" and listed["gp"]["invite_expired"] is True


def test_create_user_rejects_bad_requests_with_the_field(admin: TestClient) -> None:
    cases = [
        ({"username": "a", "password": PASSWORD, "invite": True}, "password"),
        ({"username": "a"}, "password"),
        ({"username": "a", "invite": True, "expires_in_hours": 0}, "expires_in_hours"),
        ({"username": "a", "password": PASSWORD, "display_name": "x" * 101}, "display_name"),
        ({"username": "a b", "password": PASSWORD}, "username"),
        ({"username": "a", "password": PASSWORD, "role": "owner"}, "role"),
    ]
    for body, name in cases:
        answer = admin.post("/api/users", json=body)
        assert answer.status_code == 422, body
        assert answer.json()["error"]["errors"][0]["field"] == name, body
    assert admin.post("/api/users", json={"username": "admin", "invite": True}).status_code == 409
    active = admin.get("/api/users").json()["users"][0]["id"]
    assert admin.post(f"/api/users/{active}/invite", json={}).status_code == 409  # has a password already


def test_only_admins_manage_users_and_writes_need_csrf(admin: TestClient) -> None:
    assert admin.post("/api/users", json={"username": "nurse", "password": PASSWORD}).status_code == 201
    csrf = admin.headers.pop("x-csrf-token")
    assert admin.post("/api/users", json={"username": "x", "invite": True}).status_code == 403
    admin.headers["x-csrf-token"] = csrf
    assert _login(admin, "nurse", PASSWORD) == 200
    refused = admin.get("/api/users")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert _login(admin, "admin", ADMIN_PASSWORD) == 200
