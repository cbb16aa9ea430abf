"""The meeting view's pieces in process: the fan-out queues (a slow viewer never slows a speaker), caption
files with speaker labels, the meeting's clock across streams, speakers' names, viewer links and a member
creating a meeting. The socket itself is tested against a real server in test_meeting_view_protocol.py."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from backend.config import Settings
from backend.db.models import CaptionSegment, Meeting, StreamSession, User, ViewerLink
from backend.db.session import Database
from backend.meeting_view.feed import MeetingFeed
from backend.meeting_view.viewers import Channel, SeqTracker, Viewer
from backend.text.captions_export import Cue, render_captions
from tests.support.server import query

T0 = datetime(2026, 12, 6, 9, 0, 0, tzinfo=UTC)
MEMBER = {"username": "nurse", "password": "long enough pw"}


# ----- the fan-out ---------------------------------------------------------------------------------------
def test_seq_tracker_counts_each_caption_once_and_keeps_only_the_gaps() -> None:
    tracker = SeqTracker(watermark=2)
    assert [tracker.add(s) for s in (1, 2, 4, 3, 4, 5, 7)] == [False, False, True, True, False, True, True]
    assert tracker.watermark == 5
    assert tracker.above == {7}
    tracker.skip_to(6)
    assert (tracker.watermark, tracker.above) == (7, set())
    tracker.skip_to(3)
    assert tracker.watermark == 7 and not tracker.add(7) and tracker.add(8)


def _segment(session_id: str, seq: int) -> CaptionSegment:
    return CaptionSegment(
        id=seq, meeting_id=1, session_id=session_id, seq=seq, text=f"w{seq}", start_s=0.0, end_s=1.0
    )


def test_a_slow_viewer_skips_partials_first_then_is_dropped_and_publishing_never_waits() -> None:
    """docs/reliability.md: a viewer that reads nothing never slows captioning: each publish is a queue
    append, the slow viewer's queue stays bounded, it loses partials first, and a final that does not fit
    drops it; a viewer that keeps up gets every final."""

    async def scenario() -> tuple[float, Viewer, Viewer, list[int]]:
        feed = MeetingFeed(Database("sqlite+aiosqlite:///:memory:"), max_queued=8)
        channel = Channel(1)
        feed.channels[1] = channel
        stuck, healthy = Viewer(1, 8), Viewer(1, 8)
        channel.viewers |= {stuck, healthy}
        speaker = _Speaker()
        received: list[int] = []
        started = time.perf_counter()
        for seq in range(1, 2001):
            for n in range(5):
                feed.publish_partial(speaker, f"partial {n}")
            feed.publish_final(speaker, _segment("s", seq))
            assert stuck.queued <= 8
            for kind, payload in await healthy.next():
                if kind == "final":
                    received.append(payload.seq)
        return time.perf_counter() - started, stuck, healthy, received

    elapsed_s, stuck, healthy, received = asyncio.run(scenario())
    assert elapsed_s < 1.0, f"12,000 publishes took {elapsed_s:.2f} s"
    assert stuck.dropped and stuck.queued == 0
    assert stuck.skipped_partials > 0
    assert not healthy.dropped and received == list(range(1, 2001))


def test_a_dropped_viewer_is_woken_and_told() -> None:
    async def scenario() -> list[Any]:
        viewer = Viewer(1, 2)
        waiting = asyncio.ensure_future(viewer.next())
        await asyncio.sleep(0)
        viewer.offer("final", 1)
        first = await waiting
        viewer.offer("final", 2)
        viewer.offer("final", 3)
        viewer.offer("final", 4)  # does not fit
        return [first, viewer.dropped, await viewer.next()]

    assert asyncio.run(scenario()) == [[("final", 1)], True, []]


def test_nothing_is_published_for_a_meeting_without_viewers() -> None:
    feed = MeetingFeed(Database("sqlite+aiosqlite:///:memory:"))
    feed.publish_partial(_Speaker(), "hello")
    feed.publish_final(_Speaker(), _segment("s", 1))
    assert feed.channels == {}


class _Speaker:
    session_id = "s"
    meeting_id = 1
    user_id = 1
    utterance = 0


def test_a_vanished_speaker_stays_reconnecting_until_resumed_or_its_resume_window_closes() -> None:
    """The connection that vanished ends later ("stopped" from its cleanup): it stays reconnecting; a late
    word from a superseded connection never undoes the resumed one's; an unresumed one stops when its
    window closes, and the viewers are told each change."""

    @dataclass
    class Connection:
        session_id: str
        generation: int = 0
        meeting_id: int = 1
        user_id: int = 7
        utterance: int = 0

    async def scenario() -> tuple[list[str], dict[str, str]]:
        feed = MeetingFeed(Database("sqlite+aiosqlite:///:memory:"))
        viewer = Viewer(1, 16)
        feed.channels[1] = Channel(1, viewers={viewer})
        a, b = Connection("a"), Connection("b")
        feed.publish_status(a, "live")
        feed.publish_status(a, "reconnecting", resume_window_s=60)
        feed.publish_status(a, "stopped")  # the vanished connection's end: not a stop
        feed.publish_status(Connection("a", generation=1), "live")  # resumed
        feed.publish_status(a, "stopped")  # the superseded connection, late
        feed.publish_status(b, "live")
        feed.publish_status(b, "reconnecting", resume_window_s=0.05)
        await asyncio.sleep(0.2)  # b's window closes unresumed
        told = [f"{s.session_id}{s.generation}:{s.state}" for _, s in await viewer.next()]
        return told, {k: v.state for k, v in feed.statuses[1].items()}

    told, known = asyncio.run(scenario())
    assert told == ["a0:live", "a0:reconnecting", "a1:live", "b0:live", "b0:reconnecting", "b0:stopped"]
    assert known == {"a": "live"}  # what a new viewer is told; b is forgotten
    with pytest.raises(ValueError, match="state must be one of"):
        MeetingFeed(Database("sqlite+aiosqlite:///:memory:")).publish_status(Connection("c"), "gone")


# ----- caption files ---------------------------------------------------------------------------------------
CUES = [
    Cue(13.0, 14.5, "bravo <one>", "Nurse & Joy"),
    Cue(10.5, 12.0, "alpha  one", "admin"),
    Cue(15.0, 16.0, "no label", None),
]


def test_webvtt_names_speakers_with_voice_tags_in_time_order_and_escapes() -> None:
    body, media = render_captions("vtt", CUES)
    assert media.startswith("text/vtt")
    assert body == (
        "WEBVTT\n\n"
        "1\n00:00:10.500 --> 00:00:12.000\n<v admin>alpha one\n\n"
        "2\n00:00:13.000 --> 00:00:14.500\n<v Nurse &amp; Joy>bravo &lt;one&gt;\n\n"
        "3\n00:00:15.000 --> 00:00:16.000\nno label\n"
    )


def test_srt_and_text_prefix_the_speaker() -> None:
    srt, _ = render_captions("srt", CUES)
    assert srt.split("\n")[:3] == ["1", "00:00:10,500 --> 00:00:12,000", "admin: alpha one"]
    assert "Nurse & Joy: bravo \u2039one\u203a" in srt  # SRT has no escapes: no tag can get through
    text, media = render_captions("text", CUES)
    assert media.startswith("text/plain")
    assert (
        text
        == "[00:00:10] admin: alpha one\n[00:00:13] Nurse & Joy: bravo \u2039one\u203a\n[00:00:15] no label\n"
    )


# ----- REST: the meeting's clock, names, links ---------------------------------------------------------
def _as(client: TestClient, username: str, password: str) -> None:
    client.cookies.clear()
    login = client.post("/api/auth/login", json={"username": username, "password": password})
    assert login.status_code == 200, login.text
    client.headers["x-csrf-token"] = login.json()["csrf_token"]


def _member(admin: TestClient) -> int:
    created = admin.post("/api/users", json=MEMBER)
    assert created.status_code == 201, created.text
    return created.json()["user"]["id"]


def _seed_two_speakers(settings: Settings, meeting_id: int, admin_id: int, member_id: int) -> None:
    """The admin's stream starts 10 s into the meeting, the member's 12 s in; rows stored out of order."""

    async def seed() -> None:
        db = Database(settings.database_url)
        async with db.session() as session:
            meeting = await session.get(Meeting, meeting_id)
            assert meeting is not None
            meeting.started_at = T0
            for sid, user, offset in (("a", admin_id, 10), ("b", member_id, 12)):
                session.add(
                    StreamSession(
                        id=sid,
                        meeting_id=meeting_id,
                        user_id=user,
                        resume_token_hash=f"h{sid}",
                        resume_expires_at=T0,
                        created_at=T0 + timedelta(seconds=offset),
                        last_seq=2 if sid == "a" else 1,
                    )
                )
            await session.flush()
            for sid, seq, start, end, text in (
                ("a", 1, 0.5, 2.0, "alpha one"),
                ("a", 2, 5.0, 6.0, "alpha two"),
                ("b", 1, 1.0, 2.5, "bravo one"),
            ):
                session.add(
                    CaptionSegment(
                        meeting_id=meeting_id,
                        session_id=sid,
                        seq=seq,
                        text=text,
                        start_s=start,
                        end_s=end,
                        words=[],
                        matched_terms=["bravo"] if sid == "b" else [],
                    )
                )
        await db.dispose()

    asyncio.run(seed())


def test_meeting_export_interleaves_speakers_on_the_meeting_clock(
    admin: TestClient, settings: Settings
) -> None:
    member_id = _member(admin)
    admin_id = admin.get("/api/auth/me").json()["user"]["id"]
    meeting_id = admin.post("/api/meetings", json={"title": "Round"}).json()["meeting"]["id"]
    _seed_two_speakers(settings, meeting_id, admin_id, member_id)
    named = admin.put(
        f"/api/meetings/{meeting_id}/participants/{member_id}", json={"display_name": "Nurse  Joy"}
    )
    assert named.status_code == 200 and named.json()["participant"]["name"] == "Nurse Joy"

    captions = admin.get(f"/api/meetings/{meeting_id}/captions").json()["captions"]
    assert [(c["text"], c["speaker"], c["meeting_start_s"]) for c in captions] == [
        ("alpha one", "admin", 10.5),
        ("bravo one", "Nurse Joy", 13.0),
        ("alpha two", "admin", 15.0),
    ]
    assert captions[1]["matched_terms"] == ["bravo"] and captions[1]["start_s"] == 1.0
    vtt = admin.get(f"/api/meetings/{meeting_id}/captions?format=vtt").text
    assert "00:00:13.000 --> 00:00:14.500\n<v Nurse Joy>bravo one" in vtt
    assert vtt.index("alpha one") < vtt.index("bravo one") < vtt.index("alpha two")
    srt = admin.get(f"/api/meetings/{meeting_id}/captions?format=srt").text
    assert "00:00:13,000 --> 00:00:14,500\nNurse Joy: bravo one" in srt
    text = admin.get(f"/api/meetings/{meeting_id}/captions?format=text").text
    assert text.splitlines() == [
        "[00:00:10] admin: alpha one",
        "[00:00:13] Nurse Joy: bravo one",
        "[00:00:15] admin: alpha two",
    ]
    listed = admin.get(f"/api/meetings/{meeting_id}/participants").json()["participants"]
    assert {(p["username"], p["name"], p["custom"]) for p in listed} == {
        ("admin", "admin", False),
        ("nurse", "Nurse Joy", True),
    }


def test_a_speaker_names_themself_only_the_organiser_renames_others(admin: TestClient) -> None:
    member_id = _member(admin)
    admin_id = admin.get("/api/auth/me").json()["user"]["id"]
    meeting_id = admin.post("/api/meetings", json={"title": "Round"}).json()["meeting"]["id"]
    assert admin.post(f"/api/meetings/{meeting_id}/members", json={"username": "nurse"}).status_code == 201
    _as(admin, MEMBER["username"], MEMBER["password"])
    path = f"/api/meetings/{meeting_id}/participants"
    assert admin.post(f"/api/meetings/{meeting_id}/ticket").status_code == 200  # opens the meeting
    assert (
        admin.put(f"{path}/{member_id}", json={"display_name": "Dr Ana"}).json()["participant"]["name"]
        == "Dr Ana"
    )
    refused = admin.put(f"{path}/{admin_id}", json={"display_name": "Boss"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    bad = admin.put(f"{path}/{member_id}", json={"display_name": "Ana\u202e"})
    assert bad.status_code == 422 and bad.json()["error"]["errors"][0]["field"] == "display_name"
    assert admin.put(f"{path}/{member_id}", json={"display_name": "x" * 101}).status_code == 422
    assert (
        admin.put(f"{path}/{member_id}", json={"display_name": None}).json()["participant"]["custom"] is False
    )
    _as(admin, "admin", "correct horse battery staple")
    assert admin.put(f"{path}/{member_id}", json={"display_name": "Ana (ward 3)"}).status_code == 200
    names = {p["user_id"]: p["name"] for p in admin.get(path).json()["participants"]}
    assert names == {member_id: "Ana (ward 3)"}


def test_viewer_links_are_stored_hashed_expire_and_are_revoked_with_typed_errors(
    admin: TestClient, settings: Settings
) -> None:
    meeting_id = admin.post("/api/meetings", json={"title": "Board"}).json()["meeting"]["id"]
    base = f"/api/meetings/{meeting_id}/viewer-links"
    created = admin.post(base, json={"label": "Public gallery", "expires_in_hours": 2})
    assert created.status_code == 201, created.text
    body = created.json()
    token, link = body["token"], body["link"]
    assert body["url"] == f"/meeting#link={token}" and link["status"] == "active"
    stored = query(settings.database_url, "SELECT token_hash, label FROM viewer_links")
    assert stored[0][1] == "Public gallery" and token not in repr(stored)

    admin.cookies.clear()  # a guest with no account
    opened = admin.post("/api/viewer-links/open", json={"token": token})
    assert opened.status_code == 200, opened.text
    assert opened.json()["meeting"]["title"] == "Board" and "owner_id" not in opened.json()["meeting"]
    unknown = admin.post("/api/viewer-links/open", json={"token": "nope"})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "link_unknown")
    assert admin.get(base).status_code == 401

    _as(admin, "admin", "correct horse battery staple")
    other = admin.post(base, json={}).json()
    _expire(settings, other["link"]["id"])
    revoked = admin.delete(f"{base}/{link['id']}")
    assert revoked.status_code == 200 and revoked.json()["link"]["status"] == "revoked"
    statuses = {row["id"]: row["status"] for row in admin.get(base).json()["links"]}
    assert statuses == {link["id"]: "revoked", other["link"]["id"]: "expired"}
    everything = admin.get("/api/viewer-links").json()["links"]
    assert {row["meeting_title"] for row in everything} == {"Board"}
    refused = admin.post("/api/viewer-links/open", json={"token": token})
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "link_revoked")
    expired = admin.post("/api/viewer-links/open", json={"token": other["token"]})
    assert (expired.status_code, expired.json()["error"]["code"]) == (403, "link_expired")
    assert admin.post(base, json={"expires_in_hours": 721}).status_code == 422


def test_only_the_organiser_makes_viewer_links(admin: TestClient) -> None:
    _member(admin)
    meeting_id = admin.post("/api/meetings", json={"title": "Board"}).json()["meeting"]["id"]
    other = admin.post("/api/meetings", json={"title": "Not theirs"}).json()["meeting"]["id"]
    assert admin.post(f"/api/meetings/{meeting_id}/members", json={"username": "nurse"}).status_code == 201
    _as(admin, MEMBER["username"], MEMBER["password"])
    refused = admin.post(f"/api/meetings/{meeting_id}/viewer-links", json={})
    assert refused.status_code == 403  # a member, not the organiser
    assert admin.post(f"/api/meetings/{other}/viewer-links", json={}).status_code == 404  # not a member
    assert admin.get("/api/viewer-links").json()["links"] == []


def test_a_member_creates_and_starts_their_own_meeting(admin: TestClient) -> None:
    """First run (issue 30 item 6): a member can open a meeting from the home page."""
    member_id = _member(admin)
    _as(admin, MEMBER["username"], MEMBER["password"])
    created = admin.post("/api/meetings", json={"title": "Handover"})
    assert created.status_code == 201, created.text
    meeting = created.json()["meeting"]
    assert meeting["owner_id"] == member_id
    started = admin.post(f"/api/meetings/{meeting['id']}/start")
    assert started.status_code == 200 and started.json()["meeting"]["status"] == "live"
    assert admin.post(f"/api/meetings/{meeting['id']}/viewer-links", json={}).status_code == 201


def _expire(settings: Settings, link_id: int) -> None:
    async def expire() -> None:
        db = Database(settings.database_url)
        async with db.session() as session:
            row = await session.get(ViewerLink, link_id)
            assert row is not None
            row.expires_at = datetime.now(UTC) - timedelta(seconds=1)
        await db.dispose()

    asyncio.run(expire())


@pytest.mark.parametrize("body", [{"label": "x" * 101}, {"expires_in_hours": 0}, {"expires_in_hours": "2"}])
def test_viewer_link_fields_are_checked(admin: TestClient, body: dict[str, Any]) -> None:
    meeting_id = admin.post("/api/meetings", json={"title": "Board"}).json()["meeting"]["id"]
    refused = admin.post(f"/api/meetings/{meeting_id}/viewer-links", json=body)
    assert refused.status_code == 422 and refused.json()["error"]["errors"][0]["field"] == next(iter(body))


def test_exports_give_written_numbers_on_request_and_the_account_name_by_default(
    admin: TestClient, settings: Settings
) -> None:
    """``form=written`` turns spoken numbers into written ones ("six hundred milligrams" -> "600 mg"),
    vocabulary terms untouched; JSON carries both forms. A speaker with no name for the meeting is labelled
    with their account's display name."""
    member_id = _member(admin)
    admin_id = admin.get("/api/auth/me").json()["user"]["id"]
    meeting_id = admin.post("/api/meetings", json={"title": "Ward"}).json()["meeting"]["id"]
    _seed_two_speakers(settings, meeting_id, admin_id, member_id)

    async def say(text: str, user_display: str) -> None:
        db = Database(settings.database_url)
        async with db.session() as session:
            segment = (
                await session.execute(select(CaptionSegment).where(CaptionSegment.text == "bravo one"))
            ).scalar_one()
            segment.text = text
            segment.matched_terms = ["two"]
            user = await session.get(User, member_id)
            assert user is not None
            user.display_name = user_display
        await db.dispose()

    asyncio.run(say("give six hundred milligrams of two twice daily", "Dr Joy Okafor"))
    base = f"/api/meetings/{meeting_id}/captions"
    spoken = admin.get(base, params={"format": "text"}).text
    assert "[00:00:13] Dr Joy Okafor: give six hundred milligrams of two twice daily" in spoken
    written = admin.get(base, params={"format": "text", "form": "written"}).text
    assert "[00:00:13] Dr Joy Okafor: give 600 mg of two twice daily" in written  # the term "two" kept
    row = next(c for c in admin.get(base).json()["captions"] if c["user_id"] == member_id)
    assert (row["text"], row["written"]) == (
        "give six hundred milligrams of two twice daily",
        "give 600 mg of two twice daily",
    )
    assert admin.get(base, params={"format": "text", "form": "loud"}).status_code == 422
