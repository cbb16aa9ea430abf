"""Dictation notes kept on the server (``/api/drafts``): saved, listed and restored by their owner only,
size-limited with a typed error, CSRF-checked like every write."""

from __future__ import annotations

from starlette.testclient import TestClient

from backend.api.drafts import MAX_DRAFT_CHARS
from tests.support.server import ADMIN_PASSWORD

PASSWORD = "long enough pw"


def _login(client: TestClient, username: str, password: str = PASSWORD) -> TestClient:
    """The same client (one event loop: the database pool is bound to it), now logged in as ``username``."""
    client.cookies.clear()
    login = client.post("/api/auth/login", json={"username": username, "password": password})
    assert login.status_code == 200, login.text
    client.headers["x-csrf-token"] = login.json()["csrf_token"]
    return client


def _members(admin: TestClient, *names: str) -> None:
    for name in names:
        assert admin.post("/api/users", json={"username": name, "password": PASSWORD}).status_code == 201


def _dictation(client: TestClient) -> int:
    created = client.post("/api/dictations", json={"title": "Clinic"})
    assert created.status_code == 201, created.text
    return created.json()["meeting"]["id"]


def test_a_note_is_saved_listed_restored_and_deleted_by_an_empty_text(admin: TestClient) -> None:
    _members(admin, "nurse")
    nurse = _login(admin, "nurse")
    first, second = _dictation(nurse), _dictation(nurse)
    assert nurse.get(f"/api/drafts/{first}").status_code == 404
    saved = nurse.put(f"/api/drafts/{first}", json={"text": "Seen in clinic.\n\nPlan: 600 mg."})
    assert saved.status_code == 200, saved.text
    assert saved.json()["draft"]["text"] == "Seen in clinic.\n\nPlan: 600 mg."
    assert nurse.put(f"/api/drafts/{second}", json={"text": "Second note"}).status_code == 200
    assert nurse.put(f"/api/drafts/{first}", json={"text": "Seen in clinic. Edited"}).status_code == 200

    drafts = nurse.get("/api/drafts").json()["drafts"]
    assert [d["meeting_id"] for d in drafts] == [first, second]  # the latest edit first
    assert drafts[0]["title"] == "Clinic" and drafts[0]["chars"] == len("Seen in clinic. Edited")
    assert "text" not in drafts[0]
    assert nurse.get(f"/api/drafts/{first}").json()["draft"]["text"] == "Seen in clinic. Edited"

    assert nurse.put(f"/api/drafts/{first}", json={"text": "  \n"}).json() == {"draft": None}
    assert nurse.get(f"/api/drafts/{first}").status_code == 404
    assert [d["meeting_id"] for d in nurse.get("/api/drafts").json()["drafts"]] == [second]


def test_only_the_owner_reads_or_writes_a_note(admin: TestClient) -> None:
    _members(admin, "nurse", "doctor")
    meeting = admin.post("/api/meetings", json={"title": "Not a dictation"}).json()["meeting"]["id"]
    assert admin.put(f"/api/drafts/{meeting}", json={"text": "x"}).status_code == 404
    nurse = _login(admin, "nurse")
    mine = _dictation(nurse)
    assert nurse.put(f"/api/drafts/{mine}", json={"text": "private"}).status_code == 200
    for name, password in (("doctor", PASSWORD), ("admin", ADMIN_PASSWORD)):
        other = _login(admin, name, password)
        assert other.get(f"/api/drafts/{mine}").status_code == 404
        assert other.put(f"/api/drafts/{mine}", json={"text": "overwritten"}).status_code == 404
        assert other.get("/api/drafts").json()["drafts"] == []
    nurse = _login(admin, "nurse")
    assert nurse.get(f"/api/drafts/{mine}").json()["draft"]["text"] == "private"


def test_writes_need_the_csrf_header_and_a_login(admin: TestClient) -> None:
    _members(admin, "nurse")
    nurse = _login(admin, "nurse")
    mine = _dictation(nurse)
    token = nurse.headers.pop("x-csrf-token")
    refused = nurse.put(f"/api/drafts/{mine}", json={"text": "x"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf"
    nurse.headers["x-csrf-token"] = token
    nurse.cookies.clear()
    assert nurse.get("/api/drafts").status_code == 401


def test_a_note_beyond_the_limit_is_a_typed_413_and_nothing_is_stored(admin: TestClient) -> None:
    _members(admin, "nurse")
    nurse = _login(admin, "nurse")
    mine = _dictation(nurse)
    assert nurse.put(f"/api/drafts/{mine}", json={"text": "a" * MAX_DRAFT_CHARS}).status_code == 200
    too_long = nurse.put(f"/api/drafts/{mine}", json={"text": "b" * (MAX_DRAFT_CHARS + 1)})
    assert too_long.status_code == 413
    error = too_long.json()["error"]
    assert error["code"] == "too_large" and error["errors"][0]["field"] == "text"
    huge = nurse.put(f"/api/drafts/{mine}", json={"text": "é" * (4 * MAX_DRAFT_CHARS)})
    assert huge.status_code == 413
    assert nurse.get(f"/api/drafts/{mine}").json()["draft"]["text"] == "a" * MAX_DRAFT_CHARS
    wrong = nurse.put(f"/api/drafts/{mine}", json={"text": 5})
    assert wrong.status_code == 422 and wrong.json()["error"]["errors"][0]["field"] == "text"
