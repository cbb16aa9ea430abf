"""Issue 46 on a real uvicorn: the issue's own steps (bob, never invited, asks for alice's meeting: 404,
404, 404, refused, no hits), the view socket only for members and guest links, and deleting a meeting
while someone speaks and someone watches (the speaker's last finals, ``meeting_deleted``, 1000; the
viewer's ``ended``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from tests.meeting_view.test_view_socket import drain, live_meeting, open_view, speak, ticket, until
from tests.support.fake_engine import FakeEngine, chunk
from tests.support.server import LiveServer, login, make_settings, query

pytestmark = pytest.mark.slow

PASSWORD = "long enough pw"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(make_settings(tmp_path), FakeEngine()) as live:
        live.services.hub.feed.poll_s = 0.2
        yield live


async def test_the_issues_steps_now_get_404_and_no_hits(server: LiveServer) -> None:
    admin = login(server.base_url)
    for name in ("alice", "bob"):
        assert admin.post("/api/users", json={"username": name, "password": PASSWORD}).status_code == 201
    alice, bob = login(server.base_url, "alice", PASSWORD), login(server.base_url, "bob", PASSWORD)
    meeting_id = live_meeting(alice)
    await speak(server, alice, meeting_id, [11, 0])

    assert meeting_id not in [m["id"] for m in bob.get("/api/meetings").json()["meetings"]]
    for path in ("", "/transcript", "/captions", "/captions?format=vtt", "/participants"):
        assert bob.get(f"/api/meetings/{meeting_id}{path}").status_code == 404, path
    assert bob.post(f"/api/meetings/{meeting_id}/ticket").status_code == 404  # he cannot speak into it
    assert bob.get("/api/search", params={"q": "word11"}).json()["hits"] == []
    assert alice.get("/api/search", params={"q": "word11"}).json()["hits"]

    # a guest link is still the organiser's to make, and opens the view
    assert bob.post(f"/api/meetings/{meeting_id}/viewer-links", json={}).status_code == 404
    link = alice.post(f"/api/meetings/{meeting_id}/viewer-links", json={}).json()["token"]
    view = await open_view(server, f"link.{link}")
    assert [m["text"] for m in await until(view, "caught_up") if m["type"] == "final"] == ["word11"]
    await view.close()
    # once alice adds him, bob reads and watches
    assert alice.post(f"/api/meetings/{meeting_id}/members", json={"username": "bob"}).status_code == 201
    assert bob.get(f"/api/meetings/{meeting_id}/transcript").status_code == 200
    view = await open_view(server, f"ticket.{ticket(bob, meeting_id)}")
    assert (await until(view, "caught_up"))[0]["type"] == "ready"
    await view.close()
    actions = [e["action"] for e in alice.get(f"/api/meetings/{meeting_id}/audit").json()["entries"]]
    assert {"ticket", "read", "viewer_link", "member_added"} <= set(actions)


async def test_deleting_a_live_meeting_ends_its_speaker_and_viewer_then_erases_it(server: LiveServer) -> None:
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    speaker = await connect(
        server.ws_url,
        subprotocols=["captions.v1", f"ticket.{ticket(admin, meeting_id)}"],
        origin=server.origin,
        compression=None,
    )
    await speaker.send(json.dumps({"type": "start", "chunk_s": 0.56}))
    assert json.loads(await speaker.recv())["type"] == "ready"
    view = await open_view(server, f"ticket.{ticket(admin, meeting_id)}")
    await until(view, "caught_up")
    await speaker.send(chunk(21))  # an utterance under way: flushed as the last final

    assert admin.delete(f"/api/meetings/{meeting_id}").json() == {"deleted": meeting_id}
    said = await drain(speaker)
    assert [m["type"] for m in said][-2:] == ["final", "error"] and said[-1]["code"] == "meeting_deleted"
    assert speaker.close_code == 1000
    watched = await drain(view)
    assert watched[-1]["type"] == "ended" and view.close_code == 1000
    for table in ("meetings", "caption_segments", "stream_sessions", "tickets"):
        column = "id" if table == "meetings" else "meeting_id"
        assert query(
            server.settings.database_url, f"SELECT COUNT(*) FROM {table} WHERE {column} = {meeting_id}"
        ) == [(0,)]  # noqa: S608, E501
    assert admin.post(f"/api/meetings/{meeting_id}/ticket").status_code == 404
