"""REST defects of the second outside probe (issue 36 item 5), each against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.meeting_view.test_view_socket import live_meeting, speak, ticket
from tests.support.fake_engine import FakeEngine
from tests.support.server import LiveServer, login, make_settings

pytestmark = pytest.mark.slow

PASSWORD = "long enough pw"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(make_settings(tmp_path), FakeEngine()) as live:
        yield live


def new_member(server: LiveServer, admin: httpx.Client, username: str) -> tuple[httpx.Client, int]:
    created = admin.post("/api/users", json={"username": username, "password": PASSWORD})
    assert created.status_code == 201, created.text
    return login(server.base_url, username, PASSWORD), created.json()["user"]["id"]


def name(api: httpx.Client, meeting_id: int, user_id: int, display_name: str | None) -> httpx.Response:
    return api.put(f"/api/meetings/{meeting_id}/participants/{user_id}", json={"display_name": display_name})


def test_an_organiser_cannot_list_usernames_through_speaker_names(server: LiveServer) -> None:
    """The probe named ids 1..N with a null name: 200 with the username for every account. Now an account
    that never took part in the meeting is a 404, the same as an id that does not exist."""
    admin = login(server.base_url)
    organiser, _ = new_member(server, admin, "organiser")
    _, outsider_id = new_member(server, admin, "outsider")
    meeting_id = live_meeting(organiser)
    for user_id in (outsider_id, 1, 999):  # another member, the admin, nobody
        answer = name(organiser, meeting_id, user_id, None)
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"] == {"code": "not_found", "message": "participant not found"}


async def test_only_participants_name_themselves_and_names_are_unique_in_a_meeting(
    server: LiveServer,
) -> None:
    admin = login(server.base_url)
    nurse, nurse_id = new_member(server, admin, "nurse")
    intruder, intruder_id = new_member(server, admin, "intruder")
    meeting_id = live_meeting(admin)
    await speak(server, admin, meeting_id, [11, 0])
    assert name(intruder, meeting_id, intruder_id, "Dr Grey").status_code == 404  # not even a member
    for username in ("intruder", "nurse"):  # members who have not taken part yet
        added = admin.post(f"/api/meetings/{meeting_id}/members", json={"username": username})
        assert added.status_code == 201
    refused = name(intruder, meeting_id, intruder_id, "Dr Grey")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_a_participant"
    assert {
        p["user_id"] for p in admin.get(f"/api/meetings/{meeting_id}/participants").json()["participants"]
    } == {1}

    assert name(admin, meeting_id, 1, "Dr Grey").status_code == 200
    ticket(nurse, meeting_id)  # the nurse opens the meeting: a participant
    taken = name(nurse, meeting_id, nurse_id, "dr  GREY")
    assert taken.status_code == 409
    assert taken.json()["error"]["errors"] == [{"field": "display_name", "reason": "taken"}]
    assert name(nurse, meeting_id, nurse_id, "admin").status_code == 200  # nobody is shown as "admin" now
    assert name(admin, meeting_id, 1, "Nurse").status_code == 200
    assert name(admin, meeting_id, nurse_id, "NURSE").status_code == 409  # the organiser too


async def test_speaker_names_are_inert_in_srt_and_text_exports(server: LiveServer) -> None:
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    await speak(server, admin, meeting_id, [11, 0])
    assert name(admin, meeting_id, 1, "<b>Dr</b> --> 00:00:00,000").status_code == 200
    export = f"/api/meetings/{meeting_id}/captions?format="
    srt = admin.get(export + "srt").text.splitlines()
    assert len(srt) == 3 and srt[1].count("-->") == 1
    assert srt[2] == "\u2039b\u203aDr\u2039/b\u203a --\u203a 00:00:00,000: word11"
    text = admin.get(export + "text").text
    assert "<" not in text and "-->" not in text
    assert "<v &lt;b&gt;Dr&lt;/b&gt; --&gt; 00:00:00,000>word11" in admin.get(export + "vtt").text


@pytest.mark.parametrize("label", ["nul\x00here", "abc\u202etxt", "zero\u200bwidth", "x" * 101])
def test_viewer_link_labels_are_validated_like_speaker_names(server: LiveServer, label: str) -> None:
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    refused = admin.post(f"/api/meetings/{meeting_id}/viewer-links", json={"label": label})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["errors"][0]["field"] == "label"
    made = admin.post(f"/api/meetings/{meeting_id}/viewer-links", json={"label": "  Café   gallery "})
    assert made.status_code == 201 and made.json()["link"]["label"] == "Café gallery"


def test_dictation_notes_have_a_per_user_quota(tmp_path: Path) -> None:
    """The probe stored 30 notes of 100,000 characters in 0.9 s; now a user's notes hold at most
    ``max_draft_chars_per_user`` characters together (here 250,000: two full notes and a half)."""
    settings = make_settings(tmp_path, max_draft_chars_per_user=250_000)
    with LiveServer(settings, FakeEngine()) as live:
        admin = login(live.base_url)
        nurse, _ = new_member(live, admin, "nurse")
        other, _ = new_member(live, admin, "other")
        notes = [nurse.post("/api/dictations", json={}).json()["meeting"]["id"] for _ in range(4)]
        full = "a" * 100_000
        assert [nurse.put(f"/api/drafts/{i}", json={"text": full}).status_code for i in notes[:2]] == [
            200
        ] * 2
        over = nurse.put(f"/api/drafts/{notes[2]}", json={"text": full})
        assert over.status_code == 413
        assert over.json()["error"]["code"] == "quota_exceeded"
        assert over.json()["error"]["errors"] == [
            {"field": "text", "reason": "quota", "max_chars_total": 250_000}
        ]
        assert nurse.put(f"/api/drafts/{notes[2]}", json={"text": "b" * 50_000}).status_code == 200
        assert (
            nurse.put(f"/api/drafts/{notes[0]}", json={"text": "c" * 100_000}).status_code == 200
        )  # a rewrite
        assert nurse.put(f"/api/drafts/{notes[0]}", json={"text": ""}).status_code == 200  # deleting frees it
        assert nurse.put(f"/api/drafts/{notes[3]}", json={"text": full}).status_code == 200
        mine = other.post("/api/dictations", json={}).json()["meeting"]["id"]
        assert other.put(f"/api/drafts/{mine}", json={"text": full}).status_code == 200  # per user


@pytest.mark.parametrize("path", ["/api/viewer-links/open", "/api/invites/check", "/api/invites/accept"])
def test_the_no_login_routes_are_rate_limited_per_client(tmp_path: Path, path: str) -> None:
    settings = make_settings(tmp_path, anonymous_requests_per_minute=5)
    with LiveServer(settings, FakeEngine()) as live, httpx.Client(base_url=live.base_url) as client:
        body = {"token": "guess", "password": "long enough password"}
        statuses = [client.post(path, json=body).status_code for _ in range(7)]
        assert statuses[:5] != [429] * 5 and statuses[5:] == [429, 429]
        limited = client.post(path, json=body)
        assert limited.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert client.get("/healthz").status_code == 200
