"""Transcripts after the meeting (``backend.api.transcripts``): a correction is stored beside the original
(which stays in ``caption_segments`` for evaluation), the exports and the meeting view's history show the
correction, the history says who changed what, speakers are renamed and merged, search finds corrected
lines in the meetings the caller may read (SQLite and PostgreSQL), and only the organiser or an admin edits.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from backend.api.transcripts import suggest_terms
from backend.config import Settings
from backend.db.models import CaptionSegment
from backend.db.session import Database
from backend.text.captions_export import export_filename
from tests.meeting_view.test_feed_and_timeline import MEMBER, _as, _member, _seed_two_speakers
from tests.support.server import ADMIN_PASSWORD

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def _stored_texts(settings: Settings, meeting_id: int) -> list[str]:
    async def read() -> list[str]:
        db = Database(settings.database_url)
        async with db.session() as session:
            rows = await session.execute(
                select(CaptionSegment.text)
                .where(CaptionSegment.meeting_id == meeting_id)
                .order_by(CaptionSegment.id)
            )
            texts = list(rows.scalars())
        await db.dispose()
        return texts

    return asyncio.run(read())


def _meeting(admin: TestClient, settings: Settings) -> tuple[int, int, int]:
    member_id = _member(admin)
    admin_id = admin.get("/api/auth/me").json()["user"]["id"]
    meeting_id = admin.post("/api/meetings", json={"title": "Ward round"}).json()["meeting"]["id"]
    _seed_two_speakers(settings, meeting_id, admin_id, member_id)
    return meeting_id, admin_id, member_id


def test_a_correction_is_kept_beside_the_original_and_shown_everywhere(
    admin: TestClient, settings: Settings
) -> None:
    meeting_id, _admin_id, _member_id = _meeting(admin, settings)
    transcript = admin.get(f"/api/meetings/{meeting_id}/transcript").json()
    assert transcript["can_edit"] is True
    lines = transcript["lines"]
    assert [line["text"] for line in lines] == ["alpha one", "bravo one", "alpha two"]
    bravo = lines[1]

    path = f"/api/meetings/{meeting_id}/captions/{bravo['id']}"
    edited = admin.put(path, json={"text": "bravo  halvorsen logistics"})
    assert edited.status_code == 200, edited.text
    again = admin.put(path, json={"text": "Bravo Halvorsen Logistics"}).json()
    assert again["line"]["text"] == "Bravo Halvorsen Logistics"
    assert again["line"]["original"] == "bravo one" and again["line"]["edited"] is True
    assert again["suggestions"] == ["Bravo Halvorsen Logistics"]  # every word differs from the last edit

    assert _stored_texts(settings, meeting_id) == ["alpha one", "alpha two", "bravo one"]  # evaluation's
    history = admin.get(f"{path}/history").json()
    assert history["original"] == "bravo one"
    assert [(e["text"], e["edited_by"]["name"]) for e in history["edits"]] == [
        ("bravo halvorsen logistics", "admin"),
        ("Bravo Halvorsen Logistics", "admin"),
    ]
    vtt = admin.get(f"/api/meetings/{meeting_id}/captions?format=vtt")
    assert "Bravo Halvorsen Logistics" in vtt.text and "bravo one" not in vtt.text
    assert 'filename="ward-round-' in vtt.headers["content-disposition"]
    captions = admin.get(f"/api/meetings/{meeting_id}/captions").json()["captions"]
    assert captions[1]["text"] == "Bravo Halvorsen Logistics"

    restored = admin.put(path, json={"text": "bravo one"}).json()["line"]
    assert restored["edited"] is False and restored["original"] is None
    assert len(admin.get(f"{path}/history").json()["edits"]) == 3

    assert admin.put(path, json={"text": "   "}).status_code == 422
    assert admin.put(path, json={"text": "x" * 2001}).status_code == 422
    other = admin.post("/api/meetings", json={"title": "Other"}).json()["meeting"]["id"]
    assert admin.put(f"/api/meetings/{other}/captions/{bravo['id']}", json={"text": "x"}).status_code == 404


@SQLITE_ONLY  # the SQL here is plain; search and the corrections also run on PostgreSQL
def test_only_the_organiser_or_an_admin_edits_participants_read(
    admin: TestClient, settings: Settings
) -> None:
    meeting_id, _admin_id, member_id = _meeting(admin, settings)
    line_id = admin.get(f"/api/meetings/{meeting_id}/transcript").json()["lines"][0]["id"]
    _as(admin, MEMBER["username"], MEMBER["password"])
    transcript = admin.get(f"/api/meetings/{meeting_id}/transcript")
    assert transcript.status_code == 200 and transcript.json()["can_edit"] is False
    put = admin.put(f"/api/meetings/{meeting_id}/captions/{line_id}", json={"text": "hijacked"})
    assert put.status_code == 403
    merge = admin.put(f"/api/meetings/{meeting_id}/speakers/{member_id}/merge", json={"into_user_id": 1})
    assert merge.status_code == 403
    assert admin.get(f"/api/meetings/{meeting_id}/captions/{line_id}/history").json()["edits"] == []


@SQLITE_ONLY  # the SQL here is plain; search and the corrections also run on PostgreSQL
def test_speakers_are_renamed_and_merged_for_the_whole_meeting(admin: TestClient, settings: Settings) -> None:
    meeting_id, admin_id, member_id = _meeting(admin, settings)
    renamed = admin.put(
        f"/api/meetings/{meeting_id}/participants/{member_id}", json={"display_name": "Nurse Joy"}
    )
    assert renamed.status_code == 200
    merge = f"/api/meetings/{meeting_id}/speakers/{admin_id}/merge"
    assert admin.put(merge, json={"into_user_id": admin_id}).status_code == 422
    assert admin.put(merge, json={"into_user_id": 999}).status_code == 422
    merged = admin.put(merge, json={"into_user_id": member_id})
    assert merged.status_code == 200, merged.text
    assert {(s["user_id"], s["name"], s["merged_into"]) for s in merged.json()["speakers"]} == {
        (admin_id, "Nurse Joy", member_id),
        (member_id, "Nurse Joy", None),
    }
    text = admin.get(f"/api/meetings/{meeting_id}/captions?format=text").text
    assert [line.split("] ")[1].split(":")[0] for line in text.splitlines()] == ["Nurse Joy"] * 3
    # renaming the label they share renames every line; undoing the merge gives the admin's lines back
    admin.put(f"/api/meetings/{meeting_id}/participants/{member_id}", json={"display_name": "Ward team"})
    lines = admin.get(f"/api/meetings/{meeting_id}/transcript").json()["lines"]
    assert {line["speaker"]["name"] for line in lines} == {"Ward team"}
    admin.put(merge, json={"into_user_id": None})
    lines = admin.get(f"/api/meetings/{meeting_id}/transcript").json()["lines"]
    assert [line["speaker"]["name"] for line in lines] == ["admin", "Ward team", "admin"]


def test_search_finds_corrected_lines_in_the_meetings_the_caller_may_read(
    admin: TestClient, settings: Settings
) -> None:
    meeting_id, _admin_id, _member_id = _meeting(admin, settings)
    lines = admin.get(f"/api/meetings/{meeting_id}/transcript").json()["lines"]
    admin.put(
        f"/api/meetings/{meeting_id}/captions/{lines[2]['id']}", json={"text": "Halvorsen Logistics call"}
    )
    hits = admin.get("/api/search", params={"q": "halvorsen"}).json()["hits"]
    assert [(h["meeting_id"], h["line_id"], h["text"]) for h in hits] == [
        (meeting_id, lines[2]["id"], "Halvorsen Logistics call")
    ]
    assert hits[0]["speaker"] == "admin" and hits[0]["start_s"] == 15.0
    assert admin.get("/api/search", params={"q": "alpha two"}).json()["hits"] == []  # corrected away
    assert [h["line_id"] for h in admin.get("/api/search", params={"q": "ALPHA"}).json()["hits"]] == [
        lines[0]["id"]
    ]
    assert admin.get("/api/search", params={"q": "  "}).status_code == 422
    assert admin.get("/api/search", params={"q": "100%_"}).json()["hits"] == []  # LIKE wildcards inert

    # a member does not find lines of the admin's dictation
    dictation = admin.post("/api/dictations", json={"title": "Private"}).json()["meeting"]["id"]
    _seed_dictation_line(settings, dictation, _admin_id)
    assert len(admin.get("/api/search", params={"q": "secret"}).json()["hits"]) == 1
    _as(admin, MEMBER["username"], MEMBER["password"])
    assert admin.get("/api/search", params={"q": "secret"}).json()["hits"] == []
    assert len(admin.get("/api/search", params={"q": "halvorsen"}).json()["hits"]) == 1
    _as(admin, "admin", ADMIN_PASSWORD)


def _seed_dictation_line(settings: Settings, meeting_id: int, user_id: int) -> None:
    from tests.meeting_view.test_feed_and_timeline import T0  # the same clock as the seeded meetings

    async def seed() -> None:
        from backend.db.models import StreamSession

        db = Database(settings.database_url)
        async with db.session() as session:
            session.add(
                StreamSession(
                    id="d",
                    meeting_id=meeting_id,
                    user_id=user_id,
                    resume_token_hash="hd",
                    resume_expires_at=T0,
                )
            )
            await session.flush()
            session.add(
                CaptionSegment(
                    meeting_id=meeting_id, session_id="d", seq=1, text="a secret note", start_s=0, end_s=1
                )
            )
        await db.dispose()

    asyncio.run(seed())


def test_a_correction_suggests_the_words_it_wrote_as_terms() -> None:
    assert suggest_terms("call halverson logistics today", "call Halvorsen Logistics today") == [
        "Halvorsen Logistics"
    ]
    assert suggest_terms("give linezolid", "give Linezolid", known={"linezolid"}) == []
    assert suggest_terms("ten thirty", "10 30") == []  # no letters
    assert suggest_terms("a", "one two three four five six seven") == []  # a rewrite, not a term


def test_the_server_export_is_named_like_the_pages_export() -> None:
    day = datetime(2026, 12, 2, 9, tzinfo=UTC)
    assert export_filename("Weekly  Stand-up: Café", "vtt", day) == "weekly-stand-up-cafe-2026-12-02.vtt"
    assert export_filename("!!!", "text", day) == "captions-2026-12-02.txt"


@SQLITE_ONLY  # the SQL here is plain; search and the corrections also run on PostgreSQL
def test_my_dictations_are_titled_by_their_first_words_and_a_dictation_left_live_ends(
    admin: TestClient, settings: Settings
) -> None:
    from datetime import timedelta

    from backend.db.models import Meeting, MeetingStatus, StreamSession
    from backend.sessions.dictations import IDLE_END_S, end_idle_dictations
    from tests.meeting_view.test_feed_and_timeline import T0

    admin_id = admin.get("/api/auth/me").json()["user"]["id"]
    named = admin.post("/api/dictations", json={"title": "Clinic letter"}).json()["meeting"]["id"]
    unnamed = admin.post("/api/dictations", json={"title": "Dictation 12/6/2026, 9:00:00 PM"}).json()
    unnamed_id = unnamed["meeting"]["id"]
    _seed_dictation_line(settings, unnamed_id, admin_id)
    left, still = (admin.post("/api/dictations", json={}).json()["meeting"]["id"] for _ in range(2))

    async def scenario() -> list[int]:
        db = Database(settings.database_url)
        now = T0 + timedelta(hours=1)
        async with db.session() as session:
            for meeting_id, ended in ((left, now - timedelta(seconds=IDLE_END_S + 5)), (still, None)):
                meeting = await session.get(Meeting, meeting_id)
                assert meeting is not None
                meeting.status, meeting.started_at = MeetingStatus.LIVE, T0
                session.add(
                    StreamSession(
                        id=f"s{meeting_id}",
                        meeting_id=meeting_id,
                        user_id=admin_id,
                        resume_token_hash=f"h{meeting_id}",
                        resume_expires_at=now + timedelta(minutes=5),
                        ended_at=ended,
                    )
                )
        ended_ids = await end_idle_dictations(db, set, now=now)
        ended_ids += await end_idle_dictations(db, lambda: {still}, now=now + timedelta(minutes=10))
        await db.dispose()
        return ended_ids

    assert asyncio.run(scenario()) == [left]  # the other one is connected here, whatever its resume window

    listed = admin.get("/api/transcripts", params={"kind": "dictation"}).json()["transcripts"]
    by_id = {t["id"]: t for t in listed}
    assert by_id[named]["display_title"] == "Clinic letter"
    assert by_id[unnamed_id]["display_title"] == "a secret note"
    assert by_id[unnamed_id]["preview"] == "a secret note" and by_id[unnamed_id]["lines"] == 1
    # listing sweeps on the real clock: the second one's resume window has closed and nothing is connected
    assert by_id[left]["status"] == "ended" and by_id[still]["status"] == "ended"
    assert by_id[named]["status"] == "scheduled"  # never started: not "left live"
    assert admin.get("/api/transcripts", params={"kind": "meeting"}).json()["transcripts"] == []
    assert admin.get("/api/transcripts", params={"kind": "x"}).status_code == 422


@SQLITE_ONLY  # the SQL here is plain; search and the corrections also run on PostgreSQL
def test_a_user_names_themself_once_and_captions_use_it(admin: TestClient, settings: Settings) -> None:
    meeting_id, _admin_id, _member_id = _meeting(admin, settings)
    assert admin.get("/api/auth/me").json()["user"]["display_name"] is None  # the page will ask
    named = admin.patch("/api/auth/me", json={"display_name": "  Dr   Grey "})
    assert named.status_code == 200 and named.json()["user"]["display_name"] == "Dr Grey"
    assert admin.get("/api/auth/me").json()["user"]["display_name"] == "Dr Grey"
    text = admin.get(f"/api/meetings/{meeting_id}/captions?format=text").text
    assert text.splitlines()[0] == "[00:00:10] Dr Grey: alpha one"
    assert admin.patch("/api/auth/me", json={"display_name": ""}).status_code == 422
    assert admin.patch("/api/auth/me", json={"display_name": "x\u200by"}).status_code == 422
