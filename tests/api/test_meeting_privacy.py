"""Meetings only their members see (issue 46): the rule table of ``backend.api.access`` row by row, every
route that returns or changes meeting content asked as each role (organiser, member, non-member, admin,
read-only token, no login), the access audit, deletion leaving no row of the meeting in any table (SQLite
and PostgreSQL), retention on a schedule, and deleting a user."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from backend.api.access import Action, Standing, decide
from backend.app import create_app
from backend.config import Settings
from backend.db.migrate import upgrade
from backend.db.models import Base, Meeting, MeetingStatus, ViewerLink, utcnow
from backend.db.session import Database
from tests.meeting_view.test_feed_and_timeline import _as, _seed_two_speakers
from tests.support.fake_engine import FakeEngine
from tests.support.server import ADMIN_PASSWORD, make_settings

PASSWORD = "long enough pw"
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


# ----- the table ----------------------------------------------------------------------------------------
ORGANISER = Standing(organiser=True, member=False, organisation=False, admin=False)
MEMBER = Standing(organiser=False, member=True, organisation=False, admin=False)
COLLEAGUE = Standing(organiser=False, member=False, organisation=True, admin=False)  # organisation-wide
OUTSIDER = Standing(organiser=False, member=False, organisation=False, admin=False)
ADMIN = Standing(organiser=False, member=False, organisation=False, admin=True)
ADMIN_MEMBER = Standing(organiser=False, member=True, organisation=False, admin=True)

TABLE = {  # action: (organiser, member, colleague, outsider, admin, admin who is a member)
    Action.SEE: ("ok", "ok", "ok", 404, "ok", "ok"),
    Action.READ: ("ok", "ok", "ok", 404, "admin", "ok"),
    Action.EXPORT: ("ok", "ok", "ok", 404, "admin", "ok"),
    Action.OPEN: ("ok", "ok", "ok", 404, "admin", "ok"),
    Action.EDIT: ("ok", 403, 403, 404, "admin", "ok"),
    Action.MANAGE: ("ok", 403, 403, 404, "ok", "ok"),
    Action.NOTE: ("ok", 404, 404, 404, 404, 404),
}


@pytest.mark.parametrize("action", list(TABLE))
def test_the_rule_table_row_by_row(action: Action) -> None:
    standings = (ORGANISER, MEMBER, COLLEAGUE, OUTSIDER, ADMIN, ADMIN_MEMBER)
    for standing, expected in zip(standings, TABLE[action], strict=True):
        verdict = decide(standing, action, admins_read_content=True)
        got: Any = verdict.status or ("admin" if verdict.admin_access else "ok")
        assert got == expected, (action, standing)
        refused = decide(standing, action, admins_read_content=False)
        if expected == "admin":
            assert (refused.status, refused.code) == (403, "admin_read_refused")
        else:
            assert refused == verdict


# ----- every route, every role --------------------------------------------------------------------------
def _user(admin: TestClient, username: str) -> int:
    created = admin.post("/api/users", json={"username": username, "password": PASSWORD})
    assert created.status_code == 201, created.text
    return created.json()["user"]["id"]


def _setup(admin: TestClient, settings: Settings) -> dict[str, Any]:
    """alice organises a meeting in which she and bob spoke; carol is a member of nothing."""
    ids = {name: _user(admin, name) for name in ("alice", "bob", "carol")}
    _as(admin, "alice", PASSWORD)
    meeting_id = admin.post("/api/meetings", json={"title": "Ward round"}).json()["meeting"]["id"]
    _seed_two_speakers(settings, meeting_id, ids["alice"], ids["bob"])
    line_id = admin.get(f"/api/meetings/{meeting_id}/transcript").json()["lines"][0]["id"]
    assert admin.post(f"/api/meetings/{meeting_id}/start").status_code == 200
    return {"meeting_id": meeting_id, "line_id": line_id, **ids}


def _routes(m: int, line: int, bob: int) -> list[tuple[str, str, dict[str, Any] | None, str]]:
    """(method, path, body, kind) of every route that returns or changes a meeting's content."""
    base = f"/api/meetings/{m}"
    return [
        ("GET", base, None, "see"),
        ("GET", f"{base}/members", None, "see"),
        ("GET", f"{base}/transcript", None, "read"),
        ("GET", f"{base}/captions?format=json", None, "read"),
        ("GET", f"{base}/captions?format=vtt", None, "read"),
        ("GET", f"{base}/captions/{line}/history", None, "read"),
        ("GET", f"{base}/participants", None, "read"),
        ("POST", f"{base}/ticket", None, "open"),
        ("PUT", f"{base}/captions/{line}", {"text": "corrected"}, "edit"),
        ("PUT", f"{base}/speakers/{bob}/merge", {"into_user_id": None}, "edit"),
        ("PATCH", base, {"title": "Ward round"}, "manage"),
        ("POST", f"{base}/viewer-links", {"label": "Guests"}, "manage"),
        ("GET", f"{base}/viewer-links", None, "manage"),
        ("GET", f"{base}/audit", None, "manage"),
        ("POST", f"{base}/members", {"username": "bob"}, "manage"),
    ]


EXPECTED = {  # kind: status for (organiser, member, non-member, admin, read-only token of the member)
    "see": (200, 200, 404, 200, 200),
    "read": (200, 200, 404, 200, 200),
    "open": (200, 200, 404, 200, 403),
    "edit": (200, 403, 404, 200, 403),
    "manage": (200, 403, 404, 200, 403),
}


def _ask(client: TestClient, method: str, path: str, body: Any, token: str | None = None) -> int:
    headers = {"authorization": f"Bearer {token}"} if token else None
    return client.request(method, path, json=body, headers=headers).status_code


def _statuses(client: TestClient, who: str, routes: list[Any], token: str | None = None) -> dict[str, int]:
    if token is None:
        _as(client, who, ADMIN_PASSWORD if who == "admin" else PASSWORD)
    return {f"{method} {path}": _ask(client, method, path, body, token) for method, path, body, _ in routes}


@SQLITE_ONLY
def test_every_content_route_answers_each_role_as_the_table_says(
    admin: TestClient, settings: Settings
) -> None:
    s = _setup(admin, settings)
    routes = _routes(s["meeting_id"], s["line_id"], s["bob"])
    _as(admin, "bob", PASSWORD)
    token = admin.post("/api/tokens", json={"scope": "read"}).json()["token"]
    got = {
        "organiser": _statuses(admin, "alice", routes),
        "member": _statuses(admin, "bob", routes),
        "non-member": _statuses(admin, "carol", routes),
        "admin": _statuses(admin, "admin", routes),
    }
    admin.cookies.clear()
    got["read token"] = _statuses(admin, "", routes, token)
    for column, role in enumerate(got):
        for method, path, _body, kind in routes:
            want = EXPECTED[kind][column]
            if (method, kind) == ("POST", "manage") and want == 200:
                want = 201
            assert got[role][f"{method} {path}"] == want, (role, method, path)
    # no login at all: 401 everywhere (a guest's link opens only the view: test_privacy_on_a_real_server)
    assert {_ask(admin, m, p, b) for m, p, b, _ in routes} == {401}


@SQLITE_ONLY
def test_lists_search_and_drafts_show_nothing_of_meetings_one_is_not_in(
    admin: TestClient, settings: Settings
) -> None:
    s = _setup(admin, settings)
    m = s["meeting_id"]
    for who, sees in (("alice", True), ("bob", True), ("carol", False), ("admin", False)):
        _as(admin, who, ADMIN_PASSWORD if who == "admin" else PASSWORD)
        hits = admin.get("/api/search", params={"q": "alpha"}).json()["hits"]
        assert bool(hits) is sees, who  # an admin searches only meetings they belong to: no silent reads
        listed = [t["id"] for t in admin.get("/api/transcripts?kind=meeting").json()["transcripts"]]
        assert (m in listed) is sees, who
        meetings = [x["id"] for x in admin.get("/api/meetings").json()["meetings"]]
        assert (m in meetings) is (sees or who == "admin"), who  # admins list every meeting to manage it
    # visible to the organisation: carol reads it, finds it, may open it
    _as(admin, "alice", PASSWORD)
    assert admin.patch(f"/api/meetings/{m}", json={"visibility": "organisation"}).status_code == 200
    _as(admin, "carol", PASSWORD)
    assert admin.get(f"/api/meetings/{m}/transcript").status_code == 200
    assert admin.get("/api/search", params={"q": "alpha"}).json()["hits"]
    assert admin.patch(f"/api/meetings/{m}", json={"visibility": "private"}).status_code == 403
    # a dictation's note is its owner's alone, an admin included
    _as(admin, "bob", PASSWORD)
    dictation = admin.post("/api/dictations", json={}).json()["meeting"]["id"]
    assert admin.put(f"/api/drafts/{dictation}", json={"text": "note"}).status_code == 200
    for who in ("carol", "admin"):
        _as(admin, who, ADMIN_PASSWORD if who == "admin" else PASSWORD)
        assert admin.get(f"/api/drafts/{dictation}").status_code == 404
        assert admin.put(f"/api/drafts/{dictation}", json={"text": "x"}).status_code == 404


@SQLITE_ONLY
def test_members_are_added_by_name_and_speakers_stay_members(admin: TestClient, settings: Settings) -> None:
    s = _setup(admin, settings)
    m = s["meeting_id"]
    _as(admin, "alice", PASSWORD)
    assert admin.post(f"/api/meetings/{m}/members", json={"username": "nobody"}).status_code == 422
    added = admin.post(f"/api/meetings/{m}/members", json={"username": "carol"})
    assert added.status_code == 201
    members = {x["username"]: x["spoke"] for x in added.json()["members"]}
    assert members == {"bob": True, "carol": False} and added.json()["organiser"]["username"] == "alice"
    _as(admin, "carol", PASSWORD)
    assert admin.get(f"/api/meetings/{m}/transcript").status_code == 200
    _as(admin, "alice", PASSWORD)
    assert admin.delete(f"/api/meetings/{m}/members/{s['bob']}").status_code == 409  # spoke: stays
    assert admin.delete(f"/api/meetings/{m}/members/{s['carol']}").status_code == 200
    _as(admin, "carol", PASSWORD)
    assert admin.get(f"/api/meetings/{m}/transcript").status_code == 404


# ----- the audit ----------------------------------------------------------------------------------------
@SQLITE_ONLY
def test_the_audit_records_reads_exports_admin_reads_and_deletion_without_text(
    admin: TestClient, settings: Settings
) -> None:
    s = _setup(admin, settings)
    m = s["meeting_id"]
    _as(admin, "bob", PASSWORD)
    admin.get(f"/api/meetings/{m}/transcript")
    admin.get(f"/api/meetings/{m}/captions?format=srt")
    _as(admin, "alice", PASSWORD)
    dictation = admin.post("/api/dictations", json={}).json()["meeting"]["id"]
    _as(admin, "admin", ADMIN_PASSWORD)
    assert admin.get(f"/api/meetings/{dictation}/transcript").status_code == 200  # a member's dictation
    _as(admin, "alice", PASSWORD)
    entries = admin.get(f"/api/meetings/{m}/audit").json()["entries"]
    assert [(e["actor"]["name"], e["action"]) for e in entries][:2] == [("bob", "export"), ("bob", "read")]
    assert entries[0]["detail"] == "srt" and entries[0]["address"] and entries[0]["at"]
    mine = admin.get(f"/api/meetings/{dictation}/audit").json()["entries"]
    assert [(e["actor"]["name"], e["action"], e["admin_access"]) for e in mine] == [("admin", "read", True)]
    assert admin.delete(f"/api/meetings/{m}").status_code == 200
    _as(admin, "admin", ADMIN_PASSWORD)
    entries = admin.get("/api/audit", params={"meeting_id": m}).json()["entries"]
    assert (entries[0]["actor"]["name"], entries[0]["action"]) == ("alice", "delete")  # the rows stay
    csv_text = admin.get("/api/audit.csv").text
    assert csv_text.splitlines()[0].startswith("id,at,actor_id,actor,role,via,action")
    assert "alpha" not in csv_text and "bravo" not in csv_text  # never caption text
    _as(admin, "bob", PASSWORD)
    assert admin.get("/api/audit").status_code == 403


def test_admins_reading_content_is_refused_when_the_setting_is_off(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, admins_read_content=False)
    upgrade("head", settings.database_url)
    with TestClient(create_app(settings, FakeEngine()), base_url=f"http://127.0.0.1:{settings.port}") as c:
        _as(c, "admin", ADMIN_PASSWORD)
        _user(c, "alice")
        _as(c, "alice", PASSWORD)
        dictation = c.post("/api/dictations", json={}).json()["meeting"]["id"]
        _as(c, "admin", ADMIN_PASSWORD)
        refused = c.get(f"/api/meetings/{dictation}/transcript")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_read_refused"
        assert c.get(f"/api/meetings/{dictation}/captions?format=vtt").status_code == 403
        assert c.post(f"/api/meetings/{dictation}/ticket").status_code == 403
        assert c.get(f"/api/meetings/{dictation}").status_code == 200  # administering stays
        assert c.delete(f"/api/meetings/{dictation}").status_code == 200


# ----- deletion and retention ---------------------------------------------------------------------------
def _rows_of(settings: Settings, meeting_id: int) -> dict[str, int]:
    """Rows per table that mention the meeting: every table of the metadata, by ``meeting_id`` (or ``id``
    for ``meetings``), the audit aside."""

    async def count() -> dict[str, int]:
        db = Database(settings.database_url)
        found: dict[str, int] = {}
        async with db.session() as session:
            for table in Base.metadata.sorted_tables:
                column = "id" if table.name == "meetings" else "meeting_id"
                if column not in table.c or table.name == "access_audit":
                    continue
                rows = (await session.execute(select(table).where(table.c[column] == meeting_id))).all()
                found[table.name] = len(rows)
        await db.dispose()
        return found

    return asyncio.run(count())


def test_deleting_a_meeting_leaves_no_row_of_it_in_any_table(admin: TestClient, settings: Settings) -> None:
    s = _setup(admin, settings)
    m = s["meeting_id"]
    _as(admin, "alice", PASSWORD)
    admin.put(f"/api/meetings/{m}/captions/{s['line_id']}", json={"text": "corrected"})
    admin.put(f"/api/meetings/{m}/participants/{s['bob']}", json={"display_name": "Nurse Bob"})
    admin.post(f"/api/meetings/{m}/viewer-links", json={})
    admin.post(f"/api/meetings/{m}/members", json={"username": "carol"})
    admin.post(f"/api/meetings/{m}/ticket")
    before = _rows_of(settings, m)
    filled = ("meetings", "caption_segments", "caption_edits", "stream_sessions", "meeting_participants",
              "meeting_members", "viewer_links", "tickets")  # fmt: skip
    assert all(before[t] for t in filled)
    _as(admin, "bob", PASSWORD)
    assert admin.delete(f"/api/meetings/{m}").status_code == 403  # a member may not
    _as(admin, "alice", PASSWORD)
    assert admin.delete(f"/api/meetings/{m}").json() == {"deleted": m}
    assert set(_rows_of(settings, m).values()) == {0}
    assert admin.get(f"/api/meetings/{m}").status_code == 404
    # a dictation with its note
    dictation = admin.post("/api/dictations", json={}).json()["meeting"]["id"]
    admin.put(f"/api/drafts/{dictation}", json={"text": "a note"})
    assert _rows_of(settings, dictation)["dictation_drafts"] == 1
    assert admin.delete(f"/api/meetings/{dictation}").status_code == 200
    assert set(_rows_of(settings, dictation).values()) == {0}


def _age(settings: Settings, meeting_id: int, days: int) -> None:
    async def set_old() -> None:
        db = Database(settings.database_url)
        async with db.session() as session:
            meeting = await session.get(Meeting, meeting_id)
            assert meeting is not None
            meeting.status, meeting.ended_at = MeetingStatus.ENDED, utcnow() - timedelta(days=days)
            session.add(
                ViewerLink(meeting_id=meeting_id, label="x", token_hash=f"t{meeting_id}", expires_at=utcnow())
            )
        await db.dispose()

    asyncio.run(set_old())


@pytest.fixture
def retention_client(tmp_path: Path, database_url: str) -> Iterator[tuple[TestClient, Settings]]:
    settings = make_settings(tmp_path, database_url=database_url, retention_days=30, retention_check_s=0.2)
    upgrade("head", settings.database_url)
    with TestClient(create_app(settings, FakeEngine()), base_url=f"http://127.0.0.1:{settings.port}") as c:
        _as(c, "admin", ADMIN_PASSWORD)
        yield c, settings


def test_retention_deletes_old_transcripts_on_its_schedule(retention_client: Any) -> None:
    client, settings = retention_client
    old, recent, live = (client.post("/api/meetings", json={"title": t}).json()["meeting"]["id"]
                         for t in ("old", "recent", "live"))  # fmt: skip
    _age(settings, old, 31)
    _age(settings, recent, 29)
    client.post(f"/api/meetings/{live}/start")
    deadline = time.monotonic() + 10
    while _rows_of(settings, old)["meetings"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set(_rows_of(settings, old).values()) == {0}
    assert _rows_of(settings, recent)["meetings"] == 1 and _rows_of(settings, live)["meetings"] == 1
    entries = client.get("/api/audit", params={"meeting_id": old}).json()["entries"]
    assert [(e["actor"]["name"], e["via"], e["action"]) for e in entries] == [
        ("retention", "system", "delete")
    ]


@SQLITE_ONLY
def test_deleting_a_user_removes_their_dictations_and_keeps_their_lines_as_former_member(
    admin: TestClient, settings: Settings
) -> None:
    s = _setup(admin, settings)
    m = s["meeting_id"]
    _as(admin, "bob", PASSWORD)
    dictation = admin.post("/api/dictations", json={}).json()["meeting"]["id"]
    _as(admin, "admin", ADMIN_PASSWORD)
    assert admin.delete("/api/users/1").status_code == 409  # not oneself
    assert admin.delete(f"/api/users/{s['bob']}").json() == {"deleted": s["bob"], "dictations": 1}
    assert set(_rows_of(settings, dictation).values()) == {0}
    _as(admin, "alice", PASSWORD)
    speakers = {
        line["speaker"]["name"] for line in admin.get(f"/api/meetings/{m}/transcript").json()["lines"]
    }
    assert speakers == {"alice", "Former member"}
