"""The read-only meeting view (``/ws/view``, ``captions.view.v1``) against a real uvicorn on 127.0.0.1, the
fake engine standing in for the decoder (docs/protocol.md, "Meeting view (read-only)")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.support.fake_engine import FakeEngine, chunk
from tests.support.server import LiveServer, login, make_settings

pytestmark = pytest.mark.slow

MEMBER = {"username": "nurse", "password": "long enough pw"}
POLL_S = 0.3


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with LiveServer(make_settings(tmp_path), FakeEngine()) as live:
        live.services.hub.feed.poll_s = POLL_S
        yield live


def live_meeting(api: httpx.Client) -> int:
    meeting_id = api.post("/api/meetings", json={"title": "Ward round", "chunk_s": 0.56}).json()["meeting"][
        "id"
    ]
    assert api.post(f"/api/meetings/{meeting_id}/start").status_code == 200
    return meeting_id


def member(server: LiveServer, admin: httpx.Client) -> tuple[httpx.Client, int]:
    created = admin.post("/api/users", json=MEMBER)
    assert created.status_code == 201, created.text
    return login(server.base_url, MEMBER["username"], MEMBER["password"]), created.json()["user"]["id"]


def ticket(api: httpx.Client, meeting_id: int) -> str:
    return api.post(f"/api/meetings/{meeting_id}/ticket").json()["ticket"]


async def open_view(
    server: LiveServer, credential: str | None, origin: str | None = None
) -> ClientConnection:
    protocols = ["captions.view.v1"] + ([credential] if credential else [])
    url = f"ws://127.0.0.1:{server.settings.port}/ws/view"
    return await connect(url, subprotocols=protocols, origin=origin or server.origin, compression=None)


async def speak(server: LiveServer, api: httpx.Client, meeting_id: int, samples: list[int]) -> list[dict]:
    """One speaker's stream: the chunks, then stop; every message the speaker got."""
    ws = await connect(
        server.ws_url,
        subprotocols=["captions.v1", f"ticket.{ticket(api, meeting_id)}"],
        origin=server.origin,
        compression=None,
    )
    await ws.send(json.dumps({"type": "start", "chunk_s": 0.56}))
    assert json.loads(await ws.recv())["type"] == "ready"
    for sample in samples:
        await ws.send(chunk(sample))
    await ws.send(json.dumps({"type": "stop"}))
    return await drain(ws)


async def drain(ws: ClientConnection) -> list[dict[str, Any]]:
    messages = []
    try:
        async for raw in ws:
            messages.append(json.loads(raw))
    except ConnectionClosed:
        pass
    return messages


async def until(ws: ClientConnection, kind: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Messages up to and including the first of ``kind``."""
    got: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout_s):
        while not got or got[-1]["type"] != kind:
            got.append(json.loads(await ws.recv()))
    return got


async def test_viewer_gets_history_then_every_speaker_live_on_the_meeting_clock(server: LiveServer) -> None:
    admin = login(server.base_url)
    nurse, nurse_id = member(server, admin)
    meeting_id = live_meeting(admin)
    await speak(server, admin, meeting_id, [11, 12, 0])
    assert nurse.post(f"/api/meetings/{meeting_id}/ticket").status_code == 404  # not a member yet
    assert admin.post(f"/api/meetings/{meeting_id}/members", json={"username": "nurse"}).status_code == 201
    view = await open_view(server, f"ticket.{ticket(nurse, meeting_id)}")
    renamed = nurse.put(  # a participant now: the nurse opened the meeting
        f"/api/meetings/{meeting_id}/participants/{nurse_id}", json={"display_name": "Nurse Joy"}
    )
    assert renamed.status_code == 200

    assert view.subprotocol == "captions.view.v1"
    start = await until(view, "caught_up")
    assert start[0]["type"] == "ready" and start[0]["meeting"]["title"] == "Ward round"
    history = [m for m in start if m["type"] == "final"]
    assert [(m["text"], m["speaker"]["name"]) for m in history] == [("word11 word12", "admin")]
    assert start[-1] == {"type": "caught_up", "finals": 1, "ended": False}
    assert server.services.hub.slots.total == 0  # a viewer holds no speaking slot

    spoken = await speak(server, nurse, meeting_id, [21, 22, 0])
    assert [m["text"] for m in spoken if m["type"] == "final"] == ["word21 word22"]
    live = await until(view, "final")
    partials = [m for m in live if m["type"] == "partial"]
    assert [p["text"] for p in partials][:2] == ["word21", "word21 word22"]
    assert {p["speaker"]["name"] for p in partials} == {"Nurse Joy"}
    final = live[-1]
    assert (final["text"], final["speaker"], final["seq"]) == (
        "word21 word22",
        {"user_id": nurse_id, "name": "Nurse Joy"},
        1,
    )
    assert (
        final["meeting_start_s"] > history[0]["meeting_start_s"]
    )  # later stream, later on the meeting's clock
    assert final["start_s"] == 0.0

    assert admin.post(f"/api/meetings/{meeting_id}/end").status_code == 200
    assert not [m for m in await until(view, "ended") if m["type"] == "final"]
    await drain(view)
    assert view.close_code == 1000


async def test_a_viewer_on_another_replica_gets_the_speakers_captions(
    tmp_path: Path, database_url: str
) -> None:
    """Replica A serves the speaker, replica B the viewer; they share only the database. On PostgreSQL
    everything is pushed over LISTEN/NOTIFY (partials too, renames, revoked links, the end, no poller); on
    SQLite B's poller reads the finals from SQL and partials stay on A."""
    a = LiveServer(make_settings(tmp_path / "a", database_url=database_url), FakeEngine()).start()
    b = LiveServer(
        make_settings(tmp_path / "b", database_url=database_url), FakeEngine(), migrate=False
    ).start()
    on_postgres = database_url.startswith("postgresql")
    try:
        b.services.hub.feed.poll_s = POLL_S
        admin_a, admin_b = login(a.base_url), login(b.base_url)
        meeting_id = live_meeting(admin_a)
        link = admin_a.post(f"/api/meetings/{meeting_id}/viewer-links", json={"label": "Hall"}).json()
        view = await open_view(b, f"ticket.{ticket(admin_b, meeting_id)}")
        linked = await open_view(b, f"link.{link['token']}")
        ready = (await until(view, "caught_up"))[0]
        await until(linked, "caught_up")
        assert ready["poll_s"] == (None if on_postgres else POLL_S)
        await speak(a, admin_a, meeting_id, [31, 0, 32, 33, 0])
        got = await until(view, "final")
        got += await until(view, "final")
        assert [m["text"] for m in got if m["type"] == "final"] == ["word31", "word32 word33"]
        partials = [m["text"] for m in got if m["type"] == "partial"]
        if not on_postgres:
            assert partials == []  # partials stay on the speaker's replica
            await view.close()
            return
        assert partials[:1] == ["word31"] and "word32 word33" in partials
        assert [(m["speaker"]["name"], m["state"]) for m in got if m["type"] == "speaker_status"] == [
            ("admin", "live")
        ]  # the speaker's status crosses replicas too
        channels = b.services.hub.feed.channels
        assert channels[meeting_id].poller is not None and channels[meeting_id].poller.done()  # no poller

        admin_id = admin_a.get("/api/auth/me").json()["user"]["id"]
        renamed = admin_a.put(
            f"/api/meetings/{meeting_id}/participants/{admin_id}", json={"display_name": "Chair"}
        )
        assert renamed.status_code == 200
        told = await until(view, "speaker", 3)
        assert told[-1] == {
            "type": "speaker",
            "user_id": admin_id,
            "name": "Chair",
        }

        assert (
            admin_a.delete(f"/api/meetings/{meeting_id}/viewer-links/{link['link']['id']}").status_code == 200
        )
        assert (await until(linked, "error", 3))[-1]["code"] == "link_revoked"

        assert admin_a.post(f"/api/meetings/{meeting_id}/end").status_code == 200
        told += await until(view, "ended", 3)
        assert ("speaker_status", "stopped") in [(m["type"], m.get("state")) for m in told]
        await drain(view)
        assert view.close_code == 1000
    finally:
        a.stop()
        b.stop()


async def test_a_viewer_link_opens_the_view_and_revoking_it_closes_the_view(server: LiveServer) -> None:
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    created = admin.post(f"/api/meetings/{meeting_id}/viewer-links", json={"label": "Gallery"}).json()
    view = await open_view(server, f"link.{created['token']}")
    assert (await until(view, "caught_up"))[0]["type"] == "ready"

    assert admin.delete(f"/api/meetings/{meeting_id}/viewer-links/{created['link']['id']}").status_code == 200
    error = (await until(view, "error"))[-1]
    assert error["code"] == "link_revoked"
    await drain(view)
    assert view.close_code == 1008
    with pytest.raises(InvalidStatus) as refused:
        await open_view(server, f"link.{created['token']}")
    assert refused.value.response.status_code == 403


async def test_the_view_is_read_only_and_checks_origin_and_credentials(server: LiveServer) -> None:
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    for credential, origin in (
        (f"ticket.{ticket(admin, meeting_id)}", "https://evil.example"),
        (None, None),
        ("link.not-a-link", None),
    ):
        with pytest.raises(InvalidStatus) as refused:
            await open_view(server, credential, origin)
        assert refused.value.response.status_code == 403
    used = ticket(admin, meeting_id)
    view = await open_view(server, f"ticket.{used}")
    await until(view, "caught_up")
    with pytest.raises(InvalidStatus):
        await open_view(server, f"ticket.{used}")  # single use
    await view.send(json.dumps({"type": "keepalive"}))
    await view.send(chunk(11))
    messages = await drain(view)
    assert messages[-1]["type"] == "error" and "read-only" in messages[-1]["message"]
    assert view.close_code == 1008


async def test_a_draining_server_tells_viewers_to_reconnect(server: LiveServer) -> None:
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    view = await open_view(server, f"ticket.{ticket(admin, meeting_id)}")
    await until(view, "caught_up")
    stopping = asyncio.create_task(asyncio.to_thread(server.stop))
    assert (await until(view, "reconnect"))[-1] == {"type": "reconnect", "reason": "server restarting"}
    await drain(view)
    assert view.close_code == 1012
    await stopping


async def test_a_stalled_viewer_is_dropped_and_never_slows_the_speaker(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/reliability.md row 23, end to end: the viewer's socket task stalls for 3 s on its first event;
    the speaker's five finals all arrive meanwhile, the viewer's queue (4 events) overflows and it is closed
    1013 ``too_slow``."""
    from backend.meeting_view.viewer_ws import MeetingViewerSocket

    deliver = MeetingViewerSocket._deliver

    async def stalled(self: Any, *args: Any) -> bool:
        await asyncio.sleep(3.0)
        return await deliver(self, *args)

    monkeypatch.setattr(MeetingViewerSocket, "_deliver", stalled)
    server.services.hub.feed.max_queued = 4
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    view = await open_view(server, f"ticket.{ticket(admin, meeting_id)}")
    await until(view, "caught_up")

    ws = await connect(
        server.ws_url,
        subprotocols=["captions.v1", f"ticket.{ticket(admin, meeting_id)}"],
        origin=server.origin,
        compression=None,
    )
    await ws.send(json.dumps({"type": "start", "chunk_s": 0.56}))
    assert json.loads(await ws.recv())["type"] == "ready"
    started = asyncio.get_running_loop().time()
    for word in range(41, 46):  # 5.6 s of audio in 1.5 s: within the rate budget (1.5x + 4 s)
        for sample in (word, 0):
            await ws.send(chunk(sample))
            await asyncio.sleep(0.15)
    await ws.send(json.dumps({"type": "stop"}))
    spoken = await drain(ws)
    took_s = asyncio.get_running_loop().time() - started
    assert [m["text"] for m in spoken if m["type"] == "final"] == [f"word{n}" for n in range(41, 46)]
    assert took_s < 2.9, f"the speaker took {took_s:.1f} s: it waited for the stalled viewer"

    messages = await drain(view)
    assert messages[-1]["type"] == "error" and messages[-1]["code"] == "too_slow"
    assert view.close_code == 1013


async def statuses(view: ClientConnection, count: int) -> list[tuple[str, str]]:
    """The next ``count`` ``speaker_status`` messages as (speaker name, state), skipping captions."""
    got: list[tuple[str, str]] = []
    async with asyncio.timeout(10.0):
        while len(got) < count:
            message = json.loads(await view.recv())
            if message["type"] == "speaker_status":
                got.append((message["speaker"]["name"], message["state"]))
    return got


async def test_viewers_see_each_speaker_live_reconnecting_live_again_then_stopped(server: LiveServer) -> None:
    """A speaker's socket vanishes without ``stop``: viewers see it reconnecting (not "Live"), live again
    once it resumes with its resume token, stopped after ``stop``; a viewer who joins meanwhile is told
    where each speaker stands."""
    admin = login(server.base_url)
    meeting_id = live_meeting(admin)
    view = await open_view(server, f"ticket.{ticket(admin, meeting_id)}")
    await until(view, "caught_up")

    async def speaker(**start: Any) -> tuple[ClientConnection, dict[str, Any]]:
        ws = await connect(
            server.ws_url,
            subprotocols=["captions.v1", f"ticket.{ticket(admin, meeting_id)}"],
            origin=server.origin,
            compression=None,
        )
        await ws.send(json.dumps({"type": "start", "chunk_s": 0.56, **start}))
        ready = json.loads(await ws.recv())
        assert ready["type"] == "ready", ready
        return ws, ready

    ws, ready = await speaker()
    assert await statuses(view, 1) == [("admin", "live")]
    await ws.send(chunk(31))
    ws.transport.abort()  # the speaker's network drops: no stop, no close handshake
    assert await statuses(view, 1) == [("admin", "reconnecting")]

    late = await open_view(server, f"ticket.{ticket(admin, meeting_id)}")
    assert await statuses(late, 1) == [("admin", "reconnecting")]  # what the feed knows, on joining

    ws, again = await speaker(resume_token=ready["resume_token"], last_seq=0)
    assert again["session_id"] == ready["session_id"]
    assert await statuses(view, 1) == [("admin", "live")]
    await ws.send(json.dumps({"type": "stop"}))
    assert [m["type"] for m in await drain(ws)][-1] == "stopped"
    assert await statuses(view, 1) == [("admin", "stopped")]
    assert await statuses(late, 2) == [("admin", "live"), ("admin", "stopped")]
    assert server.services.hub.feed.statuses == {}  # a stopped session is forgotten
    await view.close()
    await late.close()
