"""API tokens (issue 29): they expire, their owner or an admin can revoke them, a read token only reads,
and no listing shows a secret. In process on the fake engine, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from backend.api import deps
from backend.db.models import utcnow
from tests.support.server import ADMIN_PASSWORD

PASSWORD = "long enough password"


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _log_in(client: TestClient, username: str, password: str = PASSWORD) -> None:
    response = client.post("/api/auth/login", json={"username": username, "password": password})
    assert response.status_code == 200, response.text
    client.headers["x-csrf-token"] = response.json()["csrf_token"]


def _token(client: TestClient, **body: object) -> dict[str, object]:
    response = client.post("/api/tokens", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def _member(admin: TestClient, username: str) -> None:
    created = admin.post("/api/users", json={"username": username, "password": PASSWORD})
    assert created.status_code == 201, created.text


def _shift_clock(monkeypatch: pytest.MonkeyPatch, by: timedelta) -> None:
    moved = utcnow() + by
    monkeypatch.setattr(deps, "utcnow", lambda: moved)


def test_a_token_expires_after_the_default_ttl(admin: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    created = _token(admin, name="nightly")
    assert created["scope"] == "write" and created["revoked"] is False
    secret = str(created["token"])
    _shift_clock(monkeypatch, timedelta(days=89))
    assert admin.get("/api/vocabularies", headers=_bearer(secret)).status_code == 200
    _shift_clock(monkeypatch, timedelta(days=90, seconds=1))
    expired = admin.get("/api/vocabularies", headers=_bearer(secret))
    assert expired.status_code == 401
    assert expired.json()["error"]["message"] == "API token expired"


def test_a_token_expires_after_the_days_asked_for(admin: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = str(_token(admin, name="short", expires_in_days=1)["token"])
    assert admin.get("/api/vocabularies", headers=_bearer(secret)).status_code == 200
    _shift_clock(monkeypatch, timedelta(days=1, minutes=1))
    assert admin.get("/api/vocabularies", headers=_bearer(secret)).json()["error"]["message"] == (
        "API token expired"
    )
    listed = admin.get("/api/tokens").json()["tokens"]  # the cookie session is not a token: it still works
    assert [t["name"] for t in listed] == ["short"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"expires_in_days": 0}, "expires_in_days"),
        ({"expires_in_days": 366}, "expires_in_days"),
        ({"expires_in_days": "30"}, "expires_in_days"),
        ({"expires_in_days": True}, "expires_in_days"),
        ({"scope": "admin"}, "scope"),
        ({"scope": 1}, "scope"),
        ({"name": "x" * 101}, "name"),
    ],
)
def test_bad_token_requests_are_422_naming_the_field(
    admin: TestClient, body: dict[str, object], field: str
) -> None:
    response = admin.post("/api/tokens", json=body)
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["error"]["errors"]] == [field]


def test_a_read_token_reads_but_changes_nothing(admin: TestClient) -> None:
    created = _token(admin, name="dashboard", scope="read", expires_in_days=7)
    assert created["scope"] == "read"
    read = _bearer(str(created["token"]))
    vocabulary = admin.post("/api/vocabularies", json={"name": "Ward"}).json()["vocabulary"]
    admin.cookies.clear()
    admin.headers.pop("x-csrf-token")
    assert admin.get("/api/vocabularies", headers=read).status_code == 200
    assert admin.get(f"/api/vocabularies/{vocabulary['id']}", headers=read).status_code == 200
    refused = [
        admin.post("/api/vocabularies", json={"name": "Nope"}, headers=read),
        admin.delete(f"/api/vocabularies/{vocabulary['id']}", headers=read),
        admin.patch(f"/api/vocabularies/{vocabulary['id']}", json={"name": "Renamed"}, headers=read),
        admin.post("/api/tokens", json={"name": "escalate"}, headers=read),
        admin.delete(f"/api/tokens/{created['id']}", headers=read),
    ]
    for response in refused:
        assert response.status_code == 403, response.text
        assert response.json()["error"]["message"].startswith("read-only token")
    _log_in(admin, "admin", ADMIN_PASSWORD)
    names = [v["name"] for v in admin.get("/api/vocabularies").json()["vocabularies"]]
    assert names == ["Ward"]
    assert admin.get("/api/tokens").json()["tokens"][0]["revoked"] is False


def test_owner_and_admin_revoke_but_another_member_gets_404(admin: TestClient) -> None:
    admin_token = str(_token(admin, name="admin script")["token"])
    _member(admin, "nurse")
    _member(admin, "porter")
    _log_in(admin, "nurse")
    first = _token(admin, name="nurse one")
    second = _token(admin, name="nurse two")
    _log_in(admin, "porter")
    porter = str(_token(admin, name="porter script")["token"])
    admin.cookies.clear()
    admin.headers.pop("x-csrf-token")

    assert admin.delete(f"/api/tokens/{first['id']}", headers=_bearer(porter)).status_code == 404
    assert admin.delete("/api/tokens/999999", headers=_bearer(porter)).status_code == 404
    assert admin.delete(f"/api/tokens/{2**31}", headers=_bearer(porter)).status_code == 404
    assert admin.get("/api/vocabularies", headers=_bearer(str(first["token"]))).status_code == 200

    by_owner = admin.delete(f"/api/tokens/{second['id']}", headers=_bearer(str(first["token"])))
    assert by_owner.status_code == 200 and by_owner.json()["token"]["revoked"] is True
    gone = admin.get("/api/vocabularies", headers=_bearer(str(second["token"])))
    assert gone.status_code == 401 and gone.json()["error"]["message"] == "API token revoked"

    by_admin = admin.delete(f"/api/tokens/{first['id']}", headers=_bearer(admin_token))
    assert by_admin.status_code == 200 and by_admin.json()["token"]["username"] == "nurse"
    gone = admin.get("/api/vocabularies", headers=_bearer(str(first["token"])))
    assert gone.status_code == 401 and gone.json()["error"]["message"] == "API token revoked"
    again = admin.delete(f"/api/tokens/{first['id']}", headers=_bearer(admin_token))
    assert (
        again.status_code == 200
        and again.json()["token"]["revoked_at"] == by_admin.json()["token"]["revoked_at"]
    )
    assert admin.get("/api/vocabularies", headers=_bearer(porter)).status_code == 200


def test_listings_show_own_tokens_or_all_for_an_admin_and_never_a_secret(admin: TestClient) -> None:
    admin_created = _token(admin, name="admin script", scope="read", expires_in_days=30)
    _member(admin, "nurse")
    _log_in(admin, "nurse")
    nurse_created = _token(admin, name="nurse script")
    secrets = {str(admin_created["token"]), str(nurse_created["token"])}
    admin.cookies.clear()
    admin.headers.pop("x-csrf-token")

    mine = admin.get("/api/tokens", headers=_bearer(str(nurse_created["token"])))
    assert [(t["name"], t["username"]) for t in mine.json()["tokens"]] == [("nurse script", "nurse")]
    everyone = admin.get("/api/tokens", headers=_bearer(str(admin_created["token"])))
    tokens = everyone.json()["tokens"]
    assert [(t["name"], t["username"], t["scope"]) for t in tokens] == [
        ("admin script", "admin", "read"),
        ("nurse script", "nurse", "write"),
    ]
    keys = {
        "id",
        "name",
        "scope",
        "user_id",
        "username",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked",
        "revoked_at",
        "expired",
    }
    assert all(set(t) == keys for t in tokens)
    assert not any(secret in everyone.text or secret in mine.text for secret in secrets)
    assert tokens[0]["last_used_at"] is not None and tokens[1]["last_used_at"] is not None  # both called
    assert tokens[0]["expires_at"] > tokens[0]["created_at"]


def test_last_use_is_written_at_most_once_a_minute(
    admin: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = _bearer(str(_token(admin, name="poller")["token"]))
    assert admin.get("/api/tokens").json()["tokens"][0]["last_used_at"] is None
    admin.get("/api/vocabularies", headers=secret)
    first = admin.get("/api/tokens").json()["tokens"][0]["last_used_at"]
    admin.get("/api/vocabularies", headers=secret)
    assert admin.get("/api/tokens").json()["tokens"][0]["last_used_at"] == first
    _shift_clock(monkeypatch, timedelta(minutes=2))
    admin.get("/api/vocabularies", headers=secret)
    assert admin.get("/api/tokens").json()["tokens"][0]["last_used_at"] > first


def test_a_token_cannot_create_tokens(admin: TestClient) -> None:
    """Otherwise a script could keep itself alive past its expiry; tokens come from a logged-in session."""
    created = admin.post("/api/tokens", json={"name": "script"}).json()
    bearer = {"authorization": f"Bearer {created['token']}"}
    refused = admin.post("/api/tokens", json={"name": "renewed"}, headers=bearer)
    assert refused.status_code == 403 and "logged-in session" in refused.json()["error"]["message"]
    assert [t["name"] for t in admin.get("/api/tokens").json()["tokens"]] == ["script"]
